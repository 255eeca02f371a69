"""The LLM client protocol: one async chat-completion call, its meta, its result, its errors.

    meta = CallMeta(tenant_id="t1", kind=CallKind.MEMORY_WORKING, model="gpt-4.1-mini",
                    thread_id="th1", user_id="u1")
    completion = await client.complete(model=meta.model, messages=messages, meta=meta)
    completion.text, completion.usage.total_tokens

    async with contextlib.aclosing(client.stream(model=meta.model, messages=messages,
                                                 meta=meta)) as events:
        async for event in events:  # TextDelta, TextDelta, ..., then one StreamEnd
            ...

Every helper call (the summary update, the query rewrite) carries a `CallMeta`, so a usage
guard can refuse it and the trace can tell whose call it was (R10). The errors join the
library's tree::

    WorkingMemoryError
    ├── LLMError                 the upstream failed, after the client's own retries
    └── UsageRefusedError        the usage guard refused the call; nothing was sent
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..errors import WorkingMemoryError
from ..types import MessageIn

__all__ = [
    "CallKind",
    "CallMeta",
    "Completion",
    "LLMClient",
    "LLMError",
    "NativeEvent",
    "StreamEnd",
    "StreamEvent",
    "StreamingLLMClient",
    "TextDelta",
    "Usage",
    "UsageRefusedError",
]


class CallKind(enum.StrEnum):
    """What a model call is for; guards and traces tell helper calls apart by it."""

    MEMORY_WORKING = "MEMORY_WORKING"
    """The cheap-model update of a thread's summary and facts (spec 001, R7)."""

    QUERY_REWRITE = "QUERY_REWRITE"
    """A standalone search query from the latest user turn and the facts (R19)."""

    ANSWER = "ANSWER"
    """The answering model's call that a gateway forwards."""

    COMPACTION = "COMPACTION"
    """The cheap-model summary of a conversation a client asked to compact (the Responses
    API's ``responses.compact``): a client waits for it, unlike a summary update."""


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens one call spent, as the upstream reported them (0 when it did not); each
    API's shape of it is read and written by `workingmem.llm.usage`."""

    prompt_tokens: int = 0
    """The input tokens, all of them: those read from and written to the prompt cache too."""
    completion_tokens: int = 0
    """The output tokens, reasoning included."""
    cached_tokens: int = 0
    """Of the input tokens, those read from the upstream's prompt cache (billed lower)."""
    cache_write_tokens: int = 0
    """Of the input tokens, those written to the upstream's prompt cache."""
    reasoning_tokens: int = 0
    """Of the output tokens, those the model spent reasoning (thinking)."""

    @property
    def total_tokens(self) -> int:
        """Input and output together: what a token budget counts."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True, slots=True)
class CallMeta:
    """Whose call this is and what for: what the usage guard and the trace see."""

    tenant_id: str
    """The tenant the call is billed to."""
    kind: CallKind
    """What the call is for."""
    model: str
    """The model the call goes to."""
    thread_id: str | None = None
    """The thread the call serves, when it serves one."""
    user_id: str | None = None
    """The user the call serves, when known."""


@dataclass(frozen=True, slots=True)
class Completion:
    """The answer of one chat-completion call."""

    text: str
    """The assistant message's text; "" when it only called tools or said nothing."""
    usage: Usage
    """The tokens spent; zeros when the upstream did not say."""
    model: str
    """The model that answered, as the upstream names it."""
    finish_reason: str | None = None
    """``stop``, ``length``, ``tool_calls``, ``content_filter``, ...; None when not given."""
    tool_calls: tuple[dict[str, Any], ...] = ()
    """The tool calls of the answer, in OpenAI message format
    (``{"id", "type": "function", "function": {"name", "arguments"}}``)."""
    raw: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The upstream's whole response as JSON (every choice, logprobs, fields this library does
    not know), for a gateway that hands it on; None when there is none (a stream, the local
    model)."""
    logprobs: tuple[dict[str, Any], ...] | None = field(default=None, compare=False, repr=False)
    """The answer's tokens with their log probabilities, as the chat API gives them
    (``{"token", "logprob", "bytes", "top_logprobs"}``), when the call asked for them
    (``logprobs``) and the upstream gave them; None otherwise."""
    own_fields: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The answer message's fields that OpenAI's chat message does not have, as a chat
    upstream gave them (a reasoning model's ``reasoning_content``; streamed, its pieces
    joined), which that upstream may ask back with the turn (`formats.chat_answer`); None
    when it gave none. Its calls' own fields are in `tool_calls`."""


