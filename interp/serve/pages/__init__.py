"""The workbench's pages, served by ``interp serve`` beside its APIs: one router, :data:`router`
(``build_app(served, routers=[router])``; ``interp serve`` includes it).

- :mod:`.home`: ``/``, what the named folders hold (graphs, dashboard scans, reports, pages, explanations);
- :mod:`.prompt`: ``/prompt``, each token's top features in a source set, labelled where explained;
- :mod:`.feature`: ``/feature``, a feature's label, dashboard (from a scan, else what is known without one)
  and activations on a prompt;
- :mod:`.search`: ``/search``, the labels by their words or their meaning (MiniLM);
- :mod:`.steer`: ``/steer``, steered against default completions and the next token's logits;
- :mod:`.graphs`: ``/live/graph/...``, a folder's graph in the viewer with live interventions;
  :mod:`.trace`: tracing a new graph with its progress, then its viewer;
- :mod:`.labels` (explanations and clerps, tied to the served dictionaries), :mod:`.logits` (the next token
  before and after an edit), :mod:`.page` (the page shell and what every page knows), :mod:`.state` (what the
  pages keep). The pages' own scripts and styles are in ``assets/``.

Every route is a library call a test already checks, behind the server's validation and queue; pages load
nothing from outside the server and call only its JSON routes. See ``docs/workbench.md``.
"""

from __future__ import annotations

from fastapi import APIRouter

from interp.serve.pages import feature, graphs, home, prompt, search, steer, trace

router = APIRouter()
for _part in (home, prompt, feature, search, steer, graphs, trace):
    router.include_router(_part.router)

__all__ = ["router"]
