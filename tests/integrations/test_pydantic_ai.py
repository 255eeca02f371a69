"""`WorkingMemoryCapability` under Pydantic AI's own runner, with its offline models.

Every agent here is a real `pydantic_ai.Agent` run by the framework (`run`, `run_sync`), its
model a `FunctionModel` that scripts tool calls and records what it was given, on a real
SQLite file and the PostgreSQL server (`store`). SUMMARY_BUFFER's cheap model is a
`ScriptedUpstream` on 127.0.0.1 behind `OpenAIClient`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel

import workingmem as wm
from tests.helpers import summarizing_responder
from tests.integrations.pydantic_ai_script import Script, assert_units_whole
from tests.locomo import locomo_exchanges
from workingmem.integrations.pydantic_ai import FORMAT, WorkingMemoryCapability, chat_messages
from workingmem.llm.testing import Reply, ScriptedUpstream

HERE = Path(__file__).resolve().parent
NOTES_HEADING = "## About this conversation"
WORKING_MEMORY_HEADING = "## Working memory"
SLIDING = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)


# -- 1. the runner, with tools ---------------------------------------------------------------


async def test_runs_with_tools_store_each_message_once_and_send_whole_units(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """Over many runs with an application tool and the agent-memory tool: every message a
    run produced is stored once, read back equal; each request the model gets holds the
    earlier runs, whole tool units, one system prompt first, and the document it wrote."""
    memory = capabilities(
        store=store,
        tenant_id=tenant,
        thread_id="th1",
        user_id="u1",
        config=SLIDING,
        agent_memory=wm.AgentMemoryConfig(),
    )
    script = Script(answer="It is sunny.")
    agent = script.agent(memory, system_prompt="You are terse.")
    cities: list[str] = []

    @agent.tool_plain
    def weather(city: str) -> str:
        cities.append(city)
        return f"sunny in {city}"

    produced: list[ModelMessage] = []
    for run in range(6):
        script.calls = [
            ("weather", {"city": f"city-{run}"}),
            ("update_working_memory", {"content": f"The user asked about city-{run}."}),
        ]
        result = await agent.run(f"question {run}")
        assert result.output == "It is sunny."
        assert result.all_messages() == result.new_messages(), "the window is request-only"
        produced += result.new_messages()

    assert cities == [f"city-{run}" for run in range(6)]
    assert await memory.all_messages() == produced
    turns = await memory.memory.all_turns(tenant_id=tenant, thread_id="th1")
    assert [turn.to_message() for turn in turns] == chat_messages(produced)
    assert len(turns) == 6 * 5  # user, assistant with two calls, two results, answer
    assert {turn.format for turn in turns} == {FORMAT}

    for seen in script.seen:
        assert_units_whole(seen.chat)
        system = [
            (i, p)
            for i, m in enumerate(seen.messages)
            for p in m.parts
            if isinstance(p, SystemPromptPart)
        ]
        assert [(i, p.content) for i, p in system] == [(0, "You are terse.")]
    last = script.seen[-1]
    assert last.prompts == [f"question {run}" for run in range(6)]
    assert last.instructions is not None
    assert WORKING_MEMORY_HEADING in last.instructions
    assert "The user asked about city-5." in last.instructions


async def test_a_request_with_tool_results_and_a_prompt_is_kept_whole_and_cut_by_the_window(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """One `ModelRequest` holding two tool returns and a user prompt is three turns (the
    results first); read back it is the same message; a window that keeps only its prompt
    gives the model the prompt without the results whose calls it dropped."""
    big = "word " * 3_000
    prompt = UserPromptPart("second")
    mixed = ModelRequest(
        parts=[
            ToolReturnPart("lookup", big, tool_call_id="call-a"),
            prompt,
            ToolReturnPart("lookup", {"found": [1, 2]}, tool_call_id="call-b"),
        ]
    )
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("first")]),
        ModelResponse(
            parts=[
                ToolCallPart("lookup", {"q": "a"}, tool_call_id="call-a"),
                ToolCallPart("lookup", {"q": "b"}, tool_call_id="call-b"),
            ]
        ),
        mixed,
        ModelResponse(parts=[TextPart("done")]),
    ]
    writer = capabilities(store=store, tenant_id=tenant, thread_id="mixed", config=SLIDING)
    stored = await writer.append(history)
    assert [turn.role for turn in stored] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    assert await writer.all_messages() == history

    reader = capabilities(
        store=store, tenant_id=tenant, thread_id="mixed", config=SLIDING, budget_tokens=400
    )
    script = Script()
    await script.agent(reader).run("third")
    (seen,) = script.seen
    assert seen.messages[0] == ModelRequest(parts=[prompt], timestamp=mixed.timestamp)
    assert seen.prompts == ["second", "third"]
    assert_units_whole(seen.chat)


async def test_a_popped_prompt_leaves_its_tool_results_readable(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """Popping the unit that carried a request whole leaves its tool turns, each with its
    own part: they still read back as the results they were, and the next run's model gets
    them after their calls and before its prompt."""
    results = [
        ToolReturnPart("lookup", "a found", tool_call_id="call-a"),
        ToolReturnPart("lookup", "b found", tool_call_id="call-b"),
    ]
    memory = capabilities(store=store, tenant_id=tenant, thread_id="popped", config=SLIDING)
    await memory.append(
        [
            ModelRequest(parts=[UserPromptPart("first")]),
            ModelResponse(
                parts=[
                    ToolCallPart("lookup", {"q": "a"}, tool_call_id="call-a"),
                    ToolCallPart("lookup", {"q": "b"}, tool_call_id="call-b"),
                ]
            ),
            ModelRequest(parts=[*results, UserPromptPart("second")]),
        ]
    )
    popped = await memory.memory.pop(tenant_id=tenant, thread_id="popped")
    assert [turn.content for turn in popped] == ["second"]
    messages = await memory.all_messages()
    assert len(messages) == 3
    assert list(messages[2].parts) == results

    script = Script()
    await script.agent(memory).run("third")
    (seen,) = script.seen
    assert seen.prompts == ["first", "third"]
    assert list(seen.messages[2].parts)[:2] == results, "the results come before the prompt"
    assert_units_whole(seen.chat)


# -- 2. a long conversation ------------------------------------------------------------------


async def test_locomo_under_a_small_budget_keeps_every_request_within_its_share(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """LoCoMo replayed run by run under SLIDING_WINDOW with 2,000 tokens: every request's
    history (window and the run's own messages, counted with gpt-4o-mini's tokenizer) fits
    the history's share, opens on a user turn, and the window moved on."""
    exchanges = locomo_exchanges(160)
    memory = capabilities(
        store=store,
        tenant_id=tenant,
        thread_id="locomo",
        config=SLIDING,
        model="gpt-4o-mini",
        budget_tokens=2_000,
    )
    script = Script()
    agent = script.agent(memory)
    for exchange in exchanges:
        script.answer = exchange.answer
        await agent.run(exchange.question)

    share = SLIDING.chat_history_ratio * 2_000
    tokenizer = memory.memory.tokenizer
    assert len(script.seen) == len(exchanges)
    for seen, exchange in zip(script.seen, exchanges, strict=True):
        chat = seen.chat
        assert sum(tokenizer.count_message(message) for message in chat) <= share
        assert chat[0]["role"] == "user"
        assert seen.prompts[-1] == exchange.question
    last = script.seen[-1]
    assert exchanges[0].question not in last.prompts, "the window never dropped a turn"
    assert len(last.chat) > 5, "the window kept no history"
    turns = await memory.memory.all_turns(tenant_id=tenant, thread_id="locomo")
    assert len(turns) == 2 * len(exchanges)


