"""SUMMARY_BUFFER's update (R6-R10, R12-R14) against a real OpenAI-compatible server.

The helper model is `ScriptedUpstream` on 127.0.0.1, reached through the real `openai` SDK.
In every failure case the stored state is exactly what it was, and the next due call works.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

import workingmem as wm
from tests.conftest import open_backend
from tests.helpers import DEFAULT_PROFILE, GPT4O, assistant, summarizing_responder, user
from workingmem.background import BackgroundQueue
from workingmem.llm import OpenAIClient, TokenBudgetGuard
from workingmem.llm.testing import Delay, Drop, Reply, ScriptedUpstream, StatusError

CHEAP = "cheap-model"
CONFIG = wm.WorkingMemoryConfig(
    strategy=wm.Strategy.SUMMARY_BUFFER, recent_turns=4, update_every_turns=4
)


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    async with ScriptedUpstream(responder=summarizing_responder) as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream) -> AsyncIterator[OpenAIClient]:
    async with OpenAIClient(base_url=upstream.base_url, timeout=0.5, max_retries=2) as llm:
        yield llm


def make_memory(
    store: wm.ThreadStore,
    client: OpenAIClient,
    reports: list[wm.UpdateReport] | None = None,
    **kwargs: object,
) -> wm.WorkingMemory:
    return wm.WorkingMemory(
        store=store,
        config=CONFIG,
        llm=client,
        on_report=None if reports is None else reports.append,
        **kwargs,  # type: ignore[arg-type]
    )


async def save(memory: wm.WorkingMemory, tenant: str, thread_id: str = "th") -> wm.UpdateReport:
    return await memory.update_summary(
        tenant_id=tenant,
        thread_id=thread_id,
        user_id="u",
        profile=DEFAULT_PROFILE,
        cheap_model_id=CHEAP,
    )


def exchange(i: int, remember: bool = False) -> list[wm.Message]:
    text = f"please remember that my locker number is {i}" if remember else f"question {i}"
    return [user(text), assistant(f"answer {i}")]


async def snapshot(store: wm.ThreadStore, tenant: str) -> tuple[object, object]:
    return (
        await store.get_memory_state(tenant_id=tenant, thread_id="th"),
        await store.list_memory_states(tenant_id=tenant, thread_id="th"),
    )


async def test_nothing_happens_until_the_update_is_due(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """R7: no helper call before update_every_turns new turns."""
    memory = make_memory(store, client)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), user("q")])
    report = await save(memory, tenant)
    assert report.outcome is wm.UpdateOutcome.NOT_DUE
    assert upstream.requests == []


async def test_a_due_update_writes_summary_and_facts_with_their_turns(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """R7 + R6: the update stores summary + facts (with turn ranges) and the next load
    carries them as notes, with the recent turns verbatim."""
    memory = make_memory(store, client)
    messages = [*exchange(1, remember=True), *exchange(2), user("what is my locker?")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    report = await save(memory, tenant)
    assert report.outcome is wm.UpdateOutcome.UPDATED, report
    assert (report.helper_calls, report.turn_count) == (1, 5)
    assert len(upstream.requests) == 1
    request = upstream.requests[0]
    assert request["model"] == CHEAP
    assert request["response_format"]["type"] == "json_schema"

    state = await memory.get_state(tenant_id=tenant, thread_id="th")
    assert state.turn_count == 5
    assert "through turn 5" in state.summary
    assert state.facts == ["please remember that my locker number is 1"]
    assert (state.facts[0].first_turn, state.facts[0].last_turn) == (1, 1)

    loaded = await memory.load(
        tenant_id=tenant, thread_id="th", model=GPT4O, profile=DEFAULT_PROFILE, budget_tokens=4000
    )
    assert "through turn 5" in loaded.notes
    assert "- please remember that my locker number is 1" in loaded.notes
    assert loaded.messages == messages[-3:]  # the last 4 turns open on an answer: dropped


async def test_the_update_reads_only_the_turns_since_the_state(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """R7: the second update's prompt holds the old summary and only the new turns."""
    memory = make_memory(store, client)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    await save(memory, tenant)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(3), *exchange(4)])
    await save(memory, tenant)
    second = upstream.requests[1]["messages"][-1]["content"]
    assert "through turn 4" in second  # the old summary
    assert re.search(
        r"^\[5\] \(\d{1,2} [A-Z][a-z]+ \d{4}, \d\d:\d\d\) user: question 3$", second, re.M
    )
    assert "[4] assistant" not in second


