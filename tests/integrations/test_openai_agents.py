"""`WorkingMemorySession` under the OpenAI Agents SDK's own runner.

The agent's model is the SDK's `OpenAIChatCompletionsModel` over real HTTP to a scripted
OpenAI-compatible server on 127.0.0.1 (`ScriptedUpstream`, see `openai_agents_script`), so
every request the SDK makes is recorded as sent: what the model read is asserted on, not on
what the session returned. Summaries come from a second scripted server, the cheap model.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from agents import RunConfig, Runner, TResponseInputItem
from agents.memory import Session
from openai import AsyncOpenAI

import workingmem as wm
from tests.helpers import assert_in_provider_order, summarizing_responder
from tests.integrations.openai_agents_script import SLIDING, agent_for, ask, history_of
from tests.locomo import locomo_exchanges
from workingmem.integrations.openai_agents import WorkingMemorySession
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

TOKENIZER = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o-mini", context_window=128_000))
NOTES_HEADING = "## About this conversation"
PACKAGE = str(Path(wm.__file__).resolve().parents[1])
"""The copy of the package this test runs, for the processes it starts."""


def test_the_session_is_the_sdks_session_protocol(tmp_path: Path) -> None:
    session = WorkingMemorySession("th1", store=f"sqlite:///{tmp_path / 'm.db'}", tenant_id="t")
    assert isinstance(session, Session)
    session.close()


async def test_a_run_with_tool_calls_stores_every_item_once_and_sends_whole_units(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    session = WorkingMemorySession(
        "th1", store=store, tenant_id=tenant, config=SLIDING, agent_memory=wm.AgentMemoryConfig()
    )
    agent = agent_for(client, session)
    produced: list[TResponseInputItem] = []
    for i in range(8):
        calls = [tool_call("weather", {"city": f"c{i}"}, id=f"call_w{i}")]
        if i % 3 == 0:
            calls.append(
                tool_call("update_working_memory", {"content": f"likes c{i}"}, id=f"call_m{i}")
            )
        upstream.push(Reply(None, tool_calls=calls), Reply(f"answer {i}"))
        config = RunConfig(session_input_callback=session.input_callback())
        result = await Runner.run(agent, f"question {i}", session=session, run_config=config)
        produced.append({"content": f"question {i}", "role": "user"})
        produced.extend(item.to_input_item() for item in result.new_items)

    stored = await session.get_items()
    assert stored == produced  # each item once, verbatim, in order
    assert len(stored) == 8 * 4 + 3 * 2  # user, calls, outputs, answer; 3 runs call twice
    for request in upstream.requests:
        assert_in_provider_order(request["messages"])
    memory = await wm.AgentMemory(store=store).get_working_memory(
        tenant_id=tenant, conversation_id="th1"
    )
    assert memory == "likes c6"  # the model's tool call, with the session's ids
    assert "likes c6" in upstream.requests[-1]["messages"][0]["content"]


async def test_a_long_conversation_reaches_the_model_as_a_window_within_the_budget(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    exchanges = locomo_exchanges(160)
    session = WorkingMemorySession(
        "locomo", store=store, tenant_id=tenant, config=SLIDING, budget_tokens=2_000
    )
    agent = agent_for(client, session)
    for exchange in exchanges:
        upstream.push(Reply(exchange.answer))
        await ask(agent, session, exchange.question)

    assert len(await session.get_items()) == 2 * len(exchanges)
    sizes = []
    for request, exchange in zip(upstream.requests, exchanges, strict=True):
        history = history_of(request)
        tokens = sum(TOKENIZER.count_message(m) for m in history)
        assert tokens <= 1_000 + TOKENIZER.reply_overhead  # chat_history_ratio 0.5 of 2,000
        assert history[0]["role"] == "user"
        assert history[-1] == {"role": "user", "content": exchange.question}
        sizes.append(len(history))
    assert max(sizes) > 5  # the window holds earlier exchanges...
    assert sizes[-1] < len(exchanges)  # ...not all of them


async def test_summary_buffer_notes_arrive_once_due_and_never_hold_up_a_run(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    held = threading.Event()

    def cheap_model(request: dict[str, Any]) -> Reply:
        held.wait(timeout=30)
        return summarizing_responder(request)

    with ScriptedUpstream(cheap_model) as cheap:
        llm = wm.OpenAIClient(base_url=cheap.base_url, api_key="unused")
        config = wm.WorkingMemoryConfig(recent_turns=4, update_every_turns=4)
        session = WorkingMemorySession(
            "th1", store=store, tenant_id=tenant, config=config, llm=llm, cheap_model="cheap"
        )
        agent = agent_for(client, session)
        for i in range(3):
            upstream.push(Reply(f"answer {i}"))
            await ask(agent, session, f"remember that I like colour {i}")
        # The update is due (6 turns > 4) and its model is held: the runs went on regardless.
        assert NOTES_HEADING not in json.dumps(upstream.requests)
        held.set()
        await session.when_idle()
        upstream.push(Reply("answer 3"))
        await ask(agent, session, "what do I like?")
        await session.aclose()
        await llm.aclose()

    system = upstream.requests[-1]["messages"][0]
    assert system["role"] == "system"
    assert NOTES_HEADING in system["content"]
    assert "colour 0" in system["content"]  # a fact from the summary
    assert len(cheap.requests) >= 1
    assert len(history_of(upstream.requests[-1])) <= 5  # recent_turns 4 + the new question


def pets_thread() -> list[TResponseInputItem]:
    """A thread whose old turns name the dog and a parcel, then small talk, then a question
    about the parcel: the newest stored exchange."""
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "We adopted a beagle puppy and named him Biscuit."},
        {"role": "assistant", "content": "Biscuit is a great name for a beagle."},
        {"role": "user", "content": "My parcel was lost in the post."},
        {"role": "assistant", "content": "Sorry to hear that; it may still turn up."},
    ]
    for n in range(60):
        items += [
            {"role": "user", "content": f"Small talk number {n} about nothing much."},
            {"role": "assistant", "content": f"Reply {n}."},
        ]
    items += [
        {"role": "user", "content": "Has the parcel turned up?"},
        {"role": "assistant", "content": "Not yet."},
    ]
    return items


async def test_recall_searches_for_the_new_input_and_its_turns_reach_the_model(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    """With recall on, the turns recalled for the question being asked (not for the previous
    one, which is stored) are in the notes the model reads, with the window's dates."""
    session = WorkingMemorySession(
        "pets",
        store=store,
        tenant_id=tenant,
        config=wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW, recall_ratio=0.5),
        budget_tokens=1_000,
    )
    await session.add_items(pets_thread())
    upstream.push(Reply("Biscuit."))
    await ask(agent_for(client, session), session, "What did we call the beagle?")

    (request,) = upstream.requests
    notes = request["messages"][0]
    assert notes["role"] == "system"
    assert "named him Biscuit" in notes["content"]  # recalled for this question's words
    assert "lost in the post" not in notes["content"]  # not for the previous question's
    assert "When the messages below were written (UTC):" in notes["content"]
    window = history_of(request)
    assert window[-1] == {"role": "user", "content": "What did we call the beagle?"}
    assert "named him Biscuit" not in json.dumps(window)  # recalled, not in the window


