"""`OpenAIClient`: the LLM client on the official `openai` SDK, for any OpenAI-compatible server.

    async with OpenAIClient(base_url="http://127.0.0.1:8000/v1") as client:  # vLLM, Ollama, ...
        completion = await client.complete(model="qwen2.5-7b", messages=messages, meta=meta)

Without arguments it reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the SDK does. A local
server that needs no key works without one: the client sends a placeholder.

Timeouts and retries are the SDK's own: `max_retries` bounded retries on 408/409/429/5xx,
timeouts and dropped connections, with exponential backoff that honours ``Retry-After``
(``http="aiohttp"`` keeps that policy on a leaner request path). What still fails after them
is an `LLMError` with the status and a short message.

`stream` asks for ``stream_options.include_usage``, so the stream's last chunk carries the
usage. A server that rejects the field (a 400 or 422 whose message names ``stream_options``)
gets the same request once more without it, and this client stops asking: its streams then end
with ``Usage(0, 0)``. Once the answer has begun nothing is retried: a failure mid-stream is an
`LLMError` (the text already yielded cannot be taken back).

The SDK is imported when a client is made, not with this module: it takes longer to import
than the rest of `workingmem`, and a host on the local model or its own client never needs it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from ..errors import ValidationError
from ..formats.chat_answer import call_fields, own_fields
from ..formats.tool_files import lifted
from ..redaction import redact
from ..types import CHAT_FORMAT, MessageIn
from ._refused_fields import RefusedFields, sets_temperature
from ._sdk import SHAPE_ERRORS, SdkClient, json_decode, llm_error, root_cause
from ._text import shortened
from .base import (
    CallMeta,
    Completion,
    LLMError,
    NativeEvent,
    StreamEnd,
    StreamEvent,
    TextDelta,
    Usage,
)
from .usage import from_chat

if TYPE_CHECKING:
    import openai

    from ._aiohttp import AiohttpPoster

__all__ = ["NO_API_KEY", "OpenAIClient"]


NO_API_KEY = "no-key"
"""The key sent to an upstream when none was configured (local servers ignore it)."""


class OpenAIClient(SdkClient):
    """An `LLMClient` over ``openai.AsyncOpenAI`` (chat completions).

    Args:
        base_url: The upstream's base URL, ``.../v1``; None reads ``OPENAI_BASE_URL``, then
            takes OpenAI's.
        api_key: None reads ``OPENAI_API_KEY``; with neither, a placeholder is sent.
        timeout: Seconds one attempt may take.
        max_retries: Retries after the first attempt (0 for none).
        client: An ``AsyncOpenAI`` of the host's; then the four arguments above are not used,
            and the host closes it (`aclose` leaves it open).
        max_tokens_param: The request field for `max_tokens`: ``max_tokens`` (every
            OpenAI-compatible server) or ``max_completion_tokens`` (OpenAI's reasoning models).
        http: ``"httpx"``: every request through the SDK (its default transport);
            ``"aiohttp"``: the requests on aiohttp itself, with the SDK's headers, retries,
            timeouts and errors (`_aiohttp`): about 0.6 ms less CPU a call, what `workingmem
            serve` takes (the server extra installs aiohttp). Not used with `client`.
    """

    _client: openai.AsyncOpenAI

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: openai.AsyncOpenAI | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        http: Literal["httpx", "aiohttp"] = "httpx",
    ) -> None:
        if not timeout > 0:
            raise ValidationError("timeout", f"must be > 0 seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValidationError("max_retries", f"must be an int >= 0, got {max_retries!r}")
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValidationError(
                "max_tokens_param",
                f"must be 'max_tokens' or 'max_completion_tokens', got {max_tokens_param!r}",
            )
        if http not in ("httpx", "aiohttp"):
            raise ValidationError("http", f"must be 'httpx' or 'aiohttp', got {http!r}")
        import openai  # here, not at module level: see the module docstring

        self._owns_client = client is None
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
                api_key=api_key or os.environ.get("OPENAI_API_KEY") or NO_API_KEY,
                timeout=timeout,
                max_retries=max_retries,
            )
        self._client = client
        self._configured = bool(
            not self._owns_client
            or base_url
            or api_key
            or os.environ.get("OPENAI_BASE_URL")
            or os.environ.get("OPENAI_API_KEY")
        )
        """False when nothing named an upstream: the SDK's default host, without a key."""
        self._max_tokens_param = max_tokens_param
        self._include_usage = True
        """False once the upstream rejected ``stream_options``: streams stop asking for usage."""
        self._refused = RefusedFields()
        """The fields this upstream refused for a model, learned from its 400s."""
        self._sdk_errors: tuple[type[Exception], ...] = (openai.APIError, ValueError)
        """What the SDK raises for a failed call: its own tree, and ValueError for a body it
        cannot parse (JSON errors, pydantic's validation errors)."""
        self._direct: AiohttpPoster | None = None
        """The requests on aiohttp itself (`_aiohttp`), with the SDK's headers and policy."""
        if http == "aiohttp" and self._owns_client:
            if not aiohttp_available():
                raise ImportError("http='aiohttp' needs aiohttp: pip install 'aiohttp>=3.10'")
            from ._aiohttp import AiohttpPoster

            self._direct = AiohttpPoster(
                base_url=self.base_url,
                headers=_sdk_headers(client),
                timeout=timeout,
                max_retries=max_retries,
                where=f" (at {redact(self.base_url)}){self._unconfigured_hint()}",
            )

    @property
    def base_url(self) -> str:
        """The upstream's base URL, as the SDK resolved it."""
        return str(self._client.base_url)

    async def aclose(self) -> None:
        """Closes the connections, unless the host passed its own client."""
        if self._direct is not None:
            await self._direct.aclose()
        await super().aclose()

    def _unconfigured_hint(self) -> str:
        """What to set, said after a connection failure when nothing named an upstream."""
        if self._configured:
            return ""
        return (
            "; no OPENAI_API_KEY or OPENAI_BASE_URL is set: pass base_url= and api_key= "
            "(or set them), or answer with the local model, LocalModelClient()"
        )

    def _error(self, exc: Exception, *, midstream: bool = False) -> LLMError:
        """`_llm_error`, saying which host could not be reached and, when nothing was
        configured, what to set."""
        import openai

        error = llm_error(exc, midstream=midstream)
        if not isinstance(exc, openai.APIConnectionError) or midstream:
            return error
        return LLMError(
            f"{error.args[0]} (at {redact(self.base_url)}){self._unconfigured_hint()}",
            retryable=True,
            upstream=True,
        )

    async def _post(self, path: str, body: dict[str, Any]) -> bytes:
        """The upstream's 2xx answer to `body`, after the retries; else an `LLMError`."""
        if self._direct is not None:
            return await self._direct.post(path, body)
        import httpx

        try:
            # The SDK's own request (its retries, timeouts, errors and headers) for a body we
            # built and a response we read: its typed transforms of the request and its models
            # of the answer cost more CPU than the rest of a gateway request.
            response = await self._client.post(path, body=body, cast_to=httpx.Response)
        except self._sdk_errors as exc:
            raise self._error(exc) from exc
        return response.content

    async def _events(self, path: str, body: dict[str, Any]) -> _Events:
        """The upstream's streamed answer to `body`: each event's data as JSON. Opening it
        fails as `_post` does; what fails mid-stream is an `LLMError` too."""
        if self._direct is not None:
            return await self._direct.events(path, {**body, "stream": True})
        import openai

        try:
            # The SDK's request and its server-sent-events reader (errors in the stream
            # included), with each chunk handed on as its JSON: its typed models cost more
            # CPU per chunk than the rest of a streamed answer.
            opened = await self._client.post(
                path,
                body={**body, "stream": True},
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[dict[str, Any]],
            )
        except self._sdk_errors as exc:
            raise self._error(exc) from exc
        return _SdkEvents(opened, self)

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[MessageIn],
        meta: CallMeta,
        max_tokens: int | None = None,
        temperature: float | None = None,
        response_format: dict[str, Any] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One chat completion; see `LLMClient.complete`. `meta` is not sent upstream."""
        body = self._complete_body(
            model, messages, max_tokens, temperature, response_format, tools, options
        )
        content = await self._refused.send(
            model,
            body,
            lambda sent: self._post(self._path, sent),
            own_temperature=sets_temperature(temperature, options),
        )
        try:
            return self._completion_of(_decode(content), model)
        except SHAPE_ERRORS as exc:
            raise LLMError(f"the upstream's answer has the wrong shape: {root_cause(exc)}") from exc

    _path = "/chat/completions"
    """Where `complete` posts (a subclass for another API names its own)."""

    def _complete_body(
        self,
        model: str,
        messages: Sequence[MessageIn],
        max_tokens: int | None,
        temperature: float | None,
        response_format: dict[str, Any] | None,
        tools: Sequence[dict[str, Any]] | None,
        options: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The JSON body `complete` sends."""
        fields = self._options(max_tokens, temperature, tools, options)
        if response_format is not None:
            fields["response_format"] = response_format
        return _body(model, messages, fields)

    def _completion_of(self, answer: Any, model: str) -> Completion:
        """The decoded answer as our `Completion`."""
        return _completion(answer, model)

    async def stream(
        self,
        *,
        model: str,
        messages: Sequence[MessageIn],
        meta: CallMeta,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """One streamed chat completion; see `StreamingLLMClient.stream`.

        Yields a `TextDelta` per non-empty piece of content, a `NativeEvent` in chat's format
        for a delta's other fields (a reasoning model's ``reasoning_content`` as vLLM, Ollama
        and DeepSeek stream it, ``reasoning``, a ``refusal``), then one `StreamEnd`. The SDK's
        retries apply until the upstream starts answering; after that, a dropped connection or
        a stream that ends before its ``finish_reason`` is a retryable `LLMError`. Closing the
        generator early (``aclose()``) closes the HTTP response. `meta` is not sent upstream.
        """
        fields = self._options(max_tokens, temperature, tools, options)
        chunks = await self._open_stream(
            model, list(messages), fields, sets_temperature(temperature, options)
        )
        answer = _StreamedAnswer(model=model)
        try:
            async for chunk in chunks:
                try:
                    text, logprobs, other = answer.add(chunk)
                except SHAPE_ERRORS as exc:
                    raise LLMError(
                        f"the upstream's stream has the wrong shape: {root_cause(exc)}"
                    ) from exc
                if other:
                    yield NativeEvent(CHAT_FORMAT, other, answer.named_model)
                if text:
                    yield TextDelta(text, logprobs, answer.named_model)
        finally:
            await chunks.close()  # releases the connection, also when the consumer stopped
        yield StreamEnd(answer.completion())

    async def _open_stream(
        self,
        model: str,
        messages: Sequence[MessageIn],
        options: dict[str, Any],
        own_temperature: bool,
    ) -> _Events:
        """Sends the streamed request; once more without ``stream_options`` if it is rejected."""

        def send(body: dict[str, Any]) -> Awaitable[_Events]:
            return self._events("/chat/completions", body)

        if self._include_usage:
            with_usage = {**options, "stream_options": {"include_usage": True}}
            try:
                return await self._refused.send(
                    model, _body(model, messages, with_usage), send, own_temperature=own_temperature
                )
            except LLMError as exc:
                if not _rejects_stream_options(exc):
                    raise
            self._include_usage = False  # this server does not know the field
        return await self._refused.send(
            model, _body(model, messages, dict(options)), send, own_temperature=own_temperature
        )

    def _options(
        self,
        max_tokens: int | None,
        temperature: float | None,
        tools: Sequence[dict[str, Any]] | None,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The request fields a caller set; what is None (or no tools) is left out. `options`
        go in the body as they are (the SDK's ``extra_body``: it knows not every field an
        upstream does)."""
        fields: dict[str, Any] = {}
        if max_tokens is not None:
            fields[self._max_tokens_param] = max_tokens
        if temperature is not None:
            fields["temperature"] = temperature
        if tools:
            fields["tools"] = list(tools)
        if options:
            fields["extra_body"] = dict(options)
        return fields


def _decode(content: bytes) -> Any:
    try:
        return json_decode(content)
    except msgspec.DecodeError as exc:
        raise LLMError(
            f"the upstream answered with no JSON: {shortened(content.decode('utf-8', 'replace'))}"
        ) from exc


def _completion(response: Any, model: str) -> Completion:
    """A chat completion's JSON as our `Completion`; anything else is an `LLMError`."""
    if not isinstance(response, dict) or response.get("object", "chat.completion") != (
        "chat.completion"
    ):
        raise LLMError(f"the upstream answered with no chat completion: {shortened(str(response))}")
    choices = response.get("choices")
    if not choices:
        raise LLMError("the upstream answered with no choices")
    choice = choices[0]
    message = choice["message"]
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError(f"message content is {type(content).__name__}, not text")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
        raise TypeError("tool_calls is not a list of calls")
    return Completion(
        text=content or "",
        usage=from_chat(response.get("usage")),
        model=response.get("model") or model,
        finish_reason=choice.get("finish_reason"),
        tool_calls=tuple({k: v for k, v in call.items() if v is not None} for call in calls),
        raw=response,
        logprobs=token_logprobs(choice),
        own_fields=own_fields(message) or None,
    )


def token_logprobs(choice: Mapping[str, Any]) -> tuple[dict[str, Any], ...] | None:
    """A choice's (or a chunk's choice's) ``logprobs.content``: None when it has none."""
    given = choice.get("logprobs")
    return logprob_tokens(given.get("content") if isinstance(given, Mapping) else None)


def logprob_tokens(tokens: object) -> tuple[dict[str, Any], ...] | None:
    """Tokens with their log probabilities (a chat choice's ``logprobs.content``, a Responses
    output text's ``logprobs``): None unless a list of them (a server's own shape is not
    worth failing the answer for)."""
    if not isinstance(tokens, list) or not all(isinstance(t, dict) for t in tokens):
        return None
    return tuple(tokens)


_ASSEMBLED = frozenset({"role", "content", "tool_calls", "function_call"})
"""The delta fields the answer is assembled from; any other is the upstream's own, passed on."""


@dataclass(slots=True)
class _StreamedAnswer:
    """The answer assembled from stream chunks: text, tool calls by index, usage, finish."""

    model: str
    """The request's model, until a chunk names the one that answered."""
    named_model: str | None = None
    text: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    """``{"id", "name", "arguments", "own"}`` per tool-call index, as far as the deltas went
    (``own``: the call's fields OpenAI's does not have)."""
    usage: Usage | None = None
    finish_reason: str | None = None
    logprobs: list[dict[str, Any]] | None = None
    """The tokens' log probabilities so far, once a chunk has carried any."""
    own: dict[str, Any] = field(default_factory=dict)
    """The message's own fields so far (`Completion.own_fields`): a text's pieces joined, a
    list's items in order, anything else as last given."""

    def add(
        self, chunk: Mapping[str, Any]
    ) -> tuple[str, tuple[dict[str, Any], ...], dict[str, Any]]:
        """Takes in one chunk (its JSON); returns its new text ("" for none), its tokens' log
        probabilities (none unless the call asked for them) and its delta's other fields."""
        if self.named_model is None and chunk.get("model"):
            self.named_model = chunk["model"]
        usage = chunk.get("usage")
        if usage is not None:  # the include_usage chunk; some servers send it on each
            self.usage = from_chat(usage)
        text = ""
        logprobs: tuple[dict[str, Any], ...] = ()
        other: dict[str, Any] = {}
        for choice in chunk.get("choices") or ():
            if choice.get("index") not in (0, None):  # we never ask for n > 1; some omit it
                continue
            if choice.get("finish_reason") is not None:
                self.finish_reason = choice["finish_reason"]
            tokens = token_logprobs(choice)
            if tokens is not None:
                logprobs += tokens
                if self.logprobs is None:
                    self.logprobs = []
                self.logprobs.extend(tokens)
            delta = choice.get("delta")
            if delta is None:
                continue
            content = delta.get("content")
            if content:
                if not isinstance(content, str):
                    raise TypeError(f"delta content is {type(content).__name__}, not text")
                text += content
            for call in delta.get("tool_calls") or ():
                self._add_tool_call(call)
            other.update(
                (key, value)
                for key, value in delta.items()
                if key not in _ASSEMBLED and value is not None and value != ""
            )
        for key, value in own_fields(other).items():
            self.own[key] = _joined(self.own.get(key), value)
        if text:
            self.text.append(text)
        return text, logprobs, other

    def _add_tool_call(self, delta: Mapping[str, Any]) -> None:
        """Merges one tool-call delta into its call, found by index.

        The arguments are concatenated; the id and the name are taken from the first delta
        that has them, so a server that repeats them on every delta does not double them.
        """
        given = delta.get("index")
        index = given if given is not None else self._index_of(delta.get("id"))
        call = self.tool_calls.setdefault(
            index, {"id": None, "name": None, "arguments": "", "own": {}}
        )
        if call["id"] is None and delta.get("id"):
            call["id"] = delta["id"]
        call["own"].update(call_fields(delta))  # a thought signature, in its first delta
        function = delta.get("function")
        if function is None:
            return
        if call["name"] is None and function.get("name"):
            call["name"] = function["name"]
        if function.get("arguments"):
            call["arguments"] += function["arguments"]

    def _index_of(self, call_id: str | None) -> int:
        """The index of a delta without one (some servers leave it out): the call with its id;
        a new call for a new id; without an id, the continuation of the last call."""
        for index, call in self.tool_calls.items():
            if call_id and call["id"] == call_id:
                return index
        last = max(self.tool_calls, default=-1)
        return last + 1 if call_id or last < 0 else last

    def completion(self) -> Completion:
        """The whole answer; an `LLMError` when the stream stopped before its finish reason."""
        if self.finish_reason is None:
            raise LLMError(
                "the upstream's stream ended before the answer did (no finish_reason)",
                retryable=True,
            )
        calls = tuple(
            {
                "id": call["id"] or f"call_{index}",
                "type": "function",
                "function": {"name": call["name"] or "", "arguments": call["arguments"]},
                **call["own"],
            }
            for index, call in sorted(self.tool_calls.items())
        )
        return Completion(
            text="".join(self.text),
            usage=self.usage or Usage(),
            model=self.named_model or self.model,
            finish_reason=self.finish_reason,
            tool_calls=calls,
            logprobs=tuple(self.logprobs) if self.logprobs is not None else None,
            own_fields=self.own or None,
        )


def _joined(before: object, piece: object) -> object:
    """A streamed field with its next `piece`: texts and lists go on, anything else is
    replaced."""
    if isinstance(before, str) and isinstance(piece, str):
        return before + piece
    if isinstance(before, list) and isinstance(piece, list):
        return [*before, *piece]
    return piece


def _rejects_stream_options(exc: LLMError) -> bool:
    """A server that does not know ``stream_options`` says so with a 400 (or a 422)."""
    return exc.status_code in (400, 422) and "stream_options" in str(exc)


def _body(
    model: str, messages: Sequence[MessageIn], fields: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The request's JSON body: the caller's `fields`, their ``extra_body`` (the caller's
    `options`) merged in, and the messages as they are. The SDK would walk every message to
    transform it against its typed schema (about 40 ms for 225 messages, more than the rest of
    a gateway request); ours are already plain, validated chat-format dicts. A tool result's
    files go after the results (`formats.tool_files`): chat takes text alone in a result."""
    body = dict(fields or {})
    extra = body.pop("extra_body", {})
    return {"model": model, **body, **extra, "messages": list(lifted(messages))}


def aiohttp_available() -> bool:
    """Whether ``http="aiohttp"`` can be used (aiohttp installed: the server extra has it)."""
    import importlib.util

    return importlib.util.find_spec("aiohttp") is not None


def _sdk_headers(client: openai.AsyncOpenAI) -> dict[str, str]:
    """The headers the SDK sends with every request (its key, organization, project, user
    agent), less those it leaves out."""
    headers = {**client.default_headers, **client.auth_headers}
    return {name: value for name, value in headers.items() if isinstance(value, str)}


class _Events(Protocol):
    """A streamed answer's events (each its data as JSON); `close` releases the connection."""

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...

    async def close(self) -> None: ...


class _SdkEvents:
    """The SDK's stream as `_Events`: its failures mid-stream as `LLMError`s."""

    def __init__(self, stream: openai.AsyncStream[dict[str, Any]], client: OpenAIClient) -> None:
        self._stream = stream
        self._client = client

    def __aiter__(self) -> _SdkEvents:
        return self

    async def __anext__(self) -> dict[str, Any]:
        try:
            return await anext(self._stream)
        except self._client._sdk_errors as exc:
            raise self._client._error(exc, midstream=True) from exc

    async def close(self) -> None:
        await self._stream.close()
