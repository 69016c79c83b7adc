"""The workbench pages' own assets, read with :func:`interp.report.assets.read_asset`: the navigation and each
page's body (``nav.html``, ``home.html``, ``prompt.html``, ``feature.html``, ``search.html``, ``steer.html``),
its script (``home.js`` ...), what every page's script uses (``api.js``: the server's JSON routes, and the
pieces every page draws), the form that traces a new graph with its progress (``trace.js``, also on the live
graph viewer) and the styles (``workbench.css``)."""