async def test_the_schema_offers_no_more_removals_than_there_are_facts(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """Nothing to remove on a thread without facts, one removal per old fact after: a model
    under a grammar cannot spend its tokens inventing facts to remove."""
    memory = make_memory(store, client)
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[*exchange(1, remember=True), *exchange(2)]
    )
    await save(memory, tenant)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(3), *exchange(4)])
    await save(memory, tenant)
    removals = [
        r["response_format"]["json_schema"]["schema"]["properties"]["remove"]["maxItems"]
        for r in upstream.requests
    ]
    assert removals == [0, 1]


FAILURES: list[object] = [
    pytest.param(lambda: Reply("this is not json"), "invalid_output", id="malformed-json"),
    pytest.param(lambda: Reply('{"facts": []}'), "invalid_output", id="missing-summary"),
    pytest.param(
        lambda: Reply('{"summary": "ok", "facts": "x"}'), "invalid_output", id="facts-not-a-list"
    ),
    pytest.param(
        lambda: Reply(json.dumps({"summary": "x" * 5000, "facts": []})),
        "invalid_output",
        id="over-long-summary",
    ),
    pytest.param(
        lambda: Reply(json.dumps({"summary": "s", "facts": ["f"] * 60})),
        "invalid_output",
        id="too-many-facts",
    ),
    pytest.param(
        lambda: Reply('{"summary": "cut', finish_reason="length"),
        "invalid_output",
        id="cut-at-max-tokens",
    ),
    pytest.param(lambda: [StatusError(500, "boom")] * 3, "upstream_error", id="500s"),
    pytest.param(lambda: [StatusError(400, "bad request")] * 2, "upstream_error", id="400"),
    pytest.param(lambda: [Delay(2.0, Reply("{}"))] * 3, "upstream_error", id="timeout"),
    pytest.param(lambda: [Drop()] * 3, "upstream_error", id="dropped-connection"),
]


@pytest.mark.parametrize(("failure", "outcome"), FAILURES)
async def test_a_failed_update_leaves_the_state_exactly_as_it_was_and_is_retried(
    store: wm.ThreadStore,
    tenant: str,
    client: OpenAIClient,
    upstream: ScriptedUpstream,
    failure: Callable[[], object],
    outcome: str,
) -> None:
    """R8/R9: bad output or a failing upstream changes nothing, raises nothing, and the next
    due call succeeds."""
    memory = make_memory(store, client)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    assert (await save(memory, tenant)).outcome is wm.UpdateOutcome.UPDATED
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(3), *exchange(4)])
    before = await snapshot(store, tenant)

    scripted = failure()
    upstream.push(*(scripted if isinstance(scripted, list) else [scripted]))
    report = await save(memory, tenant)
    assert report.outcome.value == outcome, report
    assert await snapshot(store, tenant) == before

    upstream.script()  # back to the good helper
    retried = await save(memory, tenant)
    assert retried.outcome is wm.UpdateOutcome.UPDATED
    state = await memory.get_state(tenant_id=tenant, thread_id="th")
    assert (state.turn_count, "through turn 8" in state.summary) == (8, True)


