"""`OpenAIResponsesClient`: the LLM client for an upstream that speaks OpenAI's Responses API.

    async with OpenAIResponsesClient(base_url="https://api.openai.com/v1") as client:
        completion = await client.complete(model="o4-mini", messages=messages, meta=meta)

The gateway works in chat messages; this client sends them as a Responses request: system
messages as ``instructions``, every other message as the items it was stored as when the
gateway attached them (`workingmem.formats.ORIGINAL_KEY`: a reasoning item and its
``encrypted_content`` go back as they came), else as the items its chat view makes. The
request is ``store: false`` with ``include: ["reasoning.encrypted_content"]``: the gateway is
the store, the upstream keeps nothing. The answer's ``output`` is in `Completion.raw`, whole,
for the gateway to store verbatim; its text and function calls are the completion's.

The SDK's transport, retries, timeouts and error mapping are `OpenAIClient`'s.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from ..formats import ORIGINAL_KEY
from ..formats.breakpoints import newest_marks
from ..formats.client_tools import as_offered
from ..formats.compaction import is_ours
from ..formats.responses import FORMAT, LOGPROBS, items_of_message
from ..formats.tool_choice import allowed_names, responses_choice
from ..types import MessageIn
from ._refused_fields import sets_temperature
from ._sdk import SHAPE_ERRORS
from ._text import shortened
from .base import CallMeta, Completion, LLMError, StreamEnd, StreamEvent, TextDelta
from .openai_client import OpenAIClient, logprob_tokens
from .usage import from_responses

__all__ = ["OpenAIResponsesClient"]

_SYSTEM_ROLES = ("system", "developer")


class OpenAIResponsesClient(OpenAIClient):
    """An `LLMClient` over ``POST /responses`` (see the module); the arguments are
    `OpenAIClient`'s."""

    native_format = FORMAT
    """The format whose stored items this client sends as they are."""

    _path = "/responses"

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
        return request_body(
            model, messages, max_tokens, temperature, response_format, tools, options
        )

    def _completion_of(self, answer: Any, model: str) -> Completion:
        return completion_of(answer, model)

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
        """One streamed response: a `TextDelta` per ``response.output_text.delta``, then a
        `StreamEnd` from ``response.completed`` (or ``response.incomplete``). A
        ``response.failed`` or ``error`` event, or a stream that ends without the response, is
        an `LLMError`. Closing the generator early closes the HTTP response."""
        body = request_body(model, messages, max_tokens, temperature, None, tools, options)
        events = await self._refused.send(
            model,
            body,
            lambda sent: self._events("/responses", sent),
            own_temperature=sets_temperature(temperature, options),
        )
        final: Completion | None = None
        named: str | None = None
        """The model the stream's response names."""
        try:
            async for event in events:
                kind = event.get("type")
                if kind == "response.output_text.delta" and event.get("delta"):
                    tokens = logprob_tokens(event.get("logprobs")) or ()
                    yield TextDelta(str(event["delta"]), tokens, named)
                elif kind in ("response.created", "response.in_progress"):
                    said = (event.get("response") or {}).get("model")
                    named = str(said) if said else named
                elif kind in ("response.completed", "response.incomplete"):
                    try:
                        final = completion_of(event["response"], model)
                    except SHAPE_ERRORS as exc:
                        raise LLMError(f"the upstream's stream has the wrong shape: {exc}") from exc
                elif kind in ("response.failed", "error"):
                    raise LLMError(f"the upstream failed mid-stream: {_failure(event)}")
                if final is not None:
                    break
        finally:
            await events.close()
        if final is None:
            raise LLMError(
                "the upstream's stream ended before the response did (no response.completed)",
                retryable=True,
            )
        yield StreamEnd(final)


