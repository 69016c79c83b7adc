"""What the workbench pages keep between requests, one per app: the served dictionaries' identities, the labels
found in the named folders (read again when their files change), the sentence encoder of search by meaning
(loaded on its first use) and the graphs traced from the pages (the last :data:`TRACED` of them, in memory:
the server writes nothing to disk).

Routes reach it with :func:`workbench`; it is made on first use, from the app's
:class:`~interp.serve.state.Served`, so the app needs no set-up of its own for the pages.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from interp.serve.errors import RequestError
from interp.serve.pages.labels import Identities, Labels, read_labels, signature

TRACED = 16
"""Traced graphs kept for their pages; the oldest goes when one more is traced."""


@dataclass(frozen=True)
class TracedGraph:
    """A graph traced from the pages: its viewer page, its graph document, and where its features' dashboards
    are (a served folder's name and the scan's path in it), if any."""

    page: str
    doc: dict[str, Any]
    dashboards: tuple[str, str] | None


class Workbench:
    """The pages' state for one server (see the module docstring)."""

    def __init__(self, served: Any) -> None:
        self.served = served
        self._identities: Identities | None = None
        self._labels: tuple[Any, Labels] | None = None
        self._encoder: Any = None
        self._embedded: tuple[Any, list[str], Any] | None = None
        self._traced: OrderedDict[str, TracedGraph] = OrderedDict()

    @property
    def identities(self) -> Identities:
        """The served model's and dictionaries' fingerprints, computed once."""
        if self._identities is None:
            self._identities = Identities(self.served)
        return self._identities

    def labels(self) -> Labels:
        """The labels of the named folders, read again only when a file they come from changed."""
        key = signature(self.served.folders)
        if self._labels is None or self._labels[0] != key:
            self._labels = (key, read_labels(self.served, self.identities))
        return self._labels[1]

    async def current_labels(self) -> Labels:
        """:meth:`labels`, read in a worker thread (it reads files and may fingerprint the model), so that the
        server goes on answering other requests meanwhile."""
        return await run_in_threadpool(self.labels)

    def encoder(self) -> Any:
        """The packaged MiniLM as a sentence encoder (``minilm-l6``), loaded on first use."""
        if self._encoder is None:
            from interp.load import load
            from interp.sae.explanations.embedding import SentenceEmbedder

            self._encoder = SentenceEmbedder(load("minilm-l6"))
        return self._encoder

    def embedded(self, labels: Labels) -> tuple[list[str], Any]:
        """The label texts and their unit embeddings ``[n, d]``, computed once per set of labels."""
        if self._embedded is None or self._embedded[0] is not labels:
            texts = sorted({label.text for label in labels.all})
            self._embedded = (labels, texts, self.encoder().encode(texts))
        return self._embedded[1], self._embedded[2]

    def keep(self, graph: TracedGraph) -> str:
        """Keep a traced graph; its id."""
        found = secrets.token_hex(6)
        self._traced[found] = graph
        while len(self._traced) > TRACED:
            self._traced.popitem(last=False)
        return found

    def traced(self, found: str) -> TracedGraph:
        """The traced graph ``found`` (404 once it is gone)."""
        if found not in self._traced:
            raise RequestError(
                404,
                f"no traced graph {found!r}: this server keeps the last {TRACED} graphs traced from its pages, "
                "in memory until it stops; trace it again",
            )
        return self._traced[found]


def workbench(request: Request) -> Workbench:
    """The app's :class:`Workbench`, made on first use."""
    state = request.app.state
    found = getattr(state, "workbench", None)
    if found is None:
        found = state.workbench = Workbench(state.served)
    return found
