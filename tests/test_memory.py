"""WorkingMemory's rules (R1-R5, R11-R15) on both stores."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, cast

import pytest

import workingmem as wm
from tests.helpers import DEFAULT_PROFILE, GPT4O, assistant, tool, user
from workingmem.stores.base import Tail

SLIDING = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)


def memory(store: wm.ThreadStore, config: wm.WorkingMemoryConfig = SLIDING) -> wm.WorkingMemory:
    return wm.WorkingMemory(store=store, config=config)


async def load(
    mem: wm.WorkingMemory,
    tenant: str,
    budget: int = 4_000,
    profile: wm.Profile = DEFAULT_PROFILE,
    thread_id: str = "th",
) -> wm.WorkingMemoryLoad:
    return await mem.load(
        tenant_id=tenant, thread_id=thread_id, model=GPT4O, profile=profile, budget_tokens=budget
    )


def exchange(i: int) -> list[wm.Message]:
    return [user(f"question {i}"), assistant(f"answer {i}")]


async def test_sliding_window_gives_the_newest_units_that_fit_the_share(
    store: wm.ThreadStore, tenant: str
) -> None:
    """R4: the window is the newest whole units whose tokens fit ratio x budget."""
    messages = [m for i in range(50) for m in exchange(i)] + [user("current")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    budget = 200
    loaded = await load(memory(store), tenant, budget)
    limit = int(SLIDING.chat_history_ratio * budget)
    assert loaded.messages[-1] == user("current")
    assert loaded.messages[0]["role"] == "user"
    assert loaded.tokens == wm.count_tokens(loaded.messages, GPT4O) <= limit
    # one more unit would not fit: the window is the longest suffix that does
    start = len(messages) - len(loaded.messages)
    assert wm.count_tokens(messages[start - 2 :], GPT4O) > limit
    assert loaded.notes == ""
    assert loaded.strategy is wm.Strategy.SLIDING_WINDOW
    assert loaded.dropped_turns == start


async def test_a_short_thread_is_sent_whole(store: wm.ThreadStore, tenant: str) -> None:
    messages = [*exchange(1), user("now")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    loaded = await load(memory(store), tenant)
    assert loaded.messages == messages
    assert loaded.dropped_turns == 0


async def test_window_never_opens_on_an_assistant_turn(store: wm.ThreadStore, tenant: str) -> None:
    """R3: a thread that starts with the assistant's greeting still opens on a user turn."""
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[assistant("Welcome! How can I help?"), user("hi")],
    )
    loaded = await load(memory(store), tenant)
    assert loaded.messages == [user("hi")]


async def test_window_never_opens_on_a_tool_unit_cut_by_the_budget(
    store: wm.ThreadStore, tenant: str
) -> None:
    """R3 + units: when the budget cuts before a user turn, the assistant/tool unit after it
    goes too; no orphaned tool result, no call without its results."""
    big = "word " * 60
    messages = [
        user(big),
        assistant(None, "c1", "c2"),
        tool("c1", "r1"),
        tool("c2", "r2"),
        assistant("done"),
        user("next"),
    ]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    small = wm.count_tokens(messages[1:], GPT4O)
    loaded = await load(
        memory(store, SLIDING.model_copy(update={"chat_history_ratio": 1.0})), tenant, small + 5
    )
    assert loaded.messages == [user("next")]


async def test_parallel_tool_calls_travel_with_all_their_results(
    store: wm.ThreadStore, tenant: str
) -> None:
    messages = [
        user("weather in two cities"),
        assistant(None, "a", "b"),
        tool("a", "sunny"),
        tool("b", "rain"),
        assistant("Sunny and rainy."),
        user("thanks"),
    ]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    loaded = await load(memory(store), tenant)
    assert loaded.messages == messages


