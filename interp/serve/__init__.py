"""``interp serve``: one process around one loaded model and its dictionaries, speaking Neuronpedia's inference
API and its graph-server API, and serving the named folders' files.

- :mod:`.app`: the FastAPI app, routers by API; :mod:`.server`: running it (:func:`serve`, :func:`serving`);
- :mod:`.neuronpedia`: the inference API (``/v1/...``); :mod:`.graph_server`: ``/generate-graph`` and ``/steer``;
- :mod:`.files` and :mod:`.folders`: files served read-only from the named folders only;
- :mod:`.state` (:class:`Served`, what one server holds), :mod:`.sources` (dictionaries as Neuronpedia's
  ``LAYER-SETNAME`` sources), :mod:`.prompts`, :mod:`.limits`;
- :mod:`.queue` (one computation at a time on the model, cancellable) and :mod:`.work` (a route's computation
  queued and stopped when its client goes away); :mod:`.guard` (the secret and the body's size) and
  :mod:`.errors` (every refusal one line of JSON with a 4xx).

Every route calls library functions that tests already check; the server adds validation, the queue,
streaming and nothing else. See ``docs/workbench.md``.

Example:
    >>> served = Served(model, "smollm2-135m", Sources([("res", saes)]))  # doctest: +SKIP
    >>> with serving(served) as url:  # doctest: +SKIP
    ...     ...
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from typing import Any

_PUBLIC = {
    "Limits": "limits",
    "Served": "state",
    "Sources": "sources",
    "serve": "server",
    "serving": "server",
}
__all__ = sorted(_PUBLIC)


def require() -> None:
    """Raise one line naming what to install when FastAPI, uvicorn or pydantic is missing."""
    missing = [name for name in ("fastapi", "uvicorn", "pydantic") if find_spec(name) is None]
    if missing:
        raise ImportError(
            f"interp serve needs FastAPI, uvicorn and pydantic ({', '.join(missing)} not installed): "
            "pip install 'interp[serve]'"
        )


def __getattr__(name: str) -> Any:
    """The public names, imported on first use (so that ``interp --help`` needs no web framework)."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'interp.serve' has no attribute {name!r}")
    require()
    return getattr(import_module(f"{__name__}.{_PUBLIC[name]}"), name)
