"""The trace of every model call, and the client wrapper that guards and traces it (R10).

    client = GuardedClient(OpenAIClient(), guard=TokenBudgetGuard(default_budget=100_000))
    completion = await client.complete(model="gpt-4.1-mini", messages=messages, meta=meta)
    async for event in client.stream(model="gpt-4.1-mini", messages=messages, meta=meta):
        ...

Each call, streamed or not, leaves one log line on the standard `logging` logger
``workingmem.llm`` (INFO when it answered, WARNING when it was refused, failed or cancelled)::

    llm.call kind=MEMORY_WORKING outcome=ok tenant=t1 thread=th1 user=u1 model=gpt-4.1-mini
        prompt_tokens=812 completion_tokens=95 total_tokens=907 duration_ms=640.2

The same fields ride on the record as ``record.llm`` (a dict) for structured log handlers.
When `opentelemetry-api` is installed (the ``otel`` extra), each call is also a client span
named ``workingmem.llm.<kind>`` with the GenAI semantic-convention attributes; without it,
tracing costs nothing beyond the log line. A streamed call's span is not made the current span:
a stream's steps run wherever its consumer iterates it, and may end in another task.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from .._protocols import implements
from ..types import MessageIn
from .base import (
    CallMeta,
    Completion,
    LLMClient,
    LLMError,
    StreamEnd,
    StreamEvent,
    StreamingLLMClient,
    UsageRefusedError,
)
from .guard import AllowAllGuard, UsageGuard

try:
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - the otel extra is not installed
    otel_trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["CallRecord", "GuardedClient", "LLMTracer", "Outcome"]

LOGGER_NAME = "workingmem.llm"
TRACER_NAME = "workingmem.llm"

Outcome = Literal["ok", "refused", "error", "cancelled"]
"""How a call ended: answered, refused by the guard, failed, or cancelled by its caller (a
task cancelled, or a stream its consumer closed before the end)."""

_BARE = re.compile(r"[\w.:/@+-]+")


@dataclasses.dataclass(slots=True)
class CallRecord:
    """What the trace learns about one call while it runs; the wrapper fills it in."""

    meta: CallMeta
    """Whose call, what for, to which model."""
    outcome: Outcome | None = None
    """None while the call runs."""
    completion: Completion | None = None
    """The answer, when there was one."""
    reason: str | None = None
    """The guard's refusal reason, when refused."""
    error: BaseException | None = None
    """The failure, when it failed."""
    duration_ms: float = 0.0
    """Wall time of the call, guard included."""

    def succeeded(self, completion: Completion) -> None:
        self.outcome = "ok"
        self.completion = completion

    def refused(self, reason: str) -> None:
        self.outcome = "refused"
        self.reason = reason

    def failed(self, error: BaseException) -> None:
        # GeneratorExit: the consumer of a stream closed it before its end.
        cancelled = isinstance(error, asyncio.CancelledError | GeneratorExit)
        self.outcome = "cancelled" if cancelled else "error"
        self.error = error

    def fields(self) -> dict[str, Any]:
        """The record as flat, JSON-ready fields: the log line's and the span's content."""
        meta = self.meta
        fields: dict[str, Any] = {
            "kind": meta.kind.value,
            "outcome": self.outcome or "ok",
            "tenant": meta.tenant_id,
            "thread": meta.thread_id,
            "user": meta.user_id,
            "model": meta.model,
        }
        if self.completion is not None:
            usage = self.completion.usage
            fields["response_model"] = self.completion.model
            fields["finish_reason"] = self.completion.finish_reason
            fields["prompt_tokens"] = usage.prompt_tokens
            fields["completion_tokens"] = usage.completion_tokens
            fields["total_tokens"] = usage.total_tokens
        if self.reason is not None:
            fields["reason"] = self.reason
        if self.error is not None:
            fields["error_type"] = type(self.error).__name__
            if isinstance(self.error, LLMError):
                fields["status_code"] = self.error.status_code
                fields["retryable"] = self.error.retryable
            fields["error"] = str(self.error)[:300]
        fields["duration_ms"] = round(self.duration_ms, 1)
        return {key: value for key, value in fields.items() if value is not None}


