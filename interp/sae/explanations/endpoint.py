"""An OpenAI-compatible chat endpoint (vLLM, llama.cpp's server, ``transformers serve``, hosted APIs).

Requests go through the ``openai`` client library (the ``explanations`` extra), which retries a failed request
(no connection, a timeout, 408, 409, 429 and 5xx answers) with exponential backoff and jitter, honouring a
server's ``Retry-After``. Up to ``concurrency`` requests are in flight at once (an ``asyncio`` semaphore over
the client's asynchronous API), so a server that batches (vLLM, llama.cpp with several slots) is kept busy;
``timeline`` records when each request was sent and answered, which is how the number in flight is measured.

:meth:`EndpointBackend.check` is the pre-flight: it lists the server's models and asks for one token, so an
address where nothing answers, or where something answers that is not an OpenAI-compatible chat endpoint, is
refused in one line before any feature is read; one more token, asked with ``logprobs``, finds whether the
server accepts them (a server that refuses them is then asked without, and its scores have no AUC). A request
that still fails after the retries becomes a :class:`~interp.sae.explanations.chat.ChatFailure` for its
feature alone.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

from interp.sae.explanations.chat import ChatFailure, ChatReply, ChatRequest, TokenChoice

API_KEY_VARIABLE = "OPENAI_API_KEY"


def is_url(text: str) -> bool:
    """Whether ``text`` names an HTTP endpoint rather than a model."""
    return urlparse(text).scheme in ("http", "https")


def base_url(url: str) -> str:
    """The API root: ``http://host:port`` becomes ``http://host:port/v1``; a URL with a path is kept."""
    parsed = urlparse(url)
    if not parsed.netloc:
        raise ValueError(f"--explainer {url!r} is not a URL with a host; e.g. http://127.0.0.1:8000/v1")
    return url.rstrip("/") if parsed.path.strip("/") else url.rstrip("/") + "/v1"


