"""The CSS and JavaScript inlined into every report page.

They are inlined rather than linked so that ``index.html`` opens from the file system with no other file and
no network. The page's Content-Security-Policy allows only inline styles and scripts and ``data:`` images, so
a report that tried to load anything else would fail loudly (a console error) instead of quietly phoning out.
"""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "font-src 'none'; connect-src 'none'; form-action 'none'; base-uri 'none'"
)

CSS = """
:root { --fg:#1d2125; --muted:#5b6570; --line:#dde1e6; --bg:#ffffff; --panel:#f6f8fa; --accent:#2f6fb3; }
* { box-sizing: border-box; }
body { margin:0; color:var(--fg); background:var(--bg);
  font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace;
  font-size: 0.9em; }
code { background: var(--panel); padding: 0 0.25em; border-radius: 3px; }
pre { background: var(--panel); padding: 0.75em; overflow: auto; max-height: 30em; border-radius: 4px; }
a { color: var(--accent); }
#toc { position: fixed; top: 0; left: 0; bottom: 0; width: 15rem; overflow-y: auto; padding: 1.25rem 1rem;
  border-right: 1px solid var(--line); background: var(--panel); font-size: 0.9em; }
#toc h2 { font-size: 0.8em; text-transform: uppercase; letter-spacing: 0.06em; color: var(--muted);
  margin: 0 0 .5em; }
#toc ul { list-style: none; padding: 0; margin: 0; }
#toc li a { display: block; padding: 0.2em 0.4em; border-radius: 3px; text-decoration: none;
  color: var(--fg); }
#toc li a:hover { background: var(--line); }
main { margin-left: 15rem; padding: 1.5rem 2.5rem 4rem; max-width: 72rem; }
h1 { font-size: 1.6em; margin: 0 0 0.3em; }
h2 { font-size: 1.25em; margin: 2em 0 0.6em; padding-bottom: 0.2em; border-bottom: 1px solid var(--line); }
.subtitle { color: var(--muted); margin: 0 0 1.25em; }
.headline { display: flex; flex-wrap: wrap; gap: 0.75rem; margin: 1rem 0 1.5rem; }
.kpi { border: 1px solid var(--line); border-left: 4px solid var(--accent); border-radius: 4px;
  padding: 0.6em 0.9em; min-width: 11em; max-width: 26em; background: var(--bg); }
.kpi .label { color: var(--muted); font-size: 0.85em; }
.kpi .value { font-size: 1.45em; font-weight: 600; font-variant-numeric: tabular-nums; }
.kpi .unit { font-size: 0.6em; font-weight: 400; color: var(--muted); }
.kpi .ci, .kpi .hnote { color: var(--muted); font-size: 0.8em; }
figure { margin: 1.25em 0; }
figure img { display: block; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 0.9em; margin: 0.4em 0; }
figcaption p { margin: 0; }
.table-wrap { max-height: 32em; overflow: auto; border: 1px solid var(--line); border-radius: 4px; }
table { border-collapse: collapse; font-size: 0.88em; font-variant-numeric: tabular-nums; width: max-content;
  min-width: 100%; }
th, td { padding: 0.3em 0.7em; border-bottom: 1px solid var(--line); text-align: left; white-space: pre; }
thead th { position: sticky; top: 0; background: var(--panel); z-index: 1; }
tbody th { font-weight: 500; color: var(--muted); }
.num { text-align: right; }
tbody tr:hover { background: #f0f4f9; }
.note { color: var(--muted); font-size: 0.85em; margin: 0.3em 0; }
dl.provenance { display: grid; grid-template-columns: max-content 1fr; gap: 0.2em 1em; font-size: 0.9em; }
dl.provenance dt { color: var(--muted); }
dl.provenance dd { margin: 0; overflow-wrap: anywhere; }
@media (max-width: 900px) { #toc { position: static; width: auto; border-right: 0;
  border-bottom: 1px solid var(--line); } main { margin-left: 0; padding: 1rem; } }
@media print { #toc { display: none; } main { margin-left: 0; } }
"""

# Fills the results viewer from the embedded JSON when it is first opened, with textContent, never innerHTML.
JS = """
(function () {
  "use strict";
  var details = document.getElementById("results-details");
  var data = document.getElementById("interp-results");
  var out = document.getElementById("results-json");
  if (!details || !data || !out) { return; }
  details.addEventListener("toggle", function () {
    if (details.open && !out.textContent) {
      out.textContent = JSON.stringify(JSON.parse(data.textContent), null, 2);
    }
  });
})();
"""
