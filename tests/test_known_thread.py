"""A load from the thread the gateway holds (`KnownThread`) is the load that reads the store.

Under its ask lock the gateway reads the thread's newest turns (as many as the window's first
read would take); the thread's newest turns are that read and the turns the ask appended
since, and the window is chosen from them, reading older turns only when it needs more.
Hypothesis draws threads (tool calls and their results among the turns, a read that ends
inside a unit), the point where the lock's read was made and what it read (the whole thread,
its newest turns by count and by tokens, or what the gateway reads: then the load reads
nothing), strategies (and the switched-off memory, R2) and budgets, and checks that the load
given the known thread returns exactly what the load that reads the store returns, or fails
alike.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workingmem as wm
from workingmem.gateway import Gateway
from workingmem.gateway_config import GatewayConfig
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.memory import KnownThread
from workingmem.stores.base import StateWrite
from workingmem.tokens import tokenizer_for

MODEL = wm.ModelInfo(id="gpt-4o", context_window=128_000)
TOKENIZER = tokenizer_for(MODEL)
PROFILE = wm.Profile(id="p")

texts = st.sampled_from(["hi", "Lyon in May?", "It rains a lot then. " * 8, "ok " * 40])


@st.composite
def units(draw: st.DrawFn, index: int) -> list[dict[str, Any]]:
    """A user or assistant turn, or an assistant turn calling tools with their results."""
    if draw(st.integers(0, 3)):
        role, text = draw(st.sampled_from(["user", "assistant"])), draw(texts)
        message: dict[str, Any] = {"role": role, "content": text}
        if draw(st.booleans()):  # content parts, and a participant's name
            message["content"] = [{"type": "text", "text": text}]
            message["name"] = "ana"
        return [message]
    calls = [
        {"id": f"c{index}-{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for n in range(draw(st.integers(1, 2)))
    ]
    return [
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": c["id"], "content": draw(texts)} for c in calls),
    ]


@st.composite
def threads(draw: st.DrawFn) -> list[dict[str, Any]]:
    thread = [m for i in range(draw(st.integers(1, 14))) for m in draw(units(i))]
    return [*thread, {"role": "user", "content": draw(texts)}]  # a question to answer


configs = st.one_of(
    st.builds(
        lambda step: wm.WorkingMemoryConfig(
            strategy=wm.Strategy.SLIDING_WINDOW, window_step_ratio=step
        ),
        st.sampled_from([0.0, 0.2]),
    ),
    st.builds(
        lambda recent: wm.WorkingMemoryConfig(
            strategy=wm.Strategy.SUMMARY_BUFFER, recent_turns=recent, update_every_turns=1
        ),
        st.integers(1, 6),
    ),
    st.just(wm.WorkingMemoryConfig(enabled=False)),  # R2: the last 20 turns, no notes
)


async def both_loads(
    thread: list[dict[str, Any]],
    read_at: int,
    config: wm.WorkingMemoryConfig,
    budget: int,
    newest: tuple[int, int | None] | None = None,
) -> tuple[object, object, int]:
    """The load that reads the store, and the load from the known thread (each a load or
    the exception it raised), and the reads the latter made. `newest`: what the lock read of
    the thread's newest turns (at most so many, through so many tokens), else all of them;
    ``(0, None)``: what the gateway's lock reads (`WorkingMemory.first_read` for a budget at
    least the load's), the thread counted as its reads count it."""
    async with await wm.open_store("sqlite:///:memory:") as store:
        memory = wm.WorkingMemory(store=store, config=config)
        ids: dict[str, Any] = {"tenant_id": "t", "thread_id": "th"}
        read = None
        if read_at:
            await store.append(**ids, messages=thread[:read_at])
            if newest == (0, None):  # a read counts them; what follows is counted as written
                await store.read_tail(**ids, tokenizer=TOKENIZER, limit=read_at)
                turns, goal = memory.first_read(model=MODEL, profile=PROFILE, budget_tokens=budget)
                newest = (max(turns, 3), goal)  # placement's 3 newest turns at least
            write = StateWrite(
                0, "They talk about Lyon.", [wm.Fact("Lyon", 1, 1)], read_at, "update"
            )
            await store.write_memory_state(**ids, write=write)
            limit, tokens = newest or (read_at + 1, None)
            read = await store.read_tail(**ids, tokenizer=TOKENIZER, limit=limit, tokens=tokens)
        appended = await store.append(**ids, messages=thread[read_at:])
        known = KnownThread.after(read, appended, TOKENIZER)
        assert known is not None
        results: list[object] = []
        reads: list[object] = []
        read_tail = store.read_tail

        async def counted_read(**kwargs: Any) -> Any:
            reads.append(kwargs)
            return await read_tail(**kwargs)

        for given in (None, known):
            reads.clear()
            store.read_tail = counted_read  # type: ignore[method-assign]
            try:
                results.append(
                    await memory.load(
                        **ids, model=MODEL, profile=PROFILE, budget_tokens=budget, known=given
                    )
                )
            except wm.ContextOverflowError as exc:
                results.append((type(exc), str(exc)))
            finally:
                store.read_tail = read_tail  # type: ignore[method-assign]
        return results[0], results[1], len(reads)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_load_from_the_known_thread_is_the_load_that_reads_it(data: st.DataObject) -> None:
    thread = data.draw(threads())
    read_at = data.draw(st.integers(0, len(thread) - 1))
    config = data.draw(configs)
    budget = data.draw(st.sampled_from([60, 200, 600, 16_000]))
    newest = None
    how = data.draw(st.sampled_from(["whole", "newest", "gateway"])) if read_at else "whole"
    if how == "newest":  # the newest turns alone, by count and maybe by tokens
        newest = (data.draw(st.integers(1, read_at)), data.draw(st.sampled_from([None, 20, 2_000])))
    elif how == "gateway":
        newest = (0, None)
    read, known, reads = asyncio.run(both_loads(thread, read_at, config, budget, newest))
    assert known == read
    if how == "gateway":
        assert reads == 0  # the lock's read held the window


