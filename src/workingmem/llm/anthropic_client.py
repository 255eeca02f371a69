"""`AnthropicClient`: the LLM client for an upstream that speaks Anthropic's Messages API.

    async with AnthropicClient() as client:            # ANTHROPIC_API_KEY, api.anthropic.com
        completion = await client.complete(model="claude-haiku-4-5", messages=messages, meta=meta)

The gateway works in chat messages; this client sends them as a Messages request: system
messages as ``system``, every other message as the Anthropic message it was stored as when the
gateway attached it (`workingmem.formats.ORIGINAL_KEY`: a ``thinking`` block and its
``signature`` go back byte for byte), else as the blocks its chat view makes; consecutive
messages of a role are one message. The chat fields a caller may set are translated
(``tool_choice``, ``parallel_tool_calls``, ``stop``, ``response_format`` with a JSON schema);
fields only the chat API has are left out, every other option goes in the body as it is
(``thinking``, ``top_k``, ``metadata``, ``output_config``, ...). ``extra_headers`` in the
options are sent as headers (``anthropic-beta``).

The answer's message is `Completion.raw`, whole, for the gateway to store verbatim
(`answer_item`). A stream yields the text as `TextDelta`, and a thinking block's start, deltas
and stop as `NativeEvent`, for a client that speaks Messages to pass on.

Transport, retries (408/409/429/5xx, timeouts, dropped connections) and timeouts are the
`anthropic` SDK's (the ``anthropic`` extra), imported when a client is made.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..formats import ORIGINAL_KEY
from ..formats.anthropic import (
    FORMAT,
    answer_item,
    answer_view,
    error_status,
    joined,
    message_of,
)
from ..formats.breakpoints import MAX_BREAKPOINTS, newest_marks
from ..formats.tool_choice import allowed_names
from ..redaction import redact
from ..types import MessageIn, NativeItem
from ._refused_fields import RefusedFields, sets_temperature
from ._sdk import SHAPE_ERRORS, SdkClient, llm_error, retryable_status, root_cause
from ._text import shortened
from .base import (
    CallMeta,
    Completion,
    LLMError,
    NativeEvent,
    StreamEnd,
    StreamEvent,
    TextDelta,
)
from .usage import from_anthropic

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "HEADERS_OPTION",
    "MAX_BREAKPOINTS",
    "SYSTEM_CACHE_OPTION",
    "AnthropicClient",
    "request_body",
]

DEFAULT_MAX_TOKENS = 4096
"""The answer's cap when a caller sets none: the Messages API requires one."""


HEADERS_OPTION = "extra_headers"
"""An option holding headers for the request (``anthropic-beta``), not a body field."""

SYSTEM_CACHE_OPTION = "system_cache_control"
"""An option holding the ``cache_control`` of the system prompt (the client marked its own):
the system goes as one text block with that mark."""

_SYSTEM_ROLES = ("system", "developer")
_CHAT_ONLY = frozenset(
    {
        "n",
        "seed",
        "logprobs",
        "top_logprobs",
        "logit_bias",
        "frequency_penalty",
        "presence_penalty",
        "stream_options",
        "modalities",
        "prediction",
        "audio",
        "store",
        "verbosity",
        "web_search_options",
        "reasoning_effort",
        "prompt_cache_key",
        "prompt_cache_retention",
        "prompt_cache_options",
        "safety_identifier",
        "user",
    }
)
"""Chat-completions fields with no place in a Messages request."""
_COUNTED_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config"}
)
"""What a count of tokens takes of a Messages request (no cap, no sampling)."""
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