async def test_a_call_without_all_its_results_is_never_sent(
    store: wm.ThreadStore, tenant: str
) -> None:
    """An abandoned call (one result missing) is left out; the rest of the thread is sent."""
    messages = [user("q1"), assistant(None, "a", "b"), tool("a"), user("q2")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    loaded = await load(memory(store), tenant)
    assert loaded.messages == [user("q1"), user("q2")]


async def test_mid_tool_loop_the_window_ends_with_the_results(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The current exchange (user turn + the calls and results so far) is always whole."""
    messages = [user("q"), assistant(None, "a"), tool("a", "42")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    loaded = await load(memory(store), tenant)
    assert loaded.messages == messages


async def test_the_current_turn_alone_over_the_share_is_context_overflow(
    store: wm.ThreadStore, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("word " * 500)])
    with pytest.raises(wm.ContextOverflowError) as caught:
        await load(memory(store), tenant, budget=100)
    assert caught.value.limit == 50
    assert caught.value.tokens == wm.count_tokens([user("word " * 500)], GPT4O)
    assert str(caught.value.tokens) in str(caught.value)


@pytest.mark.parametrize("budget", [0, -5, 1.5, True, "100"])
async def test_bad_budgets_are_validation_errors(
    store: wm.ThreadStore, tenant: str, budget: object
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("x")])
    with pytest.raises(wm.ValidationError) as caught:
        await load(memory(store), tenant, budget)  # type: ignore[arg-type]
    assert caught.value.field == "budget_tokens"


async def test_switched_off_memory_gives_the_last_twenty_turns_and_no_notes(
    store: wm.ThreadStore, tenant: str
) -> None:
    """R2: enabled=False gives the last 20 turns (opening on a user turn), no notes."""
    messages = [m for i in range(30) for m in exchange(i)] + [user("now")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    off = memory(store, wm.WorkingMemoryConfig(enabled=False))
    loaded = await load(off, tenant)
    # the last 20 turns start on an answer, which is dropped: 19 turns, opening on a user turn
    assert loaded.messages == messages[-19:]
    assert loaded.notes == ""
    assert loaded.strategy is None


async def test_strategy_is_chosen_per_call(store: wm.ThreadStore, tenant: str) -> None:
    """R1: the profile's working_memory, else the config's strategy, else SUMMARY_BUFFER."""
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("x")])
    default = memory(store, wm.WorkingMemoryConfig())
    assert (await load(default, tenant)).strategy is wm.Strategy.SUMMARY_BUFFER
    assert (await load(memory(store), tenant)).strategy is wm.Strategy.SLIDING_WINDOW
    summary_profile = wm.Profile(id="p", working_memory=wm.Strategy.SUMMARY_BUFFER)
    assert (await load(memory(store), tenant, profile=summary_profile)).strategy is (
        wm.Strategy.SUMMARY_BUFFER
    )
    whole_config = wm.Profile(id="q", working_memory=wm.WorkingMemoryConfig(enabled=False))
    assert (await load(default, tenant, profile=whole_config)).strategy is None


async def _write_summary(store: wm.ThreadStore, tenant: str, turn_count: int) -> None:
    await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=wm.StateWrite(
            expected_version=0,
            summary="Ada plans a trip to Lyon.",
            facts=[wm.Fact("Ada is vegetarian", 1, 2)],
            turn_count=turn_count,
            reason="update",
        ),
    )


class _StateApart:
    """A store whose tail reads bring no memory state, as a host's own store may be."""

    def __init__(self, store: wm.ThreadStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def read_tail(self, **kwargs: Any) -> Tail:
        tail = await self._store.read_tail(**kwargs)
        return Tail(thread=tail.thread, turns=tail.turns)


@pytest.mark.parametrize("apart", [False, True], ids=["state-with-the-tail", "state-apart"])
async def test_summary_buffer_gives_notes_and_the_recent_turns(
    store: wm.ThreadStore, tenant: str, apart: bool
) -> None:
    """R6: notes from the stored summary + facts; the last recent_turns turns, whole units,
    opening on a user turn; the notes read with the window, or apart when the store does not
    bring them."""
    messages = [m for i in range(10) for m in exchange(i)] + [user("now")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    await _write_summary(store, tenant, 14)
    config = wm.WorkingMemoryConfig(
        strategy=wm.Strategy.SUMMARY_BUFFER, recent_turns=6, update_every_turns=3
    )
    used = cast(wm.ThreadStore, _StateApart(store)) if apart else store
    loaded = await load(memory(used, config), tenant)
    assert loaded.messages == messages[-5:]  # the 6th newest is an answer: dropped
    assert "Ada plans a trip to Lyon." in loaded.notes
    assert "- Ada is vegetarian" in loaded.notes


async def test_strategy_switch_keeps_the_state(store: wm.ThreadStore, tenant: str) -> None:
    """R13: under SLIDING_WINDOW the stored summary is ignored, not wiped; get_state shows
    it; a switch back resumes from it."""
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1), user("now")])
    await _write_summary(store, tenant, 2)
    sliding = await load(memory(store), tenant)
    assert sliding.notes == ""
    state = await memory(store).get_state(tenant_id=tenant, thread_id="th")
    assert state.summary == "Ada plans a trip to Lyon."
    back = await load(memory(store, wm.WorkingMemoryConfig()), tenant)
    assert "Lyon" in back.notes


async def test_get_state_of_a_thread_never_written_is_empty(
    store: wm.ThreadStore, tenant: str
) -> None:
    """R12: the empty state, not an error, for a known thread without memory."""
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("x")])
    state = await memory(store).get_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.facts, state.turn_count) == ("", [], 0)


