"""A cache of answers, so that a rerun asks nothing twice.

Answers are kept in one JSON Lines file, one ``{"key", "reply"}`` object a line, where ``key`` is
:meth:`ChatRequest.key <interp.sae.explanations.chat.ChatRequest.key>`: a hash of the model's name, the
messages and the sampling settings. Each answer is written the moment the backend has it (the backend hands it
over through ``on_reply``, before the rest of its requests are answered), as one line in one append and then
fsynced, so a run that is stopped keeps every answer it had received. A line cut short by a stop is skipped
when the file is read again, and the next answer starts on a line of its own, so the cut costs that one answer.
Failures are not kept: the next run asks again.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from interp.sae.explanations.chat import Backend, ChatReply, ChatRequest, OnReply
from interp.sae.explanations.failure import Failure


class ResponseCache:
    """Answers by request key, backed by a JSON Lines file (or held in memory with ``path=None``)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self._replies: dict[str, ChatReply] = {}
        self._lock = threading.Lock()
        self._cut = False  # the file ends without a line break (a run stopped mid-line)
        if self.path is not None and self.path.is_file():
            self._read(self.path)

    def _read(self, path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        self._cut = bool(text) and not text.endswith("\n")
        for line in text.splitlines():
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
        """Keep ``reply``; with a file, it is on disk when this returns."""
        with self._lock:
            self._replies[key] = reply
            if self.path is None:
                return
            line = json.dumps({"key": key, "reply": reply.to_json()}, ensure_ascii=False) + "\n"
            if self._cut:
                line = "\n" + line
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))  # one append: the line is whole or cut, never interleaved
                os.fsync(fd)
            finally:
                os.close(fd)
            self._cut = False


class CachedBackend:
    """A backend that answers from the cache where it can and asks the wrapped one only for the rest.

    Identical requests in one call are asked once; each answer is cached as it arrives. ``asked`` counts the
    requests sent on.
    """

    def __init__(self, backend: Backend, cache: ResponseCache) -> None:
        self.backend = backend
        self.cache = cache
        self.asked = 0

    @property
    def name(self) -> str:
        return self.backend.name

    def complete(
        self, requests: Sequence[ChatRequest], on_reply: OnReply | None = None
    ) -> list[ChatReply | Failure]:
        keys = [r.key(self.name) for r in requests]
        answers: dict[str, ChatReply | Failure] = {}
        for key in keys:
            cached = self.cache.get(key)
            if cached is not None:
                answers[key] = cached
        missing = {k: r for k, r in zip(keys, requests, strict=True) if k not in answers}
        places: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            places.setdefault(key, []).append(i)
        if on_reply is not None:
            for key, answer in answers.items():
                for i in places[key]:
                    on_reply(i, answer)
        if missing:
            asked = list(missing)
            self.asked += len(asked)

            def arrived(j: int, answer: ChatReply | Failure) -> None:
                key = asked[j]
                if isinstance(answer, ChatReply):
                    self.cache.put(key, answer)
                answers[key] = answer
                if on_reply is not None:
                    for i in places[key]:
                        on_reply(i, answer)

            for j, answer in enumerate(self.backend.complete(list(missing.values()), arrived)):
                if asked[j] not in answers:  # a backend that did not call on_reply for it
                    arrived(j, answer)
        return [answers[k] for k in keys]