def request_body(
    model: str,
    messages: Sequence[MessageIn],
    max_tokens: int | None,
    temperature: float | None,
    response_format: Mapping[str, Any] | None,
    tools: Sequence[Mapping[str, Any]] | None,
    options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The Responses request for a chat request: the messages as instructions and items, the
    chat fields in their Responses places, every other option as it is."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") in _SYSTEM_ROLES:
            instructions.append(_text(message.get("content")))
            continue
        original = message.get(ORIGINAL_KEY)
        stored = original.get("items") if isinstance(original, Mapping) else None
        # as stored, but the gateway's own compaction (a turn of its own), which only we read
        if isinstance(stored, list) and not (len(stored) == 1 and is_ours(stored[0])):
            items.extend(as_offered(item) for item in stored)
        else:
            items.extend(items_of_message(message))
    body: dict[str, Any] = {
        "model": model,
        "input": newest_marks(items),  # a window of marked items: those OpenAI matches at
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    if instructions:
        body["instructions"] = "\n\n".join(text for text in instructions if text)
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    if tools:
        body["tools"] = [_tool(tool) for tool in tools]
    rest = dict(options or {})
    text: dict[str, Any] = {}
    fmt = response_format or rest.pop("response_format", None)
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = dict(fmt.get("json_schema") or {})
        text["format"] = {"type": "json_schema", **schema}
    elif isinstance(fmt, Mapping) and fmt.get("type") == "json_object":
        text["format"] = {"type": "json_object"}
    if "verbosity" in rest:
        text["verbosity"] = rest.pop("verbosity")
    if text:
        body["text"] = text
    if "reasoning_effort" in rest:
        body["reasoning"] = {"effort": rest.pop("reasoning_effort")}
    choice = rest.pop("tool_choice", None)
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        body["tool_choice"] = {"type": "function", "name": choice["function"].get("name")}
    elif allowed_names(choice) is not None:
        body["tool_choice"] = responses_choice(choice)
    elif choice is not None:
        body["tool_choice"] = choice
    rest.pop("stream_options", None)
    if rest.pop("logprobs", None):  # the chat API's ask, in the Responses API's words
        body["include"].append(LOGPROBS)
    elif "top_logprobs" in rest:
        del rest["top_logprobs"]  # the chat API reads it only with logprobs
    return {**rest, **body}


def completion_of(response: Any, model: str) -> Completion:
    """A Response object's JSON as our `Completion` (``raw``: the whole response)."""
    if not isinstance(response, dict) or response.get("object", "response") != "response":
        raise LLMError(f"the upstream answered with no response: {shortened(str(response))}")
    if response.get("status") == "failed":
        raise LLMError(f"the upstream's response failed: {_failure(response)}")
    texts: list[str] = []
    logprobs: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for item in response.get("output") or ():
        kind = item.get("type")
        if kind == "message":
            parts = [p for p in item.get("content") or () if p.get("type") == "output_text"]
            texts += [p["text"] for p in parts]
            logprobs += [token for p in parts for token in logprob_tokens(p.get("logprobs")) or ()]
        elif kind == "function_call":
            calls.append(
                {
                    "id": item["call_id"],
                    "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]},
                }
            )
    cut = (response.get("incomplete_details") or {}).get("reason") == "max_output_tokens"
    return Completion(
        text="".join(texts),
        usage=from_responses(response.get("usage")),
        model=response.get("model") or model,
        finish_reason="tool_calls" if calls else "length" if cut else "stop",
        tool_calls=tuple(calls),
        raw=response,
        logprobs=tuple(logprobs) if logprobs else None,
    )


def _tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A chat function tool as a Responses one."""
    function = tool.get("function") or {}
    out = {"type": "function", "name": function.get("name")}
    for key in ("description", "parameters", "strict"):
        if function.get(key) is not None:
            out[key] = function[key]
    return out


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    return (
        "\n".join(str(part.get("text", "")) for part in content or () if isinstance(part, Mapping))
        if isinstance(content, list)
        else ""
    )


def _failure(event: Mapping[str, Any]) -> str:
    error = event.get("error") or (event.get("response") or {}).get("error") or event
    message = error.get("message") if isinstance(error, Mapping) else None
    return shortened(str(message or error))