def exchange(question: str, answer: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(question)]), ModelResponse(parts=[TextPart(answer)])]


async def test_recall_for_the_question_being_asked_reaches_the_instructions(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """With recall on, the instructions carry the turns recalled for the run's own question
    (not the previous, stored one) and the window's dates, beside a window that left them
    their share."""
    memory = capabilities(
        store=store,
        tenant_id=tenant,
        thread_id="pets",
        config=wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW, recall_ratio=0.5),
        budget_tokens=1_000,
    )
    history = [
        *exchange("We adopted a beagle puppy and named him Biscuit.", "What a good name."),
        *exchange("My parcel was lost in the post.", "Sorry; it may still turn up."),
    ]
    for n in range(60):
        history += exchange(f"Small talk number {n} about nothing much.", f"Reply {n}.")
    history += exchange("Has the parcel turned up?", "Not yet.")
    await memory.append(history)
    script = Script(answer="Biscuit.")
    await script.agent(memory).run("What did we call the beagle?")

    (seen,) = script.seen
    assert seen.instructions is not None
    assert NOTES_HEADING in seen.instructions
    assert "named him Biscuit" in seen.instructions  # recalled for this question's words
    assert "lost in the post" not in seen.instructions  # not for the previous question's
    assert "When the messages below were written (UTC):" in seen.instructions
    assert seen.prompts[-2:] == ["Has the parcel turned up?", "What did we call the beagle?"]
    assert "named him Biscuit" not in seen.prompts  # recalled, not in the window