class LLMTracer:
    """Logs one line per call and, when OpenTelemetry is importable, opens a span around it.

    Args:
        logger: Where the lines go; the ``workingmem.llm`` logger by default.
        tracer_provider: The OpenTelemetry tracer provider; the global one by default.
        otel: False skips spans even when OpenTelemetry is installed.
    """

    def __init__(
        self,
        *,
        logger: logging.Logger | None = None,
        tracer_provider: TracerProvider | None = None,
        otel: bool = True,
    ) -> None:
        self.logger = logger or logging.getLogger(LOGGER_NAME)
        self._provider = tracer_provider
        self._otel = otel and otel_trace is not None

    @contextmanager
    def call(self, meta: CallMeta, *, current: bool = True) -> Iterator[CallRecord]:
        """Traces the call the `with` block makes; the block reports into the record.

        An exception that leaves the block marks the call failed (or cancelled) unless the
        block already said how it ended, as a refusal does before it raises.

        Args:
            meta: Whose call, what for.
            current: Makes the span the current one inside the block (spans of the HTTP
                request become its children). False for a block that spans the ``yield``s of
                an async generator, where the current context is the consumer's.
        """
        record = CallRecord(meta=meta)
        started = time.perf_counter()
        with self._span(meta, current=current) as span:
            try:
                yield record
            except BaseException as exc:
                if record.outcome is None:
                    record.failed(exc)
                raise
            finally:
                record.duration_ms = (time.perf_counter() - started) * 1000
                if span is not None:
                    _finish_span(span, record)
                self._log(record)

    def _span(self, meta: CallMeta, *, current: bool) -> AbstractContextManager[Span | None]:
        if not self._otel or (self._provider is None and not _global_provider_set()):
            return nullcontext()
        tracer = otel_trace.get_tracer(TRACER_NAME, tracer_provider=self._provider)
        attributes: dict[str, str] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": meta.model,
            "workingmem.llm.kind": meta.kind.value,
            "workingmem.tenant_id": meta.tenant_id,
        }
        if meta.thread_id is not None:
            attributes["workingmem.thread_id"] = meta.thread_id
        if meta.user_id is not None:
            attributes["workingmem.user_id"] = meta.user_id
        name = f"workingmem.llm.{meta.kind.value}"
        if not current:
            return _ended(
                tracer.start_span(name, kind=otel_trace.SpanKind.CLIENT, attributes=attributes)
            )
        return tracer.start_as_current_span(
            name,
            kind=otel_trace.SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )

    def _log(self, record: CallRecord) -> None:
        level = logging.INFO if record.outcome in (None, "ok") else logging.WARNING
        if not self.logger.isEnabledFor(level):
            return
        fields = record.fields()
        line = " ".join(f"{key}={_quote(value)}" for key, value in fields.items())
        self.logger.log(level, "llm.call %s", line, extra={"llm": fields})


def _global_provider_set() -> bool:
    """Whether the application installed a tracer provider: until it does, OpenTelemetry's
    global one makes spans that record nothing, not worth their cost on every call (and a
    provider installed later is seen by the next call)."""
    provider = otel_trace.get_tracer_provider()
    return not isinstance(provider, (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider))


@contextmanager
def _ended(span: Span) -> Iterator[Span]:
    """A span that is not made current, ended when the block ends."""
    try:
        yield span
    finally:
        span.end()


def _finish_span(span: Span, record: CallRecord) -> None:
    span.set_attribute("workingmem.llm.outcome", record.outcome or "ok")
    if record.completion is not None:
        completion = record.completion
        span.set_attribute("gen_ai.response.model", completion.model)
        span.set_attribute("gen_ai.usage.input_tokens", completion.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", completion.usage.completion_tokens)
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", completion.usage.cached_tokens)
        span.set_attribute(
            "gen_ai.usage.cache_creation.input_tokens", completion.usage.cache_write_tokens
        )
        if completion.finish_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [completion.finish_reason])
    if record.reason is not None:
        span.set_attribute("workingmem.llm.refusal_reason", record.reason)
    if record.error is not None:
        span.set_attribute("error.type", type(record.error).__name__)
        if isinstance(record.error, LLMError) and record.error.status_code is not None:
            span.set_attribute("http.response.status_code", record.error.status_code)
        span.record_exception(record.error)
        span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, str(record.error)[:300]))


