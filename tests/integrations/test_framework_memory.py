"""`FrameworkMemory`, the core every integration adapts: its settings, its loop, its edges."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from workingmem.integrations import FrameworkMemory

SLIDING = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"model": " "}, "model"),
        ({"model": 42}, "model"),
        ({"budget_tokens": 0}, "budget_tokens"),
        ({"budget_tokens": True}, "budget_tokens"),
        ({"store": 3}, "store"),
    ],
)
def test_bad_settings_are_refused_by_name(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(wm.ValidationError) as raised:
        FrameworkMemory(**settings)
    assert raised.value.field == field


def test_the_default_budget_is_the_models_window_less_its_output_reserve() -> None:
    model = wm.ModelInfo(id="m", context_window=10_000, max_output_tokens=1_000)
    assert FrameworkMemory(model=model).budget_tokens == 9_000
    assert FrameworkMemory().budget_tokens == 128_000 - 4_096


async def test_a_thread_not_stored_yet_reads_empty_and_edits_as_nothing(
    store: wm.Store, tenant: str
) -> None:
    memory = FrameworkMemory(store=store, config=SLIDING)
    t, th = tenant, "new"
    assert (await memory.context(tenant_id=t, thread_id=th)).turns == []
    assert await memory.all_turns(tenant_id=t, thread_id=th) == []
    assert await memory.tail_turns(tenant_id=t, thread_id=th, count=3) == []
    assert await memory.pop(tenant_id=t, thread_id=th) == []
    assert await memory.truncate(tenant_id=t, thread_id=th, after_seq=0) == []
    await memory.clear(tenant_id=t, thread_id=th)
    with pytest.raises(wm.NotFoundError):
        await store.get_thread(tenant_id=t, thread_id=th)  # none of it made a thread
    hello: list[wm.MessageIn] = [{"role": "user", "content": "hi"}]
    stored = await memory.truncate(tenant_id=t, thread_id=th, after_seq=0, messages=hello)
    assert [turn.seq for turn in stored] == [1]
    assert await memory.replace(tenant_id=t, thread_id=th, messages=[]) == []
    assert await memory.all_turns(tenant_id=t, thread_id=th) == []


async def test_agent_memory_tools_follow_its_scope_and_refuse_when_off(
    store: wm.Store, tenant: str
) -> None:
    per_user = FrameworkMemory(store=store, agent_memory=wm.AgentMemoryConfig(scope="user"))
    assert per_user.tool_specs() == []  # no user: nothing to keep it for
    assert per_user.tool_specs(user_later=True)
    assert per_user.tool_specs(user_id="u1")
    off = FrameworkMemory(store=store)
    assert off.tool_specs() == []
    result = await off.run_tool("get_working_memory", "{}", tenant_id=tenant, thread_id="th")
    assert result.startswith("Error:")


async def test_summary_buffer_without_a_model_client_warns_once_and_keeps_the_window(
    store: wm.Store, tenant: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    memory = FrameworkMemory(store=store, budget_tokens=1_000)
    with caplog.at_level(logging.WARNING, "workingmem.integrations"):
        for i in range(3):
            await memory.append(
                tenant_id=tenant, thread_id="th", messages=[{"role": "user", "content": f"q{i}"}]
            )
    assert sum("without a model client" in r.message for r in caplog.records) == 1
    assert len((await memory.context(tenant_id=tenant, thread_id="th")).turns) == 3


def test_a_store_opened_from_a_url_serves_sync_callers_on_any_thread(tmp_path: Path) -> None:
    memory = FrameworkMemory(store=f"sqlite:///{tmp_path / 'm.db'}", config=SLIDING)

    def add(i: int) -> None:
        async def one() -> None:  # each thread its own short-lived loop, as frameworks do
            await memory.append(
                tenant_id="t", thread_id="th", messages=[{"role": "user", "content": f"q{i}"}]
            )

        asyncio.run(one())

    threads = [threading.Thread(target=add, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    turns = memory.run_sync(lambda: memory.all_turns(tenant_id="t", thread_id="th"))
    assert sorted(str(t.content) for t in turns) == ["q0", "q1", "q2", "q3"]
    memory.close()


async def test_close_called_from_async_code_closes_in_a_task(tmp_path: Path) -> None:
    memory = FrameworkMemory(store=f"sqlite:///{tmp_path / 'm.db'}", config=SLIDING)
    await memory.append(tenant_id="t", thread_id="th", messages=[{"role": "user", "content": "q"}])
    store = await memory.run(memory.store)
    memory.close()  # the SDK's tests call a session's sync close() inside a running loop
    await memory.aclose()
    with pytest.raises(Exception):  # noqa: B017, PT011 - the driver's error for a closed store
        await store.get_thread(tenant_id="t", thread_id="th")


async def test_a_sync_call_on_the_stores_own_loop_is_refused_not_deadlocked(
    store: wm.Store,
) -> None:
    memory = FrameworkMemory(store=store, config=SLIDING)
    await memory.context(tenant_id="t", thread_id="th")  # this loop is now the store's home
    with pytest.raises(RuntimeError, match="async method"):
        memory.run_sync(lambda: memory.all_turns(tenant_id="t", thread_id="th"))


async def test_the_memory_text_is_the_agent_block_and_the_strategys_notes(
    store: wm.Store, tenant: str
) -> None:
    agent = wm.AgentMemoryConfig()
    summary = FrameworkMemory(store=store, agent_memory=agent)
    sliding = FrameworkMemory(store=store, agent_memory=agent, config=SLIDING)
    await summary.append(
        tenant_id=tenant, thread_id="th", messages=[{"role": "user", "content": "hi"}]
    )
    await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=wm.StateWrite(
            expected_version=0,
            summary="Ada plans a trip.",
            facts=[],
            turn_count=1,
            reason="update",
        ),
    )
    text = (await summary.context(tenant_id=tenant, thread_id="th")).memory_text
    assert "Ada plans a trip." in text
    assert "## Working memory" in text
    sliding_text = (await sliding.context(tenant_id=tenant, thread_id="th")).memory_text
    assert "Ada plans a trip." not in sliding_text
    assert "## Working memory" in sliding_text
    assert (await summary.context(tenant_id=tenant, thread_id="none yet")).memory_text != ""


async def test_pending_messages_are_the_current_exchange_older_turns_make_room(
    store: wm.Store, tenant: str
) -> None:
    """What a call sends unstored is the window's current exchange: a stored exchange too
    large for the share drops out like any older unit; only pending messages that alone do
    not fit are a `ContextOverflowError`, on a thread not stored yet as on any other."""
    memory = FrameworkMemory(store=store, config=SLIDING, budget_tokens=200)
    huge: wm.MessageIn = {"role": "user", "content": "word " * 500}
    pending: list[wm.MessageIn] = [{"role": "user", "content": "which order was it?"}]

    async def exchange(question: str, answer: str) -> list[str]:
        """Stores an exchange; the window's stored turns before the pending question."""
        said: list[wm.MessageIn] = [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
        ]
        await memory.append(tenant_id=tenant, thread_id="th", messages=said)
        context = await memory.context(tenant_id=tenant, thread_id="th", pending=pending)
        return [str(turn.content) for turn in context.turns]

    assert await exchange("paste the manual", "word " * 500) == []  # too large: it drops out
    assert await exchange("my order is 1234", "noted") == ["my order is 1234", "noted"]
    for thread in ("th", "not stored yet"):
        with pytest.raises(wm.ContextOverflowError):
            await memory.context(tenant_id=tenant, thread_id=thread, pending=[huge])
    fresh = await memory.context(tenant_id=tenant, thread_id="not stored yet", pending=pending)
    assert fresh.turns == []