@runtime_checkable
class LLMClient(Protocol):
    """An async chat-completion client against an OpenAI-compatible upstream.

    Implementations: `OpenAIClient` (the official SDK), `GuardedClient` (a wrapper that adds
    the usage guard and the trace). A host may pass its own.
    """

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
        """One chat completion.

        Args:
            model: The model id, as the upstream knows it.
            messages: OpenAI chat-format messages.
            meta: Whose call this is and what for.
            max_tokens: The cap on the answer's tokens; None leaves it to the upstream.
            temperature: None leaves it to the upstream.
            response_format: Passed through: ``{"type": "json_object"}`` or a
                ``{"type": "json_schema", ...}`` structured-output request.
            tools: Tool definitions in OpenAI format, passed through.
            options: Other request fields, sent as they are (``top_p``, ``stop``, ``seed``,
                ``tool_choice``, ``logprobs``, fields only the upstream knows): a client
                forwards what the caller asked for. Callers pass it only when it has fields,
                so a host's client written before it existed keeps working.

        Raises:
            LLMError: The upstream failed, after the client's own retries.
            UsageRefusedError: A usage guard refused the call; nothing was sent.
        """
        ...


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, as the upstream streamed it (never empty)."""

    text: str
    """The new characters; the pieces joined are `StreamEnd.completion.text`."""
    logprobs: tuple[dict[str, Any], ...] = ()
    """The piece's tokens with their log probabilities (`Completion.logprobs`' entries), when
    the call asked for them."""
    model: str | None = field(default=None, compare=False)
    """The model that answered, as the upstream's stream names it (a snapshot's id, say);
    None when it named none so far. Not compared: two pieces of the same text are equal."""


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last event of a stream: the whole answer, as `LLMClient.complete` returns it."""

    completion: Completion
    """The text joined, the tool calls assembled from their deltas (OpenAI message format),
    the usage of the upstream's usage chunk (zeros when it sent none), finish reason, model."""


@dataclass(frozen=True, slots=True)
class NativeEvent:
    """An upstream's own stream event that a `TextDelta` cannot carry (a thinking block's
    start, deltas and stop), for a client that speaks the upstream's `format` to pass on;
    every other consumer skips it."""

    format: str
    """The API whose event it is (``anthropic.messages``)."""
    event: dict[str, Any]
    """The event's JSON, as the upstream sent it."""
    model: str | None = field(default=None, compare=False)
    """The model that answered, as the upstream's stream names it; None when it named none
    so far. Not compared."""


StreamEvent: TypeAlias = TextDelta | NativeEvent | StreamEnd
"""What a stream yields: any number of `TextDelta` (and `NativeEvent`), then exactly one
`StreamEnd`."""


@runtime_checkable
class StreamingLLMClient(Protocol):
    """A chat-completion client that can stream the answer as it is generated.

    Implementations: `OpenAIClient`, `GuardedClient`. Both return async generators, so a
    consumer that stops early (an HTTP client went away) closes the stream with ``aclose()``,
    or ``contextlib.aclosing``, and the upstream connection is released at once; one merely
    dropped is closed later, when the event loop finalizes it.
    """

    def stream(
        self,
        *,
        model: str,
        messages: Sequence[MessageIn],
        meta: CallMeta,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed chat completion: `TextDelta` per piece of text, then one `StreamEnd`.

        Nothing happens until the first event is awaited: errors, refusals included, are
        raised from the iteration, not from this call.

        Args:
            model: The model id, as the upstream knows it.
            messages: OpenAI chat-format messages.
            meta: Whose call this is and what for.
            max_tokens: The cap on the answer's tokens; None leaves it to the upstream.
            temperature: None leaves it to the upstream.
            tools: Tool definitions in OpenAI format, passed through.
            options: Other request fields, sent as they are (see `LLMClient.complete`).

        Raises:
            LLMError: The upstream failed, before the first event or in the middle of the
                stream (a dropped connection, a stream cut short).
            UsageRefusedError: A usage guard refused the call; nothing was sent.
        """
        ...


class LLMError(WorkingMemoryError):
    """The upstream model call failed, after the client's bounded retries.

    `status_code` is the HTTP status when the upstream answered (None for a timeout or a
    connection failure); the upstream's own text in the message is redacted of secrets
    (`workingmem.redaction`); `retryable` says whether the same call may succeed later (429, 5xx,
    timeouts, connection failures) or will fail again as it is (400, 401, 404, ...).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retryable: bool = False,
        upstream: bool = False,
        retry_after: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.retryable = retryable
        self.retry_after = retry_after
        """The upstream's ``Retry-After`` (seconds or an HTTP date), for a caller to pass on."""
        self.upstream = upstream
        """True when the message describes the operator's upstream (its text, its address):
        a service shows a tenant only its status class and a request id."""
        prefix = f"upstream status {status_code}: " if status_code is not None else ""
        super().__init__(f"{prefix}{message}")


class UsageRefusedError(WorkingMemoryError):
    """A usage guard refused a call before it was sent; `reason` is the guard's word."""

    def __init__(self, meta: CallMeta, reason: str) -> None:
        self.meta = meta
        self.reason = reason
        super().__init__(
            f"{meta.kind} call of tenant {meta.tenant_id!r} to {meta.model!r} refused: {reason}"
        )