async def test_an_empty_summary_where_there_was_one_is_rejected(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    memory = make_memory(store, client)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    await save(memory, tenant)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(3), *exchange(4)])
    upstream.push(Reply('{"summary": "", "facts": []}'))
    report = await save(memory, tenant)
    assert report.outcome is wm.UpdateOutcome.INVALID_OUTPUT
    assert "empty" in report.detail
    assert "through turn 4" in (await memory.get_state(tenant_id=tenant, thread_id="th")).summary


async def test_429_then_success_is_retried_by_the_client(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    memory = make_memory(store, client)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    upstream.push(StatusError(429, "slow down", retry_after=0.01))
    report = await save(memory, tenant)
    assert report.outcome is wm.UpdateOutcome.UPDATED
    assert len(upstream.requests) == 2


async def test_save_context_never_raises_even_for_a_missing_thread(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient
) -> None:
    reports: list[wm.UpdateReport] = []
    memory = make_memory(store, client, reports)
    await memory.save_context(
        tenant_id=tenant,
        thread_id="nope",
        user_id="u",
        profile=DEFAULT_PROFILE,
        cheap_model_id=CHEAP,
    )
    # A thread deleted while its update waited is the usual way to get here: nothing to do.
    assert [(r.outcome, r.detail) for r in reports] == [
        (wm.UpdateOutcome.SKIPPED, "no such thread (deleted meanwhile?)")
    ]


async def test_a_refusing_guard_stops_the_call_and_the_update(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """R10: a guard may refuse; then no request, no update, no exception, a report."""
    guard = TokenBudgetGuard(tenant_budgets={tenant: 0})
    memory = make_memory(store, client, guard=guard)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    before = await snapshot(store, tenant)
    report = await save(memory, tenant)
    assert report.outcome is wm.UpdateOutcome.REFUSED
    assert upstream.requests == []
    assert await snapshot(store, tenant) == before


async def test_the_guard_records_usage_per_tenant(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient
) -> None:
    guard = TokenBudgetGuard(default_budget=1_000_000)
    memory = make_memory(store, client, guard=guard)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    report = await save(memory, tenant)
    assert guard.spent(tenant) == report.prompt_tokens + report.completion_tokens > 0


async def test_reset_after_an_update_is_not_undone_by_the_next_save(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """R14: reset marks the turns as seen; the next save_context finds nothing due."""
    memory = make_memory(store, client)
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[*exchange(1, True), *exchange(2)]
    )
    await save(memory, tenant)
    await memory.reset(tenant_id=tenant, thread_id="th")
    report = await save(memory, tenant)
    assert report.outcome is wm.UpdateOutcome.NOT_DUE
    state = await memory.get_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.facts, state.turn_count) == ("", [], 4)
    assert len(upstream.requests) == 1


async def test_a_reset_during_an_update_wins(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """The forget lands while the helper is thinking: the update is dropped, not stored."""
    memory = make_memory(store, client)
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[*exchange(1, True), *exchange(2)]
    )
    upstream.push(Delay(0.3, Reply(json.dumps({"summary": "stale", "facts": ["secret"]}))))
    update = asyncio.create_task(save(memory, tenant))
    await asyncio.sleep(0.1)
    await memory.reset(tenant_id=tenant, thread_id="th")
    report = await update
    assert report.outcome is wm.UpdateOutcome.CONFLICT
    state = await memory.get_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.facts) == ("", [])


async def test_history_lists_versions_and_rollback_restores_one(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient
) -> None:
    memory = make_memory(store, client)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    await save(memory, tenant)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(3), *exchange(4)])
    await save(memory, tenant)
    history = await memory.history(tenant_id=tenant, thread_id="th")
    assert [v.version for v in history] == [2, 1]
    restored = await memory.rollback(tenant_id=tenant, thread_id="th", version=1)
    assert (restored.version, restored.summary, restored.turn_count) == (
        3,
        history[1].summary,
        4,
    )
    # the turns after the restored version are due again, read from the good summary
    assert (await save(memory, tenant)).outcome is wm.UpdateOutcome.UPDATED
    with pytest.raises(wm.NotFoundError):
        await memory.rollback(tenant_id=tenant, thread_id="th", version=99)


