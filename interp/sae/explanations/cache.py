"""A cache of answers, so that a rerun asks nothing twice.

Answers are kept in one JSON Lines file, one ``{"key", "reply"}`` object a line, where ``key`` is
:meth:`ChatRequest.key <interp.sae.explanations.chat.ChatRequest.key>`: a hash of the model's name, the
messages and the sampling settings. Each answer is appended and flushed to disk as soon as it arrives, so a run
that is stopped keeps every answer it had; a line cut short by the stop is skipped when the file is read again.
Failures are not kept: the next run asks again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from interp.sae.explanations.chat import Backend, ChatFailure, ChatReply, ChatRequest


class ResponseCache:
    """Answers by request key, backed by a JSON Lines file (or held in memory with ``path=None``)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self._replies: dict[str, ChatReply] = {}
        if self.path is not None and self.path.is_file():
            self._read(self.path)

    def _read(self, path: Path) -> None:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                self._replies[entry["key"]] = ChatReply.from_json(entry["reply"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue  # a line cut short when a run was stopped: that answer is asked again

    def __len__(self) -> int:
        return len(self._replies)

    def get(self, key: str) -> ChatReply | None:
        return self._replies.get(key)

    def put(self, key: str, reply: ChatReply) -> None:
        self._replies[key] = reply
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"key": key, "reply": reply.to_json()}, ensure_ascii=False)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


class CachedBackend:
    """A backend that answers from the cache where it can and asks the wrapped one only for the rest.

    Identical requests in one call are asked once. ``asked`` counts the requests sent on.
    """

    def __init__(self, backend: Backend, cache: ResponseCache) -> None:
        self.backend = backend
        self.cache = cache
        self.asked = 0

    @property
    def name(self) -> str:
        return self.backend.name

    def complete(self, requests: Sequence[ChatRequest]) -> list[ChatReply | ChatFailure]:
        keys = [r.key(self.name) for r in requests]
        missing = {k: r for k, r in zip(keys, requests, strict=True) if self.cache.get(k) is None}
        fresh: dict[str, ChatReply | ChatFailure] = {}
        if missing:
            self.asked += len(missing)
            for key, answer in zip(missing, self.backend.complete(list(missing.values())), strict=True):
                if isinstance(answer, ChatReply):
                    self.cache.put(key, answer)
                fresh[key] = answer
        return [fresh[k] if k in fresh else self.cache.get(k) for k in keys]