class AnthropicClient(SdkClient):
    """An `LLMClient` over ``POST /v1/messages`` (see the module).

    Args:
        base_url: The upstream's base URL (a trailing ``/v1`` is dropped: the SDK adds it);
            None reads ``ANTHROPIC_BASE_URL``, then takes Anthropic's.
        api_key: None reads ``ANTHROPIC_API_KEY``; with neither, a placeholder is sent (a
            local proxy may need no key).
        timeout: Seconds one attempt may take.
        max_retries: Retries after the first attempt (0 for none).
        client: An ``AsyncAnthropic`` of the host's; then the arguments above are not used,
            and the host closes it.
    """

    _client: anthropic.AsyncAnthropic

    native_format = FORMAT
    """The format whose stored messages this client sends as they are."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        if not timeout > 0:
            raise ValidationError("timeout", f"must be > 0 seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValidationError("max_retries", f"must be an int >= 0, got {max_retries!r}")
        try:
            import anthropic
        except ImportError as exc:  # pragma: no cover - the dev install has the extra
            raise ImportError(
                "an Anthropic upstream needs the anthropic SDK: pip install 'workingmem[anthropic]'"
            ) from exc
        self._owns_client = client is None
        if client is None:
            base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
            client = anthropic.AsyncAnthropic(
                base_url=base_url.rstrip("/").removesuffix("/v1") if base_url else None,
                api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or "no-key",
                timeout=timeout,
                max_retries=max_retries,
            )
        self._client = client
        self._sdk = anthropic
        self._sdk_errors: tuple[type[Exception], ...] = (anthropic.APIError, ValueError)
        self._transport_errors = _transport_errors()
        """What the SDK's HTTP library raises when a stream breaks off: the SDK does not wrap
        it once the response has begun."""
        self._refused = RefusedFields()
        """The fields this upstream refused for a model, learned from its 400s."""

    @property
    def base_url(self) -> str:
        """The upstream's base URL, as the SDK resolved it."""
        return str(self._client.base_url)

    def _error(self, exc: Exception, *, midstream: bool = False) -> LLMError:
        if midstream and isinstance(exc, self._sdk.APIStatusError) and exc.status_code < 400:
            return _error_event(exc.body)
        error = llm_error(exc, midstream=midstream, sdk=self._sdk)
        if isinstance(exc, self._sdk.APIConnectionError) and not midstream:
            where = f" (at {redact(self.base_url)})"
            return LLMError(f"{error.args[0]}{where}", retryable=True, upstream=True)
        return error

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
        """One message; see `LLMClient.complete`. `meta` is not sent upstream."""
        body, headers = request_body(
            model, messages, max_tokens, temperature, response_format, tools, options
        )

        async def post(sent: dict[str, Any]) -> object:
            try:
                return await self._client.post(
                    "/v1/messages", body=sent, cast_to=object, options={"headers": headers}
                )
            except self._sdk_errors as exc:
                raise self._error(exc) from exc

        answer = await self._refused.send(
            model, body, post, own_temperature=sets_temperature(temperature, options)
        )
        try:
            return completion_of(answer, model)
        except SHAPE_ERRORS as exc:
            raise LLMError(f"the upstream's answer has the wrong shape: {root_cause(exc)}") from exc

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
        """One streamed message: `TextDelta` per text delta, `NativeEvent` per event of a
        thinking block, then a `StreamEnd` with the message the events made. An ``error``
        event, or a stream that ends before ``message_stop``, is an `LLMError`. Closing the
        generator early closes the HTTP response."""
        body, headers = request_body(model, messages, max_tokens, temperature, None, tools, options)

        async def open_stream(sent: dict[str, Any]) -> anthropic.AsyncStream[dict[str, Any]]:
            try:
                opened: anthropic.AsyncStream[dict[str, Any]] = await self._client.post(
                    "/v1/messages",
                    body={**sent, "stream": True},
                    cast_to=object,
                    options={"headers": headers},
                    stream=True,
                    stream_cls=self._sdk.AsyncStream[dict[str, Any]],
                )
            except self._sdk_errors as exc:
                raise self._error(exc) from exc
            return opened

        events = await self._refused.send(
            model, body, open_stream, own_temperature=sets_temperature(temperature, options)
        )
        message = _StreamedMessage()
        try:
            while not message.stopped:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
                except self._sdk_errors as exc:
                    raise self._error(exc, midstream=True) from exc
                except self._transport_errors as exc:
                    raise LLMError(
                        f"the upstream's stream broke off: {root_cause(exc)}",
                        retryable=True,
                        upstream=True,
                    ) from exc
                try:
                    out = message.add(event)
                except SHAPE_ERRORS as exc:
                    raise LLMError(
                        f"the upstream's stream has the wrong shape: {root_cause(exc)}"
                    ) from exc
                if out is not None:
                    yield out
        finally:
            await events.close()
        if not message.stopped:
            raise LLMError(
                "the upstream's stream ended before the message did (no message_stop)",
                retryable=True,
            )
        yield StreamEnd(completion_of(message.body, model))

    async def count_tokens(
        self,
        *,
        model: str,
        messages: Sequence[MessageIn],
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> int:
        """The input tokens of this request, as the upstream counts them
        (``POST /v1/messages/count_tokens``: Claude's tokenizer is not published)."""
        body, headers = request_body(model, messages, None, None, None, tools, options)
        counted = {key: value for key, value in body.items() if key in _COUNTED_FIELDS}
        try:
            answer = await self._client.post(
                "/v1/messages/count_tokens",
                body=counted,
                cast_to=object,
                options={"headers": headers},
            )
        except self._sdk_errors as exc:
            raise self._error(exc) from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("input_tokens"), int):
            raise LLMError(f"the upstream's count has the wrong shape: {shortened(str(answer))}")
        return int(answer["input_tokens"])

    @staticmethod
    def answer_item(
        completion: Completion, *, calls: Collection[str], text: bool = True
    ) -> NativeItem | None:
        """The answer as a thread stores it (`formats.anthropic.answer_item`): the upstream's
        blocks verbatim, so that its thinking goes back with the calls it made."""
        return answer_item(completion.raw, calls=calls, text=text)


