"""An OpenAI-compatible chat endpoint as a backend (vLLM, llama.cpp's server, ``transformers serve``, hosted APIs).

Requests go through the ``openai`` client library (the ``explanations`` extra). Up to ``concurrency`` requests
are in flight at once (an ``asyncio`` semaphore over the client's asynchronous API), so a server that batches
(vLLM, llama.cpp with several slots) is kept busy; ``timeline`` records when each request was sent and
answered, which is how the number in flight is measured. Each answer is handed to ``on_reply`` the moment it
arrives.

A request that fails in a way worth trying again (no connection, no answer within ``timeout``, 408, 409, 429
and 5xx answers) is retried up to ``max_retries`` times with exponential backoff and jitter (0.5 s doubling to
at most 8 s, less up to a quarter; a server's ``Retry-After`` is honoured), the schedule the ``openai`` client
uses. The retries are made here rather than inside the client, which retries silently: each one is said through
``say`` (why, which retry, and how long until it), so that a server that has stopped answering is not a long
silence. An answer that is not a chat completion (a body that is not JSON, or JSON of another shape) is not
retried: it is that request's :class:`~interp.sae.explanations.failure.Failure`, naming the URL and the start of
what came back; so is a request that still fails after its retries. Either costs its own feature, not the run.

:meth:`EndpointBackend.check` is the pre-flight, with a limit of its own (the smaller of ``timeout`` and
:data:`PREFLIGHT_TIMEOUT`, no retries): it lists the server's models and asks for one token, saying what it
waits for, so an address where nothing answers, something that is not an OpenAI-compatible chat endpoint, or a
server that lists a model but does not answer chat requests is refused in one line before any feature is read;
one more token, asked with ``logprobs``, finds whether the server accepts them (a server that refuses them is
then asked without, and its scores have no AUC).
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlparse

from interp.sae.explanations.chat import ChatReply, ChatRequest, OnReply, TokenChoice
from interp.sae.explanations.failure import Failure

API_KEY_VARIABLE = "OPENAI_API_KEY"
PREFLIGHT_TIMEOUT = 30.0
"""Seconds the pre-flight waits for each of its answers, at most (less where ``timeout`` is less)."""
BODY_CHARS = 120
"""How much of an answer that is not a chat completion is quoted in its failure."""
RETRY_STATUS = (408, 409, 429)
"""Answers worth a retry, besides every 5xx (as the ``openai`` client decides)."""


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
        say: called with a line whenever the backend waits for a reason a user should know (the pre-flight's
            requests, each retry); ``None`` says nothing.
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
        say: Callable[[str], Any] | None = None,
    ) -> None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency={concurrency!r}; give 1 or more requests in flight")
        if not isinstance(timeout, (int, float)) or not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout={timeout!r}; give a finite number of seconds above 0, such as 120")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries={max_retries!r}; give a whole number of retries, 0 or more")
        self.url = base_url(url)
        self._model = model
        self.api_key = api_key or os.environ.get(API_KEY_VARIABLE) or "none"
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.say = say or (lambda line: None)
        self.timeline: list[tuple[float, float]] = []
        self.logprobs = True

    @property
    def name(self) -> str:
        if self._model is None:
            raise RuntimeError("the endpoint's model is not known yet; call check() first")
        return self._model

    def check(self) -> str:
        """Make sure the endpoint answers as an OpenAI-compatible chat server; returns the model's name.

        Each step waits at most the smaller of ``timeout`` and :data:`PREFLIGHT_TIMEOUT`, once (no retries).

        Raises:
            ValueError: nothing answers, the answers are not the OpenAI API's, the model is not served (or
                several are and none was named), or a one-token chat request fails or is not answered in time.
        """
        openai = _openai()
        limit = min(self.timeout, PREFLIGHT_TIMEOUT)
        client = openai.OpenAI(base_url=self.url, api_key=self.api_key, timeout=limit, max_retries=0)
        try:
            served = [m.id for m in client.models.list()]
        except openai.APITimeoutError:
            raise ValueError(
                f"--explainer {self.url}: GET /models gave no answer within {limit:g} s; give the API root of "
                "an OpenAI-compatible server that is up (such as http://127.0.0.1:8000/v1)"
            ) from None
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
        finally:
            client.close()
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
        self.say(
            f"waiting for {self.url} to answer a one-token chat request to {self.name} (at most {limit:g} s)"
        )
        try:
            answer = _run(self._once(probe, limit))
        except openai.APITimeoutError:
            raise ValueError(
                f"--explainer {self.url} lists {self.name} but gave no answer to a one-token chat request within "
                f"{limit:g} s (the pre-flight's limit: the smaller of --timeout and {PREFLIGHT_TIMEOUT:g} s); the "
                "model may still be loading: wait for it and run again"
            ) from None
        except openai.APIError as err:
            answer = Failure(f"{type(err).__name__}: {_reason(err)}")
        if isinstance(answer, Failure):
            raise ValueError(f"--explainer {self.url}: a one-token chat request failed: {answer.reason}")
        try:
            with_logprobs = _run(self._once(ChatRequest(probe.messages, max_tokens=1, top_logprobs=5), limit))
        except openai.APIError:
            with_logprobs = None
        self.logprobs = isinstance(with_logprobs, ChatReply)
        return self.name

    def complete(
        self, requests: Sequence[ChatRequest], on_reply: OnReply | None = None
    ) -> list[ChatReply | Failure]:
        if not requests:
            return []
        return _run(self._complete_all(list(requests), on_reply))

    async def _once(self, request: ChatRequest, limit: float) -> ChatReply | Failure:
        """One try of one request within ``limit`` seconds; the client's errors are raised."""
        client = _openai().AsyncOpenAI(base_url=self.url, api_key=self.api_key, timeout=limit, max_retries=0)
        try:
            return await self._ask(client, request)
        finally:
            await client.close()

    async def _complete_all(
        self, requests: list[ChatRequest], on_reply: OnReply | None
    ) -> list[ChatReply | Failure]:
        client = _openai().AsyncOpenAI(
            base_url=self.url, api_key=self.api_key, timeout=self.timeout, max_retries=0
        )
        gate = asyncio.Semaphore(self.concurrency)

        async def one(i: int, request: ChatRequest) -> ChatReply | Failure:
            async with gate:
                start = time.monotonic()
                try:
                    answer = await self._with_retries(client, request)
                finally:
                    self.timeline.append((start, time.monotonic()))
            if on_reply is not None:
                on_reply(i, answer)
            return answer

        try:
            return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(requests))))
        finally:
            await client.close()

    async def _with_retries(self, client: Any, request: ChatRequest) -> ChatReply | Failure:
        openai = _openai()
        retries = 0
        while True:
            try:
                return await self._ask(client, request)
            except openai.APIError as err:
                if retries == self.max_retries or not _retryable(err):
                    after = f" (after {retries} {'retry' if retries == 1 else 'retries'})" if retries else ""
                    return Failure(f"{self.url}: {type(err).__name__}: {_reason(err)}{after}")
                delay = _backoff(retries, err)
                retries += 1
                self.say(
                    f"{self.url}: {self._trouble(err)}; retry {retries} of {self.max_retries} in {delay:.1f} s"
                )
                await asyncio.sleep(delay)

    def _trouble(self, err: Exception) -> str:
        openai = _openai()
        if isinstance(err, openai.APITimeoutError):
            return f"no answer within {self.timeout:g} s (--timeout)"
        if isinstance(err, openai.APIStatusError):
            return f"answered {err.status_code}"
        return f"no connection ({_reason(err)})"

    async def _ask(self, client: Any, request: ChatRequest) -> ChatReply | Failure:
        extra: dict[str, Any] = {}
        if request.top_logprobs > 0 and self.logprobs:
            extra = {"logprobs": True, "top_logprobs": request.top_logprobs}
        raw = await client.chat.completions.with_raw_response.create(
            model=self.name,
            messages=request.as_openai(),
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            **extra,
        )
        try:
            response = raw.parse()
            if not response.choices or response.choices[0].message.content is None:
                return Failure(f"{self.url}: the chat answer holds no text: {_quote(raw)}")
            choice = response.choices[0]
            tokens = None
            content = getattr(choice.logprobs, "content", None) if request.top_logprobs > 0 else None
            if content:
                tokens = tuple(
                    TokenChoice(
                        str(t.token), tuple((str(a.token), float(a.logprob)) for a in (t.top_logprobs or ()))
                    )
                    for t in content
                )
            return ChatReply(str(choice.message.content).strip(), str(response.model or self.name), tokens)
        except (ValueError, TypeError, AttributeError, IndexError, KeyError) as err:
            return Failure(
                f"{self.url}: the chat answer ({raw.status_code}) is not a chat completion "
                f"({type(err).__name__}: {err}); it began {_quote(raw)}"
            )

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


def _retryable(err: Exception) -> bool:
    openai = _openai()
    if isinstance(err, openai.APIConnectionError):  # timeouts included
        return True
    if isinstance(err, openai.APIStatusError):
        return err.status_code in RETRY_STATUS or err.status_code >= 500
    return False


def _backoff(attempt: int, err: Exception) -> float:
    """Seconds before retry ``attempt + 1``: the server's ``Retry-After`` (up to a minute), else 0.5 s doubling
    to at most 8 s, less a random quarter."""
    response = getattr(err, "response", None)
    after = None if response is None else response.headers.get("retry-after")
    try:
        if after is not None and 0 <= float(after) <= 60:
            return float(after)
    except ValueError:
        pass  # an HTTP date: the doubling below instead
    return min(0.5 * 2**attempt, 8.0) * (1 - 0.25 * random.random())


def _quote(raw: Any) -> str:
    """The start of an answer's body, quoted on one line."""
    body = raw.text
    return repr(body[:BODY_CHARS]) + ("..." if len(body) > BODY_CHARS else "")


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