async def test_an_oversized_exchange_drops_out_of_the_window_and_the_thread_goes_on(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """An answer larger than the window's share is stored; the next runs work, without it:
    the run's messages are the current exchange. Only a prompt that alone does not fit
    fails, with `ContextOverflowError`, and stores nothing."""
    memory = capabilities(
        store=store, tenant_id=tenant, thread_id="big", config=SLIDING, budget_tokens=2_000
    )
    script = Script()
    agent = script.agent(memory)
    huge = "lorem " * 3_000
    await agent.run("my order is 1234")
    script.answer = huge
    await agent.run("paste the whole manual")
    script.answer = "the first one"
    assert (await agent.run("which order was it?")).output == "the first one"
    script.answer = "ok"
    await agent.run("thanks")

    for seen in script.seen[2:]:
        assert all(huge not in str(message) for message in seen.chat)
    assert [m["content"] for m in script.seen[-1].chat[-3:]] == [
        "which order was it?",
        "the first one",
        "thanks",
    ]
    stored = await memory.all_messages()
    assert len(stored) == 8

    with pytest.raises(wm.ContextOverflowError):
        await agent.run(huge)
    assert len(script.seen) == 4  # the model was not called
    assert await memory.all_messages() == stored


# -- 3. SUMMARY_BUFFER -----------------------------------------------------------------------


class HeldCheapModel:
    """The scripted cheap model, held until `release` is set: `entered` says a summary
    update is waiting on it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.entered.set()
        if not self.release.wait(timeout=30):
            raise TimeoutError("the test never released the cheap model")
        return summarizing_responder(request)


async def test_summary_buffer_notes_reach_the_instructions_without_blocking_a_run(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """Once an update is due it runs in the background: runs return while the cheap model
    is held; once it answered, the summary is in the instructions of the next request, and
    the window keeps only the recent turns."""
    cheap = HeldCheapModel()
    async with (
        ScriptedUpstream(responder=cheap) as upstream,
        wm.OpenAIClient(base_url=upstream.base_url, api_key="unused", max_retries=0) as llm,
    ):
        memory = capabilities(
            store=store,
            tenant_id=tenant,
            thread_id="summary",
            config=wm.WorkingMemoryConfig(
                strategy=wm.Strategy.SUMMARY_BUFFER, recent_turns=4, update_every_turns=4
            ),
            llm=llm,
            cheap_model="cheap-model",
        )
        script = Script()
        agent = script.agent(memory)
        await agent.run("remember that my cat is called Tom")
        await agent.run("second question")
        await asyncio.to_thread(cheap.entered.wait, 30)
        assert cheap.entered.is_set(), "no summary update was started"
        await agent.run("third question")  # returns while the update is still held
        assert not cheap.release.is_set()
        assert NOTES_HEADING not in (script.seen[-1].instructions or "")

        cheap.release.set()
        await memory.when_idle()
        await agent.run("what is my cat called?")

    last = script.seen[-1]
    assert last.instructions is not None
    assert NOTES_HEADING in last.instructions
    assert "The conversation so far, through turn" in last.instructions
    assert "my cat is called Tom" in last.instructions  # a fact
    assert "remember that my cat is called Tom" not in last.prompts  # out of the tail
    assert len(last.chat) <= 4 + 1
    assert upstream.requests[0]["model"] == "cheap-model"


# -- 4. SLIDING_WINDOW and switched off ------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "old_turns"),
    [
        pytest.param(SLIDING, 24, id="sliding-window"),
        pytest.param(wm.WorkingMemoryConfig(enabled=False), 20, id="switched-off"),
    ],
)
async def test_sliding_window_and_switched_off_as_configured(
    store: wm.Store,
    tenant: str,
    capabilities: Callable[..., WorkingMemoryCapability],
    config: wm.WorkingMemoryConfig,
    old_turns: int,
) -> None:
    """SLIDING_WINDOW with room gives every turn; switched off, the last 20. Neither calls
    the cheap model nor adds notes."""
    async with (
        ScriptedUpstream() as upstream,
        wm.OpenAIClient(base_url=upstream.base_url, api_key="unused") as llm,
    ):
        memory = capabilities(
            store=store, tenant_id=tenant, thread_id="window", config=config, llm=llm
        )
        script = Script()
        agent = script.agent(memory)
        for run in range(13):
            await agent.run(f"question {run}")
        await memory.when_idle()
        assert upstream.requests == []

    last = script.seen[-1]
    assert len(last.chat) == old_turns + 1
    assert last.prompts[0] == f"question {12 - old_turns // 2}"
    assert NOTES_HEADING not in (last.instructions or "")
    assert len(await memory.all_messages()) == 26


# -- 5. a restart ----------------------------------------------------------------------------


def subprocess_env() -> dict[str, str]:
    """This copy of the package on the child's path, whatever it is installed from."""
    path = [str(Path(wm.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}


async def test_a_new_process_continues_the_thread(tmp_path: Path, tenant: str) -> None:
    """A thread written by one process (the store given as a URL) is the history of a run in
    another process on the same file, and what that run adds is there afterwards."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    first = WorkingMemoryCapability(store=url, tenant_id=tenant, thread_id="th", config=SLIDING)
    agent = Script().agent(first)
    await agent.run("my name is Ada")
    await agent.run("I live in Turin")
    await first.aclose()

    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(HERE / "_pydantic_ai_restart.py"), url, tenant, "th", "who am I?"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout.splitlines()[-1]) == [
        "my name is Ada",
        "I live in Turin",
        "who am I?",
    ]

    again = WorkingMemoryCapability(store=url, tenant_id=tenant, thread_id="th", config=SLIDING)
    try:
        messages = await again.all_messages()
    finally:
        await again.aclose()
    assert len(messages) == 6
    assert isinstance(messages[-1], ModelResponse)
    assert messages[-1].parts == [TextPart("answer to who am I?")]


@pytest.fixture
def thread_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The loop `run_sync` runs on (the thread's current one), closed after the test."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield loop
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_run_sync_continues_the_thread_and_close_works_after_it(
    tmp_path: Path, thread_loop: asyncio.AbstractEventLoop
) -> None:
    """`agent.run_sync` runs the capability's hooks on the thread's loop, stopped between
    runs: the second run sees the first, and `close()` closes the store that loop holds."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    memory = WorkingMemoryCapability(store=url, tenant_id="t", thread_id="sync", config=SLIDING)
    script = Script()
    agent = script.agent(memory)
    agent.run_sync("one")
    agent.run_sync("two")
    memory.close()
    assert script.seen[-1].prompts == ["one", "two"]

    async def stored() -> list[ModelMessage]:
        reopened = WorkingMemoryCapability(store=url, tenant_id="t", thread_id="sync")
        try:
            return await reopened.all_messages()
        finally:
            await reopened.aclose()

    assert len(asyncio.run(stored())) == 4


# -- 6. tenants ------------------------------------------------------------------------------


async def test_two_tenants_with_one_thread_id_never_mix(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """The same thread id under two tenants: neither the turns nor the agent-memory document
    of one reach the other's model, and clearing one leaves the other."""
    other = f"{tenant}-other"
    scripts: dict[str, Script] = {}
    agents: dict[str, Agent[None, str]] = {}
    memories: dict[str, WorkingMemoryCapability] = {}
    for owner, document in ((tenant, "blue door"), (other, "red window")):
        memory = capabilities(
            store=store,
            tenant_id=owner,
            thread_id="shared",
            user_id="u1",
            config=SLIDING,
            agent_memory=wm.AgentMemoryConfig(),
        )
        scripts[owner] = Script(calls=[("update_working_memory", {"content": document})])
        agents[owner] = scripts[owner].agent(memory)
        memories[owner] = memory

    await agents[tenant].run("secret of the first tenant")
    await agents[other].run("hello from the second tenant")
    await agents[tenant].run("again, first")

    first, second = scripts[tenant].seen[-1], scripts[other].seen[-1]
    assert first.prompts == ["secret of the first tenant", "again, first"]
    assert second.prompts == ["hello from the second tenant"]
    assert "blue door" in (first.instructions or "")
    assert "red window" in (second.instructions or "")
    assert "blue door" not in (second.instructions or "")

    await memories[tenant].clear()
    assert await memories[tenant].all_messages() == []
    assert len(await memories[other].all_messages()) == 4  # a prompt, a call, its result, an answer


async def test_a_streamed_run_is_stored_and_continued(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """`run_stream` goes through the same hooks: its messages are stored once."""
    memory = capabilities(store=store, tenant_id=tenant, thread_id="stream", config=SLIDING)
    agent = Agent(TestModel(custom_output_text="streamed answer"), capabilities=[memory])
    async with agent.run_stream("first") as streamed:
        assert await streamed.get_output() == "streamed answer"
    result = await agent.run("second")
    stored = await memory.all_messages()
    assert len(stored) == 4
    assert stored[2:] == result.new_messages()


# -- 7. without the extra --------------------------------------------------------------------


def test_the_import_without_pydantic_ai_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['pydantic_ai'] = None\n"
        "try:\n"
        "    import workingmem.integrations.pydantic_ai\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        check=True,
        timeout=60,
    )
    assert "pip install 'workingmem[pydantic-ai]'" in child.stdout


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param({"tenant_id": "", "thread_id": "th"}, id="empty-tenant"),
        pytest.param({"tenant_id": "t", "thread_id": " th"}, id="padded-thread"),
        pytest.param(
            {"tenant_id": "t", "thread_id": "th", "user_id": "a\u200bb"}, id="hidden-user"
        ),
    ],
)
def test_bad_ids_are_refused_at_construction(ids: dict[str, Any]) -> None:
    with pytest.raises(wm.ValidationError):
        WorkingMemoryCapability(store="sqlite:///unused.db", **ids)


async def test_a_result_without_its_call_is_refused_and_nothing_is_stored(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    memory = capabilities(store=store, tenant_id=tenant, thread_id="bad")
    await memory.append([ModelRequest(parts=[UserPromptPart("hi")])])
    orphan = ModelRequest(parts=[ToolReturnPart("lookup", "x", tool_call_id="nobody")])
    with pytest.raises(wm.ValidationError, match="matches no call"):
        await memory.append([ModelResponse(parts=[TextPart("hello")]), orphan])
    assert len(await memory.all_messages()) == 1


async def test_a_message_history_given_to_a_run_is_not_sent_or_stored_twice(
    store: wm.Store, tenant: str, capabilities: Callable[..., WorkingMemoryCapability]
) -> None:
    """A caller used to passing `message_history` keeps working: the earlier run's messages
    reach the model once, from the thread, and are not stored again."""
    memory = capabilities(store=store, tenant_id=tenant, thread_id="resend", config=SLIDING)
    script = Script()
    agent = script.agent(memory)
    first = await agent.run("one")
    second = await agent.run("two", message_history=first.all_messages())
    assert script.seen[-1].prompts == ["one", "two"]
    assert len(second.new_messages()) == 2
    assert await memory.all_messages() == [*first.new_messages(), *second.new_messages()]
