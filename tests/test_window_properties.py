"""Properties of every window, for random threads and budgets (hypothesis).

For any thread of users, assistants, parallel tool calls (some left unanswered) and any
budget, the window is provider-valid, fits, opens on a user turn, ends with the current
exchange, and is the longest such suffix; and `WorkingMemory.load`, which reads a store page
by page, picks exactly the window the pure selection picks on the whole thread.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workingmem as wm
from tests.conftest import postgres_url
from workingmem import context
from workingmem.messages import normalize_messages, plan_units
from workingmem.strategies import Selection, group_units, select_window

REPLY = 3
GPT4O = wm.ModelInfo(id="gpt-4o", context_window=128_000)


@st.composite
def threads(draw: st.DrawFn) -> list[wm.Message]:
    """A thread of units; the newest unit is a user turn or the current tool loop."""
    messages: list[wm.Message] = []
    call = 0
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["user", "user", "assistant", "tools"]))
        words = " ".join(["word"] * draw(st.integers(1, 30)))
        if kind == "user":
            messages.append({"role": "user", "content": words})
        elif kind == "assistant":
            messages.append({"role": "assistant", "content": words})
        else:
            ids = [f"c{call + i}" for i in range(draw(st.integers(1, 3)))]
            call += len(ids)
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": "f", "arguments": words}}
                        for i in ids
                    ],
                }
            )
            answered = draw(st.permutations(ids))
            if draw(st.booleans()) and len(answered) > 1:
                answered = answered[:-1]  # an abandoned call: one result never came
            messages.extend({"role": "tool", "tool_call_id": i, "content": words} for i in answered)
    messages.append({"role": "user", "content": "the current question"})
    return messages


def counted(messages: list[wm.Message]) -> list[wm.CountedTurn]:
    tok = wm.tokenizer_for(GPT4O)
    planned = plan_units(None, normalize_messages(messages), first_seq=1)
    return [
        wm.CountedTurn(
            seq=p.seq, unit_seq=p.unit_seq, message=p.message, tokens=tok.count_message(p.message)
        )
        for p in planned
    ]


def assert_provider_valid(window: Sequence[wm.MessageIn]) -> None:
    open_calls: set[str] = set()
    for message in window:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "orphaned tool result"
            open_calls.remove(message["tool_call_id"])
        else:
            assert not open_calls, "a tool call without its result"
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert not open_calls, "a tool call without its result"


def check_window(turns: list[wm.CountedTurn], limit: int) -> list[wm.ChatMessage] | None:
    """Selects and checks every invariant; None when the current exchange cannot fit."""
    units = group_units(turns)
    last_user = max(i for i, u in enumerate(units) if u.is_user)
    current = [u for u in units[last_user:] if u.complete]
    current_cost = REPLY + sum(u.tokens for u in current)

    def select() -> Selection:
        return select_window(turns, limit_tokens=limit, reply_overhead=REPLY, at_thread_start=True)

    if current_cost > limit:
        with pytest.raises(wm.ContextOverflowError) as caught:
            select()
        assert caught.value.tokens == current_cost
        return None
    selection = select()
    window = [t.message for t in selection.turns]
    assert not selection.needs_more
    assert_provider_valid(window)
    assert selection.tokens == REPLY + sum(t.tokens for t in selection.turns) <= limit
    assert window[0]["role"] == "user"
    current_messages = [t.message for u in current for t in u.turns]
    assert window[-len(current_messages) :] == current_messages
    # the longest such suffix: starting at the next older user unit would not fit
    start = selection.turns[0].seq
    older = [u for u in units if u.turns[-1].seq < start and u.complete]
    users = [i for i, u in enumerate(older) if u.is_user]
    if users:
        extra = sum(u.tokens for u in older[users[-1] :])
        assert selection.tokens + extra > limit
    # and nothing sendable inside the window's span was skipped
    inside = [u for u in units if u.turns[0].seq >= start and u.complete]
    assert [t.seq for u in inside for t in u.turns] == [t.seq for t in selection.turns]
    return window


@given(thread=threads(), limit=st.integers(1, 3_000))
@settings(max_examples=400, deadline=None)
def test_every_window_is_valid_fits_and_is_the_longest(
    thread: list[wm.Message], limit: int
) -> None:
    check_window(counted(thread), limit)


async def _window(
    store: wm.Store, tenant: str, config: wm.WorkingMemoryConfig, budget: int
) -> list[wm.ChatMessage] | None:
    """The messages `WorkingMemory.load` gives of thread "th" under `budget`; None when the
    budget cannot hold the current turn."""
    memory = wm.WorkingMemory(store=store, config=config)
    try:
        loaded = await memory.load(
            tenant_id=tenant,
            thread_id="th",
            model=GPT4O,
            profile=wm.Profile(id="p"),
            budget_tokens=budget,
        )
    except wm.ContextOverflowError:
        return None
    return loaded.messages


@given(thread=threads(), budget=st.integers(20, 4_000), ratio=st.sampled_from([0.25, 0.5, 1.0]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_load_through_a_store_matches_the_pure_selection(
    thread: list[wm.Message], budget: int, ratio: float
) -> None:
    """Paged reads of the tail give the same window as selecting on the whole thread."""
    limit = int(budget * ratio)
    expected = check_window(counted(thread), limit)
    config = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW, chat_history_ratio=ratio)

    async def run() -> Any:
        async with await wm.open_store("sqlite:///:memory:") as store:
            # appended in several calls, as a live thread grows
            for start in range(0, len(thread), 7):
                await store.append(
                    tenant_id="t", thread_id="th", messages=thread[start : start + 7]
                )
            return await _window(store, "t", config, budget)

    assert asyncio.run(run()) == expected


@given(thread=threads(), budget=st.integers(20, 4_000), ratio=st.sampled_from([0.25, 0.5, 1.0]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_counted_thread_on_postgresql_loads_the_pure_selection(
    thread: list[wm.Message], budget: int, ratio: float
) -> None:
    """R4 where PostgreSQL finds the window's first turn from the running counts (migration 13):
    a thread counted at every append, loaded, gives the window selecting on it gives."""
    url = postgres_url()
    limit = int(budget * ratio)
    expected = check_window(counted(thread), limit)
    config = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW, chat_history_ratio=ratio)
    tenant = f"tenant-{uuid.uuid4().hex[:12]}"

    async def run() -> Any:
        async with await wm.open_store(url) as store:
            await store.append(tenant_id=tenant, thread_id="th", messages=thread[:1])
            # the model's tokenizer registered: every later append counts its turns
            tokenizer = wm.tokenizer_for(GPT4O)
            await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=1)
            for start in range(1, len(thread), 7):
                await store.append(
                    tenant_id=tenant, thread_id="th", messages=thread[start : start + 7]
                )
            return await _window(store, tenant, config, budget)

    assert asyncio.run(run()) == expected


@given(turns=st.lists(st.integers(1, 50), min_size=1, max_size=300), limit=st.integers(50, 5_000))
@settings(max_examples=200, deadline=None)
def test_long_threads_of_plain_turns(turns: list[int], limit: int) -> None:
    """Alternating user/assistant threads of any length: the same invariants."""
    messages: list[wm.Message] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "word " * n}
        for i, n in enumerate(turns)
    ]
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": "now"})
    check_window(counted(messages), limit)


@given(
    thread=threads(),
    skip=st.integers(0, 6),
    limit=st.integers(1, 3_000),
    edge=st.one_of(st.none(), st.integers(-3, 3)),
    counts_known=st.booleans(),
)
@settings(max_examples=400, deadline=None)
def test_the_assembler_keeps_a_fitted_window_as_the_regrouping_would(
    thread: list[wm.Message], skip: int, limit: int, edge: int | None, counts_known: bool
) -> None:
    """The assembler sends a loaded window as it is when it is already valid and fits, and
    regroups it otherwise: either way exactly the window a full regrouping picks (any slice of
    a thread: leading answers, orphaned results, unanswered calls, or none of these)."""
    tokenizer = wm.tokenizer_for(GPT4O)
    messages: list[wm.ChatMessage] = [t.message for t in counted(thread)][skip:]
    counts = [tokenizer.count_message(m) for m in messages] if counts_known else []
    if edge is not None:  # at the edge: the messages and the reply's overhead, give or take
        limit = sum(map(tokenizer.count_message, messages)) + tokenizer.reply_overhead + edge

    def fit() -> tuple[list[wm.ChatMessage], int, int] | None:
        try:
            return context._fit(messages, counts, tokenizer, limit)
        except wm.ContextOverflowError:
            return None

    chosen = fit()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(context, "_fits_as_is", lambda *_: None)
        assert fit() == chosen