async def test_an_oversized_exchange_drops_out_of_the_window_and_the_thread_goes_on(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    """An answer larger than the window's share is stored; the next runs work, without it:
    the new input is the current exchange. Only an input that alone does not fit fails, with
    `ContextOverflowError`, and stores nothing."""
    session = WorkingMemorySession(
        "big", store=store, tenant_id=tenant, config=SLIDING, budget_tokens=2_000
    )
    agent = agent_for(client, session)
    huge = "lorem " * 3_000
    upstream.push(Reply("noted"), Reply(huge), Reply("the first one"), Reply("ok"))
    await ask(agent, session, "my order is 1234")
    await ask(agent, session, "paste the whole manual")
    assert await ask(agent, session, "which order was it?") == "the first one"
    await ask(agent, session, "thanks")

    for request in upstream.requests[2:]:
        assert huge.strip() not in json.dumps(request)
    assert history_of(upstream.requests[-1])[-3:] == [
        {"role": "user", "content": "which order was it?"},
        {"role": "assistant", "content": "the first one"},
        {"role": "user", "content": "thanks"},
    ]
    stored = await session.get_items()
    assert len(stored) == 8

    with pytest.raises(wm.ContextOverflowError):
        await ask(agent, session, huge)
    assert len(upstream.requests) == 4  # the model was not called
    assert await session.get_items() == stored


async def test_switched_off_memory_sends_the_last_twenty_turns_and_no_notes(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    session = WorkingMemorySession(
        "th1", store=store, tenant_id=tenant, config=wm.WorkingMemoryConfig(enabled=False)
    )
    agent = agent_for(client, session)
    for i in range(15):
        upstream.push(Reply(f"answer {i}"))
        await ask(agent, session, f"question {i}")
    last = upstream.requests[-1]["messages"]
    assert last[0] == {"role": "user", "content": "question 4"}  # 20 stored turns + the new one
    assert len(last) == 21


async def test_two_tenants_with_one_session_id_never_mix(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    ours = WorkingMemorySession("shared-id", store=store, tenant_id=tenant, config=SLIDING)
    theirs = WorkingMemorySession(
        "shared-id", store=store, tenant_id=f"{tenant}-other", config=SLIDING
    )
    upstream.push(Reply("ours"), Reply("theirs"))
    await ask(agent_for(client, ours), ours, "our secret is 42")
    await ask(agent_for(client, theirs), theirs, "hello")
    assert "42" not in json.dumps(upstream.requests[-1])
    assert (await theirs.get_items())[0].get("content") == "hello"
    await theirs.clear_session()
    assert len(await ours.get_items()) == 2


async def test_the_tenant_and_user_may_come_from_the_runs_context(
    store: wm.Store, tenant: str, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    session = WorkingMemorySession(
        "th1", store=store, config=SLIDING, agent_memory=wm.AgentMemoryConfig(scope="user")
    )
    agent = agent_for(client, session)
    upstream.push(
        Reply(None, tool_calls=[tool_call("update_working_memory", {"content": "vegan"})]),
        Reply("noted"),
    )
    context = {"tenant_id": tenant, "user_id": "u1"}
    await ask(agent, session, "I'm vegan", context=context)
    got = wm.AgentMemory(store=store, config=wm.AgentMemoryConfig(scope="user"))
    assert await got.get_working_memory(tenant_id=tenant, user_id="u1") == "vegan"
    thread = await store.get_thread(tenant_id=tenant, thread_id="th1")
    assert thread.turn_count == 4


def test_a_session_without_a_tenant_is_refused(tmp_path: Path) -> None:
    session = WorkingMemorySession("th1", store=f"sqlite:///{tmp_path / 'm.db'}")
    with pytest.raises(wm.ValidationError, match="tenant_id"):
        asyncio.run(session.get_items())
    session.close()


async def test_pop_and_limit_and_clear_act_on_items_not_turns(store: wm.Store, tenant: str) -> None:
    session = WorkingMemorySession("th1", store=store, tenant_id=tenant, config=SLIDING)
    answer: list[TResponseInputItem] = [
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sun"},
    ]
    await session.add_items(answer)
    await session.add_items([{"type": "function_call_output", "call_id": "c2", "output": "rain"}])
    assert (await session.get_items(2))[0]["call_id"] == "c1"  # type: ignore[typeddict-item]
    popped = await session.pop_item()
    assert popped == {"type": "function_call_output", "call_id": "c2", "output": "rain"}
    assert await session.get_items() == answer
    assert await session.pop_item() == answer[-1]
    assert await session.pop_item() == answer[2]  # one call of the answer's two
    assert await session.get_items() == answer[:2]
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None


async def test_bad_items_are_refused_and_nothing_changes(store: wm.Store, tenant: str) -> None:
    session = WorkingMemorySession("th1", store=store, tenant_id=tenant, config=SLIDING)
    await session.add_items([{"role": "user", "content": "hi"}])
    with pytest.raises(wm.ValidationError):
        await session.add_items(
            [{"role": "user", "content": "ok"}, "not an item"]  # type: ignore[list-item]
        )
    assert await session.get_items() == [{"role": "user", "content": "hi"}]


RESTART_SCRIPT = """
import asyncio, json, sys
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, set_tracing_disabled
from openai import AsyncOpenAI
import workingmem as wm
from workingmem.integrations.openai_agents import WorkingMemorySession
from workingmem.llm.testing import Reply, ScriptedUpstream

set_tracing_disabled(True)

async def main() -> None:
    with ScriptedUpstream() as upstream:
        upstream.push(Reply("Your name is Ada."))
        session = WorkingMemorySession("th1", store=sys.argv[1], tenant_id="t1",
                                       config=wm.WorkingMemoryConfig(enabled=False))
        client = AsyncOpenAI(base_url=upstream.base_url, api_key="unused")
        agent = Agent(name="a", model=OpenAIChatCompletionsModel(model="gpt-4o-mini",
                                                                  openai_client=client))
        await Runner.run(agent, "What is my name?", session=session,
                         run_config=RunConfig(session_input_callback=session.input_callback()))
        await session.aclose()
        print(json.dumps(upstream.requests[-1]["messages"]))

asyncio.run(main())
"""


async def test_a_new_process_on_the_same_database_continues_the_conversation(
    tmp_path: Path, upstream: ScriptedUpstream, client: AsyncOpenAI
) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    session = WorkingMemorySession(
        "th1", store=url, tenant_id="t1", config=wm.WorkingMemoryConfig(enabled=False)
    )
    upstream.push(Reply("Hello Ada."))
    await ask(agent_for(client, session), session, "My name is Ada.")
    await session.aclose()

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([PACKAGE, os.getcwd()])}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", RESTART_SCRIPT, url],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    sent = json.loads(done.stdout.splitlines()[-1])
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "My name is Ada.",
        "What is my name?",
    ]
    assert sent[1]["content"] == "Hello Ada."


def test_without_the_sdk_the_import_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "try:\n    import workingmem.integrations.openai_agents\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": PACKAGE}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert "pip install 'workingmem[agents]'" in done.stdout