class EndpointBackend:
    """Chat requests answered by an OpenAI-compatible endpoint, several in flight.

    Args:
        url: the server (``http://127.0.0.1:8000`` or its ``/v1`` root).
        model: the model to ask for; ``None``: the one the server lists (it must list exactly one).
        api_key: sent as a bearer token; default the ``OPENAI_API_KEY`` environment variable, else a
            placeholder (local servers ignore it).
        concurrency: requests in flight at once.
        timeout: seconds to wait for one answer before it is retried.
        max_retries: retries of one request (with exponential backoff) before it counts as failed.
    """

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 4,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency={concurrency}; give 1 or more requests in flight")
        if not timeout > 0 or max_retries < 0:
            raise ValueError(
                f"timeout={timeout}, max_retries={max_retries}; give a timeout > 0 and retries >= 0"
            )
        self.url = base_url(url)
        self._model = model
        self.api_key = api_key or os.environ.get(API_KEY_VARIABLE) or "none"
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.timeline: list[tuple[float, float]] = []
        self.logprobs = True

    @property
    def name(self) -> str:
        if self._model is None:
            raise RuntimeError("the endpoint's model is not known yet; call check() first")
        return self._model

    def check(self) -> str:
        """Make sure the endpoint answers as an OpenAI-compatible chat server; returns the model's name.

        Raises:
            ValueError: nothing answers, the answers are not the OpenAI API's, the model is not served (or
                several are and none was named), or a one-token chat request fails.
        """
        openai = _openai()
        client = openai.OpenAI(
            base_url=self.url, api_key=self.api_key, timeout=min(self.timeout, 30.0), max_retries=1
        )
        try:
            served = [m.id for m in client.models.list()]
        except openai.APIConnectionError as err:
            raise ValueError(
                f"--explainer {self.url}: nothing answers there ({_reason(err)}); start the server"
            ) from None
        except openai.APIStatusError as err:
            raise ValueError(
                f"--explainer {self.url}: GET /models answered {err.status_code}; not an OpenAI-compatible "
                "endpoint (give its API root, such as http://127.0.0.1:8000/v1)"
            ) from None
        except (openai.APIError, ValueError, TypeError, AttributeError) as err:
            raise ValueError(
                f"--explainer {self.url}: GET /models did not answer as the OpenAI API does ({_reason(err)})"
            ) from None
        if self._model is None:
            if len(served) != 1:
                listed = ", ".join(served[:8]) or "none"
                raise ValueError(
                    f"--explainer {self.url} serves {len(served)} models ({listed}); name one with --explainer-model"
                )
            self._model = served[0]
        elif served and self._model not in served:
            raise ValueError(
                f"--explainer-model {self._model!r} is not served at {self.url}; it serves {', '.join(served[:8])}"
            )
        probe = ChatRequest((("user", "Say OK."),), max_tokens=1)
        answer = self.complete([probe])[0]
        if isinstance(answer, ChatFailure):
            raise ValueError(f"--explainer {self.url}: a one-token chat request failed: {answer.reason}")
        with_logprobs = ChatRequest(probe.messages, max_tokens=1, top_logprobs=5)
        self.logprobs = not isinstance(self.complete([with_logprobs])[0], ChatFailure)
        return self.name

    def complete(self, requests: Sequence[ChatRequest]) -> list[ChatReply | ChatFailure]:
        if not requests:
            return []
        return _run(self._complete_all(list(requests)))

    async def _complete_all(self, requests: list[ChatRequest]) -> list[ChatReply | ChatFailure]:
        openai = _openai()
        client = openai.AsyncOpenAI(
            base_url=self.url, api_key=self.api_key, timeout=self.timeout, max_retries=self.max_retries
        )
        gate = asyncio.Semaphore(self.concurrency)

        async def one(request: ChatRequest) -> ChatReply | ChatFailure:
            async with gate:
                start = time.monotonic()
                try:
                    return await self._ask(client, request)
                except openai.APIError as err:
                    return ChatFailure(f"{type(err).__name__}: {_reason(err)}")
                finally:
                    self.timeline.append((start, time.monotonic()))

        try:
            return list(await asyncio.gather(*(one(r) for r in requests)))
        finally:
            await client.close()

    async def _ask(self, client: Any, request: ChatRequest) -> ChatReply | ChatFailure:
        extra: dict[str, Any] = {}
        if request.top_logprobs > 0 and self.logprobs:
            extra = {"logprobs": True, "top_logprobs": request.top_logprobs}
        response = await client.chat.completions.create(
            model=self.name,
            messages=request.as_openai(),
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            **extra,
        )
        if not response.choices or response.choices[0].message.content is None:
            return ChatFailure("the endpoint answered with no text")
        choice = response.choices[0]
        tokens = None
        content = getattr(choice.logprobs, "content", None) if request.top_logprobs > 0 else None
        if content:
            tokens = tuple(
                TokenChoice(t.token, tuple((a.token, float(a.logprob)) for a in (t.top_logprobs or ())))
                for t in content
            )
        return ChatReply(choice.message.content.strip(), response.model or self.name, tokens)

    def max_in_flight(self) -> int:
        """The most requests that were in flight at once, from :attr:`timeline`."""
        events = sorted([(s, 1) for s, _ in self.timeline] + [(e, -1) for _, e in self.timeline])
        level = peak = 0
        for _, step in events:  # an end sorts before a start at the same instant
            level += step
            peak = max(peak, level)
        return peak


def _openai() -> Any:
    try:
        import openai
    except ImportError as err:
        raise ImportError(
            "an HTTP explainer needs the openai package: pip install 'interp[explanations]' (or pip install openai)"
        ) from err
    return openai


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split())
    cause = err.__cause__ or err.__context__
    if cause is not None and str(cause):
        text = f"{text}: {' '.join(str(cause).split())}"
    return text[:300] or type(err).__name__


def _run(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end, also where an event loop is already running (a notebook): then in a
    thread of its own, since a running loop cannot be re-entered."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coroutine)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            result["error"] = err

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]
