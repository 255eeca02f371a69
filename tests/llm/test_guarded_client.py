"""GuardedClient: the usage guard and the trace see every call, refused and failed ones too."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.util.types import Attributes, AttributeValue

import workingmem.llm as llm
from tests.helpers import run_fresh
from workingmem.errors import ValidationError, WorkingMemoryError
from workingmem.llm import (
    AllowAllGuard,
    CallKind,
    CallMeta,
    GuardedClient,
    LLMClient,
    LLMError,
    LLMTracer,
    OpenAIClient,
    TokenBudgetGuard,
    Usage,
    UsageGuard,
    UsageRefusedError,
)
from workingmem.llm.testing import Reply, ScriptedUpstream, StatusError

HELLO = [{"role": "user", "content": "Hello"}]


def meta(tenant: str = "t1", model: str = "cheap") -> CallMeta:
    return CallMeta(
        tenant_id=tenant,
        kind=CallKind.MEMORY_WORKING,
        model=model,
        thread_id="th1",
        user_id="u1",
    )


class RecordingGuard:
    """Allows everything unless told otherwise, and remembers what it saw."""

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.checked: list[CallMeta] = []
        self.recorded: list[tuple[CallMeta, Usage]] = []

    async def check(self, meta: CallMeta) -> str | None:
        self.checked.append(meta)
        return self.refuse

    async def record(self, meta: CallMeta, usage: Usage) -> None:
        self.recorded.append((meta, usage))


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        yield server


@pytest.fixture
async def inner(upstream: ScriptedUpstream) -> AsyncIterator[OpenAIClient]:
    async with OpenAIClient(base_url=upstream.base_url, max_retries=0) as client:
        yield client


async def test_refusal_raises_and_sends_nothing(
    upstream: ScriptedUpstream, inner: OpenAIClient
) -> None:
    """A refused call never reaches the upstream, and nothing is recorded for it."""
    guard = RecordingGuard(refuse="over budget")
    client = GuardedClient(inner, guard=guard)

    with pytest.raises(UsageRefusedError) as caught:
        await client.complete(model="cheap", messages=HELLO, meta=meta())

    assert caught.value.reason == "over budget"
    assert caught.value.meta == meta()
    assert isinstance(caught.value, WorkingMemoryError)
    assert upstream.requests == []
    assert guard.recorded == []


async def test_usage_is_recorded(upstream: ScriptedUpstream, inner: OpenAIClient) -> None:
    guard = RecordingGuard()
    upstream.push(Reply("ok", prompt_tokens=40, completion_tokens=2))

    completion = await GuardedClient(inner, guard=guard).complete(
        model="cheap", messages=HELLO, meta=meta()
    )

    assert completion.text == "ok"
    assert guard.checked == [meta()]
    assert guard.recorded == [(meta(), Usage(40, 2))]


async def test_meta_names_the_model_actually_called(inner: OpenAIClient) -> None:
    """The guard accounts for the model the call went to, whatever the meta said."""
    guard = RecordingGuard()

    await GuardedClient(inner, guard=guard).complete(
        model="other", messages=HELLO, meta=meta(model="cheap")
    )

    assert guard.checked[0].model == "other"


async def test_token_budget_per_tenant(upstream: ScriptedUpstream, inner: OpenAIClient) -> None:
    """Tenant A over its budget is refused; tenant B, with its own budget, is not."""
    guard = TokenBudgetGuard(tenant_budgets={"A": 100}, default_budget=1_000)
    client = GuardedClient(inner, guard=guard)
    upstream.push(Reply("a", prompt_tokens=90, completion_tokens=20))

    await client.complete(model="cheap", messages=HELLO, meta=meta("A"))
    assert guard.spent("A") == 110
    with pytest.raises(UsageRefusedError, match="spent 110 of its 100-token budget"):
        await client.complete(model="cheap", messages=HELLO, meta=meta("A"))

    upstream.push(Reply("b", prompt_tokens=90, completion_tokens=20))
    completion = await client.complete(model="cheap", messages=HELLO, meta=meta("B"))
    assert completion.text == "b"
    assert guard.spent("B") == 110
    assert len(upstream.requests) == 2


async def test_token_budget_rules() -> None:
    guard = TokenBudgetGuard(tenant_budgets={"zero": 0}, default_budget=None)

    assert await guard.check(meta("anyone")) is None  # no budget: not limited
    assert await guard.check(meta("zero")) is not None  # a zero budget allows nothing
    await guard.record(meta("anyone"), Usage(10**9, 10**9))
    assert await guard.check(meta("anyone")) is None
    assert guard.budget("anyone") is None
    assert guard.budget("zero") == 0

    guard.reset("anyone")
    assert guard.spent("anyone") == 0


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"default_budget": -1}, id="negative-default"),
        pytest.param({"tenant_budgets": {"t1": 1.5}}, id="fractional"),
        pytest.param({"tenant_budgets": {"t1": True}}, id="bool"),
    ],
)
def test_bad_budgets_are_rejected(options: Mapping[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TokenBudgetGuard(**options)


def test_usage_adds_up() -> None:
    assert Usage(3, 4) + Usage(10, 20) == Usage(13, 24)
    assert (Usage(3, 4) + Usage(10, 20)).total_tokens == 37


async def test_allow_all_guard() -> None:
    guard = AllowAllGuard()
    assert await guard.check(meta()) is None
    await guard.record(meta(), Usage(1, 1))


async def test_protocols_are_met(inner: OpenAIClient) -> None:
    assert isinstance(GuardedClient(inner), LLMClient)
    for guard in (AllowAllGuard(), TokenBudgetGuard(), RecordingGuard()):
        assert isinstance(guard, UsageGuard)


# -- the trace ---------------------------------------------------------------------------------


def llm_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "workingmem.llm"]


async def test_a_call_logs_one_info_line(
    upstream: ScriptedUpstream, inner: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workingmem.llm")
    upstream.push(Reply("ok", prompt_tokens=40, completion_tokens=2))

    await GuardedClient(inner).complete(model="cheap", messages=HELLO, meta=meta())

    (record,) = llm_records(caplog)
    assert record.levelno == logging.INFO
    line = record.getMessage()
    for part in (
        "kind=MEMORY_WORKING",
        "outcome=ok",
        "tenant=t1",
        "thread=th1",
        "user=u1",
        "model=cheap",
        "prompt_tokens=40",
        "completion_tokens=2",
        "total_tokens=42",
    ):
        assert part in line
    fields = record.llm  # type: ignore[attr-defined]
    assert fields["tenant"] == "t1"
    assert fields["total_tokens"] == 42


async def test_a_refusal_logs_one_warning(
    inner: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workingmem.llm")

    with pytest.raises(UsageRefusedError):
        await GuardedClient(inner, guard=RecordingGuard("no budget left")).complete(
            model="cheap", messages=HELLO, meta=meta()
        )

    (record,) = llm_records(caplog)
    assert record.levelno == logging.WARNING
    assert "outcome=refused" in record.getMessage()
    assert 'reason="no budget left"' in record.getMessage()


async def test_an_upstream_failure_passes_through_and_is_traced(
    upstream: ScriptedUpstream, inner: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workingmem.llm")
    guard = RecordingGuard()
    upstream.push(StatusError(400, "bad request"))

    with pytest.raises(LLMError) as caught:
        await GuardedClient(inner, guard=guard).complete(model="cheap", messages=HELLO, meta=meta())

    assert caught.value.status_code == 400
    assert guard.recorded == []
    (record,) = llm_records(caplog)
    assert record.levelno == logging.WARNING
    assert "outcome=error" in record.getMessage()
    assert "status_code=400" in record.getMessage()
    assert "error_type=LLMError" in record.getMessage()


class FakeSpan(otel_trace.Span):
    """Just enough of a recording span to read what the trace wrote on it."""

    def __init__(self, name: str, attributes: Attributes) -> None:
        self.name = name
        self.attributes: dict[str, AttributeValue] = dict(attributes or {})
        self.status: otel_trace.Status | None = None
        self.exceptions: list[BaseException] = []

    def get_span_context(self) -> otel_trace.SpanContext:
        return otel_trace.INVALID_SPAN_CONTEXT

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        self.attributes.update(attributes)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self.attributes[key] = value

    def add_event(
        self, name: str, attributes: Attributes = None, timestamp: int | None = None
    ) -> None:
        return None

    def update_name(self, name: str) -> None:
        self.name = name

    def is_recording(self) -> bool:
        return True

    def set_status(
        self, status: otel_trace.Status | otel_trace.StatusCode, description: str | None = None
    ) -> None:
        assert isinstance(status, otel_trace.Status)
        self.status = status

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        self.exceptions.append(exception)

    def end(self, end_time: int | None = None) -> None:
        return None


class FakeTracer(otel_trace.Tracer):
    def __init__(self) -> None:
        self.spans: list[FakeSpan] = []

    def start_span(
        self, name: str, *args: Any, attributes: Attributes = None, **kwargs: Any
    ) -> FakeSpan:
        span = FakeSpan(name, attributes)
        self.spans.append(span)
        return span

    @contextmanager
    def start_as_current_span(  # type: ignore[override]
        self, name: str, *args: Any, attributes: Attributes = None, **kwargs: Any
    ) -> Iterator[FakeSpan]:
        yield self.start_span(name, attributes=attributes)


class FakeProvider(otel_trace.TracerProvider):
    def __init__(self) -> None:
        self.tracer = FakeTracer()

    def get_tracer(self, *args: Any, **kwargs: Any) -> FakeTracer:
        return self.tracer


async def test_spans_carry_the_meta_and_the_usage(
    upstream: ScriptedUpstream, inner: OpenAIClient
) -> None:
    provider = FakeProvider()
    client = GuardedClient(inner, tracer=LLMTracer(tracer_provider=provider))
    upstream.push(Reply("ok", prompt_tokens=40, completion_tokens=2), StatusError(500, "down"))

    await client.complete(model="cheap", messages=HELLO, meta=meta())
    with pytest.raises(LLMError):
        await client.complete(model="cheap", messages=HELLO, meta=meta())

    ok, failed = provider.tracer.spans
    assert ok.name == "workingmem.llm.MEMORY_WORKING"
    assert ok.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "cheap",
        "gen_ai.response.model": "cheap",
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 2,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "gen_ai.response.finish_reasons": ["stop"],
        "workingmem.llm.kind": "MEMORY_WORKING",
        "workingmem.llm.outcome": "ok",
        "workingmem.tenant_id": "t1",
        "workingmem.thread_id": "th1",
        "workingmem.user_id": "u1",
    }
    assert ok.status is None
    assert failed.attributes["workingmem.llm.outcome"] == "error"
    assert failed.attributes["http.response.status_code"] == 500
    assert failed.status is not None
    assert failed.status.status_code is otel_trace.StatusCode.ERROR
    assert isinstance(failed.exceptions[0], LLMError)


async def test_without_otel_only_the_log_line(
    inner: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workingmem.llm")
    provider = FakeProvider()

    await GuardedClient(inner, tracer=LLMTracer(tracer_provider=provider, otel=False)).complete(
        model="cheap", messages=HELLO, meta=meta()
    )

    assert provider.tracer.spans == []
    assert len(llm_records(caplog)) == 1


_GLOBAL_PROVIDER = """
from opentelemetry import trace
from workingmem.llm import CallKind, CallMeta, LLMTracer

