"""What one server holds: the one loaded model and its name, the dictionaries as sources, the transcoders that
graphs are traced with, the folders it may serve files from, its limits and the queue in front of the model.

Routes reach it as ``request.app.state.served``; a route never loads or copies a model or dictionary, so the
process holds one copy of each whatever the number of requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from interp.dictionary import SparseDictionary
from interp.serve.errors import RequestError
from interp.serve.folders import Folders
from interp.serve.limits import Limits
from interp.serve.queue import Engine
from interp.serve.sources import Source, Sources


@dataclass
class Served:
    """The server's state (see the module docstring).

    Attributes:
        model: the :class:`~interp.HookedTransformer`.
        model_id: the name requests give for it (``--model-id``).
        sources: every dictionary's layers, by Neuronpedia's names.
        transcoders: the transcoder set or CLT that ``/generate-graph`` and ``/steer`` use, or ``None``.
        transcoders_name: how graphs name it (their ``metadata.scan``, as ``interp attribute`` writes it).
        folders: the folders whose files may be served.
        limits: what one request may ask.
        secret: the secret every request must carry, or ``None``.
    """

    model: Any
    model_id: str
    sources: Sources
    transcoders: SparseDictionary | None = None
    transcoders_name: str = ""
    folders: Folders = field(default_factory=lambda: Folders([]))
    limits: Limits = field(default_factory=Limits)
    secret: str | None = None
    engine: Engine = field(init=False)

    def __post_init__(self) -> None:
        self.engine = Engine(self.limits.max_waiting)

    def check_model(self, model_id: str, field_name: str = "model") -> None:
        """Refuse a request for another model (404 naming the one served)."""
        if model_id != self.model_id:
            raise RequestError(
                404, f"{field_name} {model_id!r} is not served here; this server serves {self.model_id!r}"
            )

    def source(self, model_id: str, name: str) -> Source:
        """The source ``name`` of a request for ``model_id`` (404 for another model or an unknown source)."""
        self.check_model(model_id)
        return self.sources.get(name)

    def graph_transcoders(self) -> SparseDictionary:
        """The transcoders graphs are traced with (422 when the server was started without them)."""
        if self.transcoders is None:
            raise RequestError(
                422, "this server was started without --transcoders, which attribution graphs and /steer need"
            )
        return self.transcoders