def _quote(value: object) -> str:
    text = str(value)
    return text if _BARE.fullmatch(text) else json.dumps(text, ensure_ascii=False)


class GuardedClient:
    """An `LLMClient` that asks a usage guard first, records what the call spent, and traces it.

    The order of one call: ``guard.check`` (a refusal raises `UsageRefusedError` and sends
    nothing) → the wrapped client → ``guard.record(usage)``. Every path, refusal and failure
    included, leaves one trace. `LLMError` from the wrapped client passes through unchanged.
    `stream` does the same for a streamed call, when the wrapped client can stream.

    Args:
        client: The client that makes the call; a `StreamingLLMClient` too for `stream`.
        guard: The usage guard; `AllowAllGuard` by default.
        tracer: The trace; an `LLMTracer` on the ``workingmem.llm`` logger by default.
    """

    def __init__(
        self,
        client: LLMClient,
        *,
        guard: UsageGuard | None = None,
        tracer: LLMTracer | None = None,
    ) -> None:
        self.client = client
        self.guard: UsageGuard = guard or AllowAllGuard()
        self.tracer = tracer or LLMTracer()

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
        """One guarded, traced chat completion; see `LLMClient.complete`.

        The model the call goes to is `model`: a `meta` that names another one is corrected
        before the guard and the trace see it, so both account for the model actually called.
        """
        if meta.model != model:
            meta = dataclasses.replace(meta, model=model)
        with self.tracer.call(meta) as record:
            reason = await self.guard.check(meta)
            if reason is not None:
                record.refused(reason)
                raise UsageRefusedError(meta, reason)
            completion = await self.client.complete(
                model=model,
                messages=messages,
                meta=meta,
                max_tokens=max_tokens,
                temperature=temperature,
                response_format=response_format,
                tools=tools,
                **({"options": options} if options else {}),
            )
            record.completion = completion  # traced with its usage even if record() fails
            await self.guard.record(meta, completion.usage)
            record.succeeded(completion)
            return completion

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
        """One guarded, traced, streamed chat completion; see `StreamingLLMClient.stream`.

        The guard is asked when the first event is awaited, before anything is sent. The
        events of the wrapped client pass through; at its `StreamEnd` the usage is recorded
        with the guard and the trace is written, before the `StreamEnd` is handed on, so a
        consumer that stops right after it loses nothing.

        A stream that fails or that its consumer closes early is traced as ``error`` or
        ``cancelled``; the guard records nothing for it, as the upstream reports the usage
        only at the end (those tokens escape a `TokenBudgetGuard`).

        Raises:
            LLMError: From the wrapped client, unchanged.
            UsageRefusedError: The guard refused the call; nothing was sent.
            TypeError: The wrapped client cannot stream.
        """
        if meta.model != model:
            meta = dataclasses.replace(meta, model=model)
        inner = self.client
        if not _streams(inner):
            raise TypeError(f"{type(inner).__name__} cannot stream: it has no stream method")
        end: StreamEnd | None = None
        with self.tracer.call(meta, current=False) as record:
            reason = await self.guard.check(meta)
            if reason is not None:
                record.refused(reason)
                raise UsageRefusedError(meta, reason)
            events = inner.stream(
                model=model,
                messages=messages,
                meta=meta,
                max_tokens=max_tokens,
                temperature=temperature,
                tools=tools,
                **({"options": options} if options else {}),
            )
            try:
                async for event in events:
                    if isinstance(event, StreamEnd):
                        end = event
                        break
                    yield event
            finally:
                await _aclose(events)
            if end is None:
                raise LLMError(f"{type(inner).__name__}.stream ended without a StreamEnd")
            record.completion = end.completion  # traced with its usage even if record() fails
            await self.guard.record(meta, end.completion.usage)
            record.succeeded(end.completion)
        yield end


def _streams(client: LLMClient) -> TypeGuard[StreamingLLMClient]:
    """Whether `client` can stream: asked on every streamed answer, so once per class."""
    return implements(client, StreamingLLMClient)


async def _aclose(events: AsyncIterator[StreamEvent]) -> None:
    """Closes a stream that may be left before its end (any async generator is closable)."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()