asked = []
get_tracer = trace.get_tracer
trace.get_tracer = lambda *args, **kwargs: asked.append(args[0]) or get_tracer(*args, **kwargs)

class Recording(trace.TracerProvider):
    def __init__(self):
        self.names = []
    def get_tracer(self, *args, **kwargs):
        names = self.names
        class Tracer(trace.NoOpTracer):
            def start_as_current_span(self, name, *args, **kwargs):
                names.append(name)
                return super().start_as_current_span(name, *args, **kwargs)
        return Tracer()

tracer = LLMTracer()
meta = CallMeta(kind=CallKind.ANSWER, tenant_id="t1", model="m")
with tracer.call(meta):
    pass
before = len(asked)
provider = Recording()
trace.set_tracer_provider(provider)
with tracer.call(meta):
    pass
print(before, provider.names)
"""


def test_spans_go_to_the_global_provider_once_the_application_sets_one() -> None:
    # Before: no tracer asked for, no span made (it would record nothing); after: the next
    # call's span.
    assert run_fresh(_GLOBAL_PROVIDER) == "0 ['workingmem.llm.ANSWER']"


class NamedClient:
    """An LLMClient of the host's own: the wrapper takes any implementation."""

    def __init__(self) -> None:
        self.calls: list[Sequence[Any]] = []

    async def complete(self, *, model: str, messages: Sequence[Any], **_: Any) -> llm.Completion:
        self.calls.append(messages)
        return llm.Completion(text="fixed", usage=Usage(1, 1), model=model)


async def test_any_client_can_be_guarded() -> None:
    inner = NamedClient()
    guard = TokenBudgetGuard(default_budget=10)

    completion = await GuardedClient(inner, guard=guard).complete(
        model="m", messages=HELLO, meta=meta()
    )

    assert completion.text == "fixed"
    assert guard.spent("t1") == 2


def test_exports_are_complete() -> None:
    """Everything public in workingmem.llm is in __all__, and __all__ resolves."""
    for name in llm.__all__:
        assert hasattr(llm, name), name
    public = {
        name
        for name, value in vars(llm).items()
        if not name.startswith("_") and not isinstance(value, type(llm))
    }
    assert public <= set(llm.__all__), public - set(llm.__all__)