async def test_strategy_switch_to_sliding_window_ignores_and_keeps_the_summary(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """R13 with a state written by a real update."""
    memory = make_memory(store, client)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    await save(memory, tenant)
    sliding = wm.Profile(id="s", working_memory=wm.Strategy.SLIDING_WINDOW)
    loaded = await memory.load(
        tenant_id=tenant, thread_id="th", model=GPT4O, profile=sliding, budget_tokens=4000
    )
    assert loaded.notes == ""
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(3), *exchange(4)])
    skipped = await memory.update_summary(
        tenant_id=tenant, thread_id="th", user_id="u", profile=sliding, cheap_model_id=CHEAP
    )
    assert skipped.outcome is wm.UpdateOutcome.SKIPPED
    assert "through turn 4" in (await memory.get_state(tenant_id=tenant, thread_id="th")).summary
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("turns", [50, 5_000])
async def test_the_helper_input_is_bounded_whatever_the_thread_length(
    tmp_path: Path, turns: int, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """R7: a backlog is folded in chunks; every request stays under the same bound."""
    config = CONFIG.model_copy(update={"helper_input_max_tokens": 1_000})
    async with await wm.open_store(f"sqlite:///{tmp_path / 'm.db'}") as store:
        for start in range(0, turns, 1_000):
            await store.append(
                tenant_id="t",
                thread_id="th",
                messages=[
                    user(f"message {i} " + "word " * 20) if i % 2 == 0 else assistant(f"reply {i}")
                    for i in range(start, min(turns, start + 1_000))
                ],
            )
        memory = wm.WorkingMemory(store=store, config=config, llm=client)
        report = await save(memory, "t")
        assert report.outcome is wm.UpdateOutcome.UPDATED
        state = await memory.get_state(tenant_id="t", thread_id="th")
        assert state.turn_count == turns
    tok = wm.tokenizer_for(GPT4O)
    sizes = [tok.count_text(r["messages"][-1]["content"]) for r in upstream.requests]
    template = 1_500  # the prompt's own text, with caps of 4,000 + 50 x 300 characters
    bound = template + config.summary_max_chars // 2 + config.helper_input_max_tokens
    assert max(sizes) <= bound, (max(sizes), bound)
    assert report.helper_calls == len(upstream.requests) >= (2 if turns > 50 else 1)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_concurrent_updates_from_two_workers_lose_nothing_and_call_once_per_batch(
    backend: str, tmp_path: Path, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """Single flight across two WorkingMemory instances on one database: many submits for
    many threads, exactly one helper call per thread's due batch, every state complete."""
    first = await open_backend(backend, tmp_path)
    second = await open_backend(backend, tmp_path)
    threads = [f"th{i}" for i in range(6)]
    try:
        for thread_id in threads:
            await first.append(
                tenant_id=tenant, thread_id=thread_id, messages=[*exchange(1), *exchange(2)]
            )
        workers = [make_memory(first, client), make_memory(second, client)]
        async with BackgroundQueue(workers=4) as queue_a, BackgroundQueue(workers=4) as queue_b:
            for round_ in range(5):
                for i, thread_id in enumerate(threads):
                    memory = workers[(i + round_) % 2]
                    queue = queue_a if memory is workers[0] else queue_b
                    queue.submit(
                        thread_id,
                        lambda m=memory, t=thread_id: save(m, tenant, t),  # type: ignore[misc]
                    )
            await queue_a.when_idle()
            await queue_b.when_idle()
        assert len(upstream.requests) == len(threads)
        for thread_id in threads:
            state = await second.get_memory_state(tenant_id=tenant, thread_id=thread_id)
            assert (state.turn_count, state.version) == (4, 1)
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param({"summary": "<the new summary>", "facts": []}, id="placeholder-summary"),
        pytest.param(
            {
                "summary": "Ada plans a trip.",
                "facts": [{"text": "<one fact>", "first_turn": 1, "last_turn": 1}],
            },
            id="placeholder-fact",
        ),
    ],
)
def test_a_copied_template_placeholder_is_not_a_memory(answer: dict[str, object]) -> None:
    """Small models copy the prompt's example values; those are rejected, not stored."""
    from workingmem.summarizer import Caps, parse_update

    with pytest.raises(wm.InvalidOutputError, match="placeholder"):
        parse_update(json.dumps(answer), caps=Caps(4000, 50, 300), previous_summary="", last_turn=4)