def _transport_errors() -> tuple[type[Exception], ...]:
    """The transport errors of the HTTP libraries the SDK may run on (httpx, or httpx2 in
    its later releases)."""
    import importlib

    found: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):  # pragma: no cover - the SDK has one of them
            continue
    return tuple(found)


def request_body(
    model: str,
    messages: Sequence[MessageIn],
    max_tokens: int | None,
    temperature: float | None,
    response_format: Mapping[str, Any] | None,
    tools: Sequence[Mapping[str, Any]] | None,
    options: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The Messages request for a chat request, and its headers (see the module)."""
    system: list[str] = []
    sent: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") in _SYSTEM_ROLES:
            system.append(_text(message.get("content")))
            continue
        original = message.get(ORIGINAL_KEY)
        if isinstance(original, Mapping) and original.get("role") in ("user", "assistant"):
            sent.append({"role": original["role"], "content": original.get("content")})
        else:
            sent.append(message_of(message))
    rest = dict(options or {})
    system_mark = rest.pop(SYSTEM_CACHE_OPTION, None)
    marks = MAX_BREAKPOINTS - (1 if system_mark and any(system) else 0)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        "messages": newest_marks(joined(_without_empty_text(sent)), marks, key="cache_control"),
    }
    if any(system):
        text = "\n\n".join(text for text in system if text)
        body["system"] = (
            [{"type": "text", "text": text, "cache_control": system_mark}] if system_mark else text
        )
    if temperature is not None:
        body["temperature"] = temperature
    allowed = allowed_names(rest.get("tool_choice"))
    if allowed is not None:  # no such choice here: the tools cut to those it names
        tools = [t for t in tools or () if (t.get("function") or {}).get("name") in allowed[1]]
        rest["tool_choice"] = allowed[0]
    if tools:
        body["tools"] = [_tool(tool) for tool in tools]
    headers = {str(k): str(v) for k, v in dict(rest.pop(HEADERS_OPTION, None) or {}).items()}
    fmt = response_format or rest.pop("response_format", None)
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema") or {"type": "object"}
        config = dict(rest.pop("output_config", None) or {})
        body["output_config"] = {**config, "format": {"type": "json_schema", "schema": schema}}
    if (cap := rest.pop("max_completion_tokens", None)) is not None and max_tokens is None:
        body["max_tokens"] = cap
    if (stop := rest.pop("stop", None)) is not None:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    choice = _tool_choice(rest.pop("tool_choice", None), rest.pop("parallel_tool_calls", None))
    if choice is not None:
        body["tool_choice"] = choice
    if rest.get("service_tier") not in (None, "auto", "standard_only"):
        rest.pop("service_tier")  # chat's tiers (default, flex, priority) are not Anthropic's
    for name in _CHAT_ONLY:
        rest.pop(name, None)
    return {**rest, **body}, headers


def _tool_choice(choice: object, parallel: object) -> dict[str, Any] | None:
    """Chat's ``tool_choice`` and ``parallel_tool_calls`` as Anthropic's ``tool_choice``."""
    out: dict[str, Any] | None = None
    if isinstance(choice, Mapping):
        function = choice.get("function")
        if isinstance(function, Mapping):
            out = {"type": "tool", "name": function.get("name")}
        elif choice.get("type") in ("auto", "any", "none", "tool"):
            out = dict(choice)  # already Anthropic's
    elif isinstance(choice, str):
        out = {"type": {"required": "any"}.get(choice, choice)}
    if parallel is False:
        out = out or {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A chat function tool as an Anthropic client tool."""
    function = tool.get("function") or {}
    out: dict[str, Any] = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        out["description"] = function["description"]
    return out


def _without_empty_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic refuses an empty text block and a message with no content: an empty answer
    in the window is left out."""
    kept = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [
                block
                for block in content
                if not (isinstance(block, Mapping) and block.get("type") == "text")
                or block.get("text")
            ]
        if content:
            kept.append({**message, "content": content})
    return kept


def completion_of(message: Any, model: str) -> Completion:
    """A Message's JSON as our `Completion` (``raw``: the whole message)."""
    if not isinstance(message, dict) or message.get("type") != "message":
        raise LLMError(f"the upstream answered with no message: {shortened(str(message))}")
    blocks = [b for b in message.get("content") or () if isinstance(b, dict)]
    view = answer_view(blocks)
    calls = tuple(view.get("tool_calls") or ())
    return Completion(
        text=str(view.get("content") or ""),
        usage=from_anthropic(message.get("usage")),
        model=str(message.get("model") or model),
        finish_reason=_STOP_REASONS.get(str(message.get("stop_reason")), "stop"),
        tool_calls=calls,
        raw=message,
    )


def _error_event(body: object) -> LLMError:
    """An ``error`` event in a stream that began 200 OK: the status its error type stands
    for (``overloaded_error`` is a 529, which another attempt may pass), not the stream's."""
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    text = error.get("message") if isinstance(error, dict) else None
    status = error_status(kind)
    return LLMError(
        redact(
            f"the upstream failed mid-stream: {kind or 'error'}: {shortened(str(text or body))}"
        ),
        status_code=status,
        retryable=status is not None and retryable_status(status),
        upstream=True,
    )


class _StreamedMessage:
    """The message a stream's events make, block by block."""

    def __init__(self) -> None:
        self.body: dict[str, Any] = {}
        self.stopped = False
        self._json: dict[int, str] = {}

    @property
    def model(self) -> str | None:
        """The model that answers, as the stream's message names it."""
        named = self.body.get("model")
        return str(named) if named else None

    def add(self, event: Mapping[str, Any]) -> StreamEvent | None:
        """Takes one event; returns what the consumer is given of it, if anything."""
        kind = event.get("type")
        if kind == "message_start":
            self.body = {**event["message"], "content": []}
        elif kind == "content_block_start":
            block = dict(event["content_block"])
            self.body["content"].append(block)
            if block["type"] == "text" and block.get("text"):
                return TextDelta(str(block["text"]), model=self.model)
            return self._native(block, event)
        elif kind == "content_block_delta":
            return self._delta(int(event["index"]), event["delta"], event)
        elif kind == "content_block_stop":
            index = int(event["index"])
            block = self.body["content"][index]
            if index in self._json:
                block["input"] = json.loads(self._json.pop(index) or "{}")
            return self._native(block, event)
        elif kind == "message_delta":
            self.body.update(event.get("delta") or {})
            self.body["usage"] = {**(self.body.get("usage") or {}), **(event.get("usage") or {})}
        elif kind == "message_stop":
            self.stopped = True
        return None

    def _delta(
        self, index: int, delta: Mapping[str, Any], event: Mapping[str, Any]
    ) -> StreamEvent | None:
        block = self.body["content"][index]
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return TextDelta(str(delta["text"]), model=self.model) if delta["text"] else None
        if kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + delta["partial_json"]
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = delta["signature"]
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta["citation"])
        return self._native(block, event)

    def _native(self, block: Mapping[str, Any], event: Mapping[str, Any]) -> NativeEvent | None:
        if block.get("type") in ("thinking", "redacted_thinking"):
            return NativeEvent(FORMAT, dict(event), self.model)
        return None


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    return (
        "\n".join(str(part.get("text", "")) for part in content or () if isinstance(part, Mapping))
        if isinstance(content, list)
        else ""
    )
