"""`WorkingMemorySession`'s edges as the SDK and applications reach them: the limit of
`get_items`, what `add_items` refuses or skips, `delete`, and a memory shared by sessions.

Runs go through the SDK's `Runner` over the scripted model of `openai_agents_script`; the
threads are set up and read back through the `Session` protocol the runner itself calls.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from agents import RunConfig, Runner, SessionSettings, TResponseInputItem
from openai import AsyncOpenAI

import workingmem as wm
from tests.helpers import summarizing_responder
from tests.integrations.openai_agents_script import SLIDING, agent_for, ask, history_of
from workingmem.integrations import FrameworkMemory
from workingmem.integrations.openai_agents import WorkingMemorySession
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

AGENT_MEMORY_HEADING = "## Working memory"
"""Opens the agent-memory block: notes `input_callback` puts in the model's input."""
NOTES_HEADING = "## About this conversation"
"""Opens SUMMARY_BUFFER's notes in the model's input."""


def exchange(n: int) -> list[TResponseInputItem]:
    """A question and its answer as an application hands them to `add_items`."""
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": f"answer {n}"},
    ]


def answer_text(item: TResponseInputItem) -> str:
    """The text of an assistant message item as the runner stores it."""
    message: dict[str, Any] = dict(item)
    assert message.get("role") == "assistant"
    return "".join(part["text"] for part in message["content"])


# -- get_items(limit=...) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "limit",
    [
        pytest.param("1", id="str"),
        pytest.param(True, id="bool"),
        pytest.param(1.5, id="float"),
    ],
)
async def test_a_limit_that_is_not_an_int_is_refused_naming_limit(
    store: wm.Store, tenant: str, limit: object
) -> None:
    """`get_items(limit=...)` takes an int or None: anything else (a bool too, which Python
    counts as an int) is a `ValidationError` naming ``limit`` and showing the value, never
    some slice of the thread."""
    session = WorkingMemorySession("th1", store=store, tenant_id=tenant, config=SLIDING)
    await session.add_items([*exchange(0), *exchange(1)])

    with pytest.raises(wm.ValidationError) as error:
        await session.get_items(limit)  # type: ignore[arg-type]
    assert error.value.field == "limit"
    assert repr(limit) in str(error.value)


@pytest.mark.parametrize("limit", [pytest.param(0, id="zero"), pytest.param(-1, id="negative")])
async def test_a_limit_of_zero_or_less_reads_no_history_and_the_run_is_still_stored(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI, limit: int
) -> None:
    """The SDK's ``SessionSettings(limit=...)`` at 0 or less: the runner reads no history, so
    the model gets the new input alone (not the whole thread, as SQL's ``LIMIT -1`` would
    give), and the run's items are stored after the thread's all the same."""
    session = WorkingMemorySession("th1", store=store, tenant_id=tenant, config=SLIDING)
    await session.add_items(exchange(0))
    upstream.push(Reply("answer 1"))
    config = RunConfig(
        session_input_callback=session.input_callback(),
        session_settings=SessionSettings(limit=limit),
    )
    await Runner.run(agent_for(client, session), "question 1", session=session, run_config=config)

    assert upstream.requests[-1]["messages"] == [{"role": "user", "content": "question 1"}]
    assert await session.get_items(limit) == []
    stored = await session.get_items()
    assert stored[:3] == [*exchange(0), {"role": "user", "content": "question 1"}]
    assert [answer_text(item) for item in stored[3:]] == ["answer 1"]


# -- add_items ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "items",
    [
        pytest.param(tuple(exchange(1)), id="tuple"),
        pytest.param(exchange(1)[0], id="one-item-not-in-a-list"),
    ],
)
async def test_add_items_refuses_anything_but_a_list_and_stores_nothing(
    store: wm.Store, tenant: str, items: object
) -> None:
    """`add_items` takes the protocol's list: a tuple of items, or one item not in a list (an
    easy slip), is a `ValidationError` naming ``items``, and the thread stays as it was."""
    session = WorkingMemorySession("th1", store=store, tenant_id=tenant, config=SLIDING)
    await session.add_items(exchange(0))

    with pytest.raises(wm.ValidationError) as error:
        await session.add_items(items)  # type: ignore[arg-type]
    assert error.value.field == "items"
    assert await session.get_items() == exchange(0)