async def test_reset_forgets_the_notes_keeps_the_turns_and_marks_them_seen(
    store: wm.ThreadStore, tenant: str
) -> None:
    """R14: summary and facts go, turn_count moves to the thread's, the window stays."""
    messages = [*exchange(1), *exchange(2), user("now")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    await _write_summary(store, tenant, 2)
    mem = memory(store, wm.WorkingMemoryConfig())
    await mem.reset(tenant_id=tenant, thread_id="th")
    state = await mem.get_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.facts, state.turn_count) == ("", [], 5)
    loaded = await load(mem, tenant)
    assert loaded.notes == ""
    assert loaded.messages == messages
    history = await store.list_memory_states(tenant_id=tenant, thread_id="th")
    assert [s.summary for s in history] == [""]  # forgotten means gone from the history too


@pytest.mark.parametrize("method", ["load", "load-pending", "get_state", "reset"])
async def test_unknown_or_foreign_thread_is_not_found(
    store: wm.ThreadStore, tenant: str, method: str
) -> None:
    """R15: the same NotFoundError for another tenant's thread as for a missing one."""
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("secret")])
    mem = memory(store)
    messages = []
    for tenant_id, thread_id in ((tenant + "-other", "th"), (tenant, "missing")):
        call: Coroutine[Any, Any, object]
        if method == "load":
            call = load(mem, tenant_id, thread_id=thread_id)
        elif method == "load-pending":  # a framework's unstored input changes nothing of it
            call = mem.load(
                tenant_id=tenant_id,
                thread_id=thread_id,
                model=GPT4O,
                profile=DEFAULT_PROFILE,
                budget_tokens=4_000,
                pending=[user("and now?")],
            )
        elif method == "get_state":
            call = mem.get_state(tenant_id=tenant_id, thread_id=thread_id)
        else:
            call = mem.reset(tenant_id=tenant_id, thread_id=thread_id)
        with pytest.raises(wm.NotFoundError) as caught:
            await call
        messages.append(str(caught.value).replace("missing", "th"))
    assert messages[0] == messages[1]
    # and the owner's thread is untouched
    state = await mem.get_state(tenant_id=tenant, thread_id="th")
    assert state.version == 0


async def test_sliding_window_save_context_stores_nothing(
    store: wm.ThreadStore, tenant: str
) -> None:
    """R5: SLIDING_WINDOW's save_context writes no state."""
    await store.append(tenant_id=tenant, thread_id="th", messages=[*exchange(1)])
    mem = memory(store)
    await mem.save_context(
        tenant_id=tenant, thread_id="th", user_id="u", profile=DEFAULT_PROFILE, cheap_model_id="m"
    )
    assert await store.list_memory_states(tenant_id=tenant, thread_id="th") == []


async def test_load_counts_with_the_models_own_tokenizer(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The same thread counts differently for gpt-4o (o200k) and gpt-4 (cl100k), and each
    load's count is what count_tokens says for its messages."""
    text = "Les naïfs ægithales hâtifs pondant à Noël où il gèle sont sûrs d'être déçus."
    await store.append(tenant_id=tenant, thread_id="th", messages=[user(text)])
    mem = memory(store)
    for model in (GPT4O, wm.ModelInfo(id="gpt-4", context_window=8_192)):
        loaded = await mem.load(
            tenant_id=tenant,
            thread_id="th",
            model=model,
            profile=DEFAULT_PROFILE,
            budget_tokens=1000,
        )
        assert loaded.tokens == wm.count_tokens(loaded.messages, model)
    o200k = wm.count_tokens([user(text)], GPT4O)
    cl100k = wm.count_tokens([user(text)], wm.ModelInfo(id="gpt-4", context_window=8_192))
    assert o200k != cl100k


async def test_a_prefill_goes_last_with_the_user_turn_before_it(
    store: wm.ThreadStore, tenant: str
) -> None:
    """R3 with a request that ends with the assistant's text the model goes on from (a
    prefill): the current exchange is the user's turn and that text, kept whole and last
    however tight the budget, and the window still opens on the user's turn."""
    big = "word " * 60
    messages = [user(big), assistant(big), user("Who am I, as JSON?"), assistant("{")]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    current = wm.count_tokens(messages[2:], GPT4O)
    tight = memory(store, SLIDING.model_copy(update={"chat_history_ratio": 1.0}))
    loaded = await load(tight, tenant, current + 5)
    assert loaded.messages == messages[2:]
    roomy = await load(memory(store), tenant)
    assert roomy.messages == messages