async def test_load_never_waits_for_an_update_nor_calls_a_model(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """R11: while the helper is still thinking, load answers at once with the old notes and
    sends nothing upstream."""
    memory = make_memory(store, client)
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    upstream.push(Delay(1.0, Reply(json.dumps({"summary": "later", "facts": []}))))
    update = asyncio.create_task(save(memory, tenant))
    await asyncio.sleep(0.1)
    assert len(upstream.requests) == 1
    started = asyncio.get_running_loop().time()
    loaded = await memory.load(
        tenant_id=tenant, thread_id="th", model=GPT4O, profile=DEFAULT_PROFILE, budget_tokens=4000
    )
    assert asyncio.get_running_loop().time() - started < 0.5
    assert loaded.notes == ""
    assert len(upstream.requests) == 1
    assert (await update).outcome is wm.UpdateOutcome.UPDATED


async def test_every_helper_call_carries_its_meta_to_the_guard(
    store: wm.ThreadStore, tenant: str, client: OpenAIClient
) -> None:
    """R10: the guard sees tenant, thread, user, kind MEMORY_WORKING and the cheap model."""
    seen: list[wm.CallMeta] = []

    class Recording:
        async def check(self, meta: wm.CallMeta) -> str | None:
            seen.append(meta)
            return None

        async def record(self, meta: wm.CallMeta, usage: wm.Usage) -> None:
            return None

    memory = make_memory(store, client, guard=Recording())
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), *exchange(2)])
    await save(memory, tenant)
    assert [(m.tenant_id, m.thread_id, m.user_id, m.kind, m.model) for m in seen] == [
        (tenant, "th", "u", wm.CallKind.MEMORY_WORKING, CHEAP)
    ]


async def test_the_cheap_models_tokenizer_cuts_the_backlog(
    tmp_path: Path, client: OpenAIClient, upstream: ScriptedUpstream
) -> None:
    """A tokenizer configured for the cheap model reaches the chunker: text it counts as
    more tokens (CJK under o200k_base, against the 4-characters estimate of an unknown id)
    is folded in more, smaller chunks."""
    config = CONFIG.model_copy(update={"helper_input_max_tokens": 400})
    text = "東京の天気はどうですか。明日は雨が降りますか。" * 3
    calls = {}
    for name, models in (
        ("estimate", {}),
        ("o200k", {"cheap": wm.ModelInfo(id="cheap", context_window=1, tokenizer="o200k_base")}),
    ):
        async with await wm.open_store(f"sqlite:///{tmp_path / f'{name}.db'}") as store:
            await store.append(
                tenant_id="t",
                thread_id="th",
                messages=[user(text) if i % 2 == 0 else assistant(text) for i in range(40)],
            )
            memory = wm.WorkingMemory(store=store, config=config, llm=client, models=models)
            report = await memory.update_summary(
                tenant_id="t",
                thread_id="th",
                user_id=None,
                profile=DEFAULT_PROFILE,
                cheap_model_id="cheap",
            )
            assert report.outcome is wm.UpdateOutcome.UPDATED, report.detail
            calls[name] = report.helper_calls
    assert calls["o200k"] > calls["estimate"], calls