async def test_a_run_without_new_input_stores_its_answer_and_never_the_notes(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    """A run given no new input (the agent goes on from the stored thread) has nothing of its
    own to store but its answer: the notes `input_callback` put first in the model's input,
    which the runner hands to `add_items` alone, are skipped without an error."""
    session = WorkingMemorySession(
        "th1", store=store, tenant_id=tenant, config=SLIDING, agent_memory=wm.AgentMemoryConfig()
    )
    await session.add_items(exchange(0))
    upstream.push(Reply("going on"))
    config = RunConfig(session_input_callback=session.input_callback())
    await Runner.run(agent_for(client, session), [], session=session, run_config=config)

    sent = upstream.requests[-1]["messages"]
    assert sent[0]["role"] == "system"
    assert sent[0]["content"].startswith(AGENT_MEMORY_HEADING)  # the notes reached the model
    assert sent[1:] == exchange(0)
    stored = await session.get_items()
    assert stored[:2] == exchange(0)
    assert [answer_text(item) for item in stored[2:]] == ["going on"]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("Answer in French.", id="text"),
        pytest.param([{"type": "input_text", "text": "Answer in French."}], id="text-parts"),
        pytest.param([], id="no-parts"),
    ],
)
async def test_the_applications_own_system_items_are_stored_verbatim(
    store: wm.Store,
    tenant: str,
    upstream: ScriptedUpstream,
    client: AsyncOpenAI,
    content: str | list[dict[str, str]],
) -> None:
    """A system item in a run's input is the application's: stored as given whatever the
    shape of its content; only the notes the memory itself put in the model's input, ahead
    of it, are left out of the thread."""
    session = WorkingMemorySession(
        "th1", store=store, tenant_id=tenant, config=SLIDING, agent_memory=wm.AgentMemoryConfig()
    )
    given: list[TResponseInputItem] = [
        cast(TResponseInputItem, {"role": "system", "content": content}),
        {"role": "user", "content": "Bonjour?"},
    ]
    upstream.push(Reply("Bonjour."))
    config = RunConfig(session_input_callback=session.input_callback())
    await Runner.run(agent_for(client, session), given, session=session, run_config=config)

    sent = upstream.requests[-1]["messages"]
    assert sent[0]["content"].startswith(AGENT_MEMORY_HEADING)
    assert [m["role"] for m in sent] == ["system", "system", "user"]
    stored = await session.get_items()
    assert stored[:2] == given
    assert [answer_text(item) for item in stored[2:]] == ["Bonjour."]


# -- delete ------------------------------------------------------------------------------------


async def test_delete_forgets_the_thread_and_its_agent_memory_and_no_other_thread(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    """`delete()` forgets the thread: its items and the agent-memory document the model wrote
    in it are gone (`clear_session` keeps the document), the next run on the same id starts
    empty, and the tenant's other threads keep theirs."""
    agent_memory = wm.AgentMemoryConfig()
    session = WorkingMemorySession(
        "th1", store=store, tenant_id=tenant, config=SLIDING, agent_memory=agent_memory
    )
    other = WorkingMemorySession("th2", store=store, tenant_id=tenant, config=SLIDING)
    await other.add_items(exchange(0))
    agent = agent_for(client, session)
    upstream.push(
        Reply(None, tool_calls=[tool_call("update_working_memory", {"content": "likes tea"})]),
        Reply("Noted."),
    )
    await ask(agent, session, "I like tea.")
    documents = wm.AgentMemory(store=store, config=agent_memory)
    assert await documents.get_working_memory(tenant_id=tenant, conversation_id="th1") == (
        "likes tea"
    )

    await session.delete()
    assert await session.get_items() == []
    assert await documents.get_working_memory(tenant_id=tenant, conversation_id="th1") is None
    upstream.push(Reply("I don't know yet."))
    await ask(agent, session, "What do I like?")
    assert history_of(upstream.requests[-1]) == [{"role": "user", "content": "What do I like?"}]
    assert "tea" not in json.dumps(upstream.requests[-1]["messages"])
    assert await other.get_items() == exchange(0)


# -- a memory shared by sessions ---------------------------------------------------------------


@pytest.mark.parametrize("closing", ["close", "aclose"])
async def test_closing_one_session_of_a_shared_memory_leaves_the_memory_working(
    store: wm.Store,
    tenant: str,
    upstream: ScriptedUpstream,
    client: AsyncOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    closing: str,
) -> None:
    """Sessions given one `FrameworkMemory` (``memory=``) do not own it: closing one of them,
    sync or async, closes nothing the others use; the model client the memory made for its
    summaries (from ``OPENAI_BASE_URL``) still writes the other threads' notes."""
    with ScriptedUpstream(summarizing_responder) as cheap:
        monkeypatch.setenv("OPENAI_BASE_URL", cheap.base_url)
        config = wm.WorkingMemoryConfig(recent_turns=2, update_every_turns=2)
        memory = FrameworkMemory(store=store, config=config)
        try:
            first = WorkingMemorySession("th1", tenant_id=tenant, memory=memory)
            second = WorkingMemorySession("th2", tenant_id=tenant, memory=memory)
            await first.add_items(exchange(0))
            if closing == "close":
                await asyncio.to_thread(first.close)  # synchronous code, on its own thread
            else:
                await first.aclose()
            await second.add_items([*exchange(0), *exchange(1), *exchange(2)])
            await second.when_idle()
            upstream.push(Reply("You asked three questions."))
            await ask(agent_for(client, second), second, "What did I ask?")
        finally:
            await memory.aclose()

    notes = upstream.requests[-1]["messages"][0]
    assert notes["role"] == "system"
    assert NOTES_HEADING in notes["content"]