LONG_THREAD = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": text}
    for i, text in enumerate(
        ["Lyon in May?", "It rains a lot then. " * 8, "ok " * 40, "hi", "Trains?"] * 8
    )
]


@pytest.mark.parametrize(
    "config",
    [
        wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW),
        wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW, window_step_ratio=0.2),
        wm.WorkingMemoryConfig(
            strategy=wm.Strategy.SUMMARY_BUFFER, recent_turns=4, update_every_turns=4
        ),
        wm.WorkingMemoryConfig(enabled=False),
    ],
    ids=["window", "window-step", "summary-buffer", "off"],
)
@pytest.mark.parametrize("budget", [200, 600, 2_000, 8_000])
def test_the_gateway_s_lock_read_holds_the_window(
    config: wm.WorkingMemoryConfig, budget: int
) -> None:
    """A lock read as large as `first_read`'s for the call's budget holds the window: the
    load from it reads nothing, and returns what the load that reads the store does."""
    thread = [*LONG_THREAD, {"role": "user", "content": "And hotels?"}]
    read, known, reads = asyncio.run(both_loads(thread, 30, config, budget, (0, None)))
    assert known == read
    assert reads == 0


async def test_a_thread_that_moved_on_is_not_known(tmp_path: Any) -> None:
    """Turns that do not follow the read seq by seq (another writer came in between), a read
    that did not start at the first turn, or no thread at all: no known thread."""
    async with await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store:
        chat = [{"role": "user", "content": f"m{i}"} for i in range(6)]
        await store.append(tenant_id="t", thread_id="th", messages=chat[:3])
        whole = await store.read_tail(tenant_id="t", thread_id="th", tokenizer=TOKENIZER, limit=4)
        newest = await store.read_tail(tenant_id="t", thread_id="th", tokenizer=TOKENIZER, limit=2)
        await store.append(
            tenant_id="t", thread_id="th", messages=chat[3:4]
        )  # another writer's turn
        ours = await store.append(tenant_id="t", thread_id="th", messages=chat[4:])
        assert KnownThread.after(whole, ours, TOKENIZER) is None
        assert KnownThread.after(newest, ours, TOKENIZER) is None
        assert KnownThread.after(None, [], TOKENIZER) is None
        assert KnownThread.after(whole, [], TOKENIZER) is not None


async def test_a_known_thread_counted_with_another_tokenizer_is_read_again() -> None:
    async with await wm.open_store("sqlite:///:memory:") as store:
        turns = await store.append(
            tenant_id="t", thread_id="th", messages=[{"role": "user", "content": "Lyon?"}]
        )
        other = tokenizer_for(wm.ModelInfo(id="gpt-4", context_window=8_192))
        assert other.key != TOKENIZER.key
        stale = KnownThread.after(None, turns, other)
        assert stale is not None
        memory = wm.WorkingMemory(store=store)
        once, again = [
            await memory.load(
                tenant_id="t",
                thread_id="th",
                model=MODEL,
                profile=PROFILE,
                budget_tokens=1_000,
                known=known,
            )
            for known in (stale, None)
        ]
        assert once == again


@pytest.mark.parametrize("resent", [False, True], ids=["one-message", "whole-history"])
async def test_an_ask_reads_no_window_its_locks_read_holds_it(
    store: wm.Store, tenant: str, monkeypatch: pytest.MonkeyPatch, resent: bool
) -> None:
    """The ask lock's read takes what the window's first read would (for one new message,
    where a read is a round trip: PostgreSQL), or the whole history a client resends: the
    window is chosen from it and the turns the ask appended, and the thread is not read
    again, however long. On SQLite a one-message ask on a thread longer than the lock's
    read reads its window apart, outside the lock's write transaction. Either way the
    upstream gets the same request."""
    reads: list[int] = []
    read_tail = store.read_tail

    async def counted(**kwargs: Any) -> Any:
        reads.append(kwargs["limit"])
        return await read_tail(**kwargs)

    monkeypatch.setattr(store, "read_tail", counted)
    config = GatewayConfig(default_model="gpt-4o", cheap_model="gpt-4o", models={"gpt-4o": MODEL})
    history: list[dict[str, Any]] = []
    sent: list[list[dict[str, Any]]] = []
    async with (
        ScriptedUpstream(responder=lambda r: Reply(f"Said: {r['messages'][-1]['content']}")) as up,
        OpenAIClient(base_url=up.base_url, timeout=2, max_retries=0) as llm,
        Gateway(store=store, llm=llm, config=config) as gateway,
    ):
        for question in ["Lyon in May?", "And in June?", "Trains from Paris?", "Hotels?"]:
            history.append({"role": "user", "content": question})
            reads.clear()
            if resent:
                result = await gateway.ask(tenant_id=tenant, thread_id="th", messages=history)
            else:
                result = await gateway.ask(tenant_id=tenant, thread_id="th", message=question)
            history.append({"role": "assistant", "content": result.answer})
            # the answer's request: a background update may have asked the upstream since
            answered = [r for r in up.requests if r["messages"][-1]["content"] == question]
            sent.append(answered[-1]["messages"][1:])
            apart = isinstance(store, wm.stores.SQLiteStore) and not resent and len(history) > 4
            assert bool(reads) == apart, reads
    assert sent == [history[: 2 * n + 1] for n in range(4)]
