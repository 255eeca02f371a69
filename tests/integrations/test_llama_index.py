"""WorkingMemoryBuffer under LlamaIndex's own FunctionAgent workflow, with its offline model
(`tests.integrations.llama_index_script`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

import workingmem as wm
from tests.helpers import summarizing_responder
from tests.integrations.llama_index_script import (
    SLIDING,
    SYSTEM_PROMPT,
    WORKFLOW_WARNINGS,
    Buffers,
    ScriptedModel,
    agent_for,
    ask,
    dumps,
    history,
    lookup,
    says,
)
from tests.locomo import locomo_exchanges
from workingmem.integrations.llama_index import FORMAT, WorkingMemoryBuffer
from workingmem.llm.testing import Reply, ScriptedUpstream

pytestmark = WORKFLOW_WARNINGS

PACKAGE_ROOT = Path(wm.__file__).resolve().parents[1]
"""The copy of workingmem under test, for the path of a subprocess."""
RESTART_SCRIPT = Path(__file__).with_name("_llama_index_restart.py")
COUNTED = wm.ModelInfo(id="gpt-4o-mini", context_window=128_000)


def memory_text(request: list[ChatMessage]) -> str:
    """The memory's system message of a request ("" when there is none)."""
    texts = [m.content or "" for m in request if m.role == MessageRole.SYSTEM]
    assert texts[0] == SYSTEM_PROMPT, "the agent's own prompt comes first"
    return "\n".join(texts[1:])


def calls_of(message: ChatMessage) -> set[str]:
    return {b.tool_call_id or "" for b in message.blocks if isinstance(b, ToolCallBlock)}


def assert_units_intact(messages: list[ChatMessage]) -> None:
    """Each tool result right after the assistant message whose call it answers (or after
    that message's other results); every call answered before anything else."""
    unanswered: set[str] = set()
    for message in history(messages):
        if message.role == MessageRole.TOOL:
            call_id = message.additional_kwargs["tool_call_id"]
            assert call_id in unanswered, f"tool result {call_id} answers no open call"
            unanswered.discard(call_id)
            continue
        assert not unanswered, f"calls {unanswered} left without their results"
        unanswered = calls_of(message)
    assert not unanswered


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    """The cheap model of the summaries, answering like a real helper would."""
    async with ScriptedUpstream(responder=summarizing_responder) as server:
        yield server


def cheap_model(upstream: ScriptedUpstream) -> wm.OpenAIClient:
    return wm.OpenAIClient(base_url=upstream.base_url, api_key="unused")


# -- 1. the agent's run, many turns, tools of the application and of agent memory --------------


class ToolScript:
    """Each run: the model calls `lookup` and `update_working_memory` (with ids of its own
    in the arguments, which must not count), then answers after the results."""

    def __init__(self) -> None:
        self.run = 0

    def __call__(self, messages: list[ChatMessage]) -> ChatMessage:
        if messages[-1].role == MessageRole.USER:
            self.run += 1
            calls = [
                ToolCallBlock(
                    tool_call_id=f"lookup-{self.run}",
                    tool_name="lookup",
                    tool_kwargs={"topic": f"topic {self.run}"},
                ),
                ToolCallBlock(
                    tool_call_id=f"memo-{self.run}",
                    tool_name="update_working_memory",
                    tool_kwargs={
                        "content": f"The user asked about topic {self.run}.",
                        "tenant_id": "intruder",
                        "conversation_id": "someone-else",
                    },
                ),
            ]
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=list(calls))
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Answer {self.run}.")


async def test_function_agent_stores_each_message_once_and_the_model_gets_whole_units(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """Over many runs with tool calls, the thread holds exactly what the runs produced, once
    and verbatim; every request carries whole units; the agent-memory tool writes the
    buffer's own document, whatever ids the model puts in its arguments."""
    memory = buffer(
        store=store,
        tenant_id=tenant,
        thread_id="th1",
        user_id="u1",
        config=SLIDING,
        agent_memory=wm.AgentMemoryConfig(),
    )
    assert [tool.metadata.name for tool in memory.tools()] == [
        "get_working_memory",
        "update_working_memory",
        "clear_working_memory",
    ]
    model = ScriptedModel(ToolScript())
    agent = agent_for(model, FunctionTool.from_defaults(lookup), *memory.tools())
    runs = 6
    for run in range(1, runs + 1):
        assert await ask(agent, memory, f"Question {run}?") == f"Answer {run}."
        first, second = model.requests[-2:]
        assert history(first)[-1].content == f"Question {run}?"
        if run > 1:  # the document the previous run saved, from the first request on
            assert f"topic {run - 1}" in memory_text(first)
        assert f"The user asked about topic {run}." in memory_text(second)
        stored = await memory.aget_all()
        final = ChatMessage(role=MessageRole.ASSISTANT, content=f"Answer {run}.")
        assert dumps(stored) == dumps([*history(second), final])

    stored = await memory.aget_all()
    per_run = 1 + 1 + 2 + 1  # the question, the calls, their two results, the answer
    assert len(stored) == runs * per_run
    assert [m.role for m in stored[:per_run]] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]
    assert stored[2].content == "notes on topic 1"
    for request in model.requests:
        assert_units_intact(request)
    turns = await store.list_turns(tenant_id=tenant, thread_id="th1", after_seq=0, limit=100)
    assert {turn.format for turn in turns} == {FORMAT}
    assert turns[1].to_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "lookup-1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"topic": "topic 1"}'},
            },
            {
                "id": "memo-1",
                "type": "function",
                "function": {
                    "name": "update_working_memory",
                    "arguments": json.dumps(
                        {
                            "content": "The user asked about topic 1.",
                            "tenant_id": "intruder",
                            "conversation_id": "someone-else",
                        }
                    ),
                },
            },
        ],
    }

    agent_memory = wm.AgentMemory(store=store, config=wm.AgentMemoryConfig())
    own = await agent_memory.get_working_memory(
        tenant_id=tenant, conversation_id="th1", user_id="u1"
    )
    assert own == f"The user asked about topic {runs}."
    for tenant_id, conversation_id in [("intruder", "th1"), (tenant, "someone-else")]:
        assert (
            await agent_memory.get_working_memory(
                tenant_id=tenant_id, conversation_id=conversation_id, user_id="u1"
            )
            is None
        )


# -- 2. a long conversation under a small budget -----------------------------------------------


async def test_locomo_replay_every_request_fits_the_windows_share(
    tmp_path: Path, buffer: Buffers
) -> None:
    """LoCoMo's first conversation, replayed through the agent under SLIDING_WINDOW with a
    2,000-token budget: each request's history fits its share, opens on a user message and
    ends with the question; the thread keeps everything."""
    exchanges = locomo_exchanges(160)
    current = {"answer": ""}
    model = ScriptedModel(
        lambda messages: ChatMessage(role=MessageRole.ASSISTANT, content=current["answer"])
    )
    memory = buffer(
        store=f"sqlite:///{tmp_path / 'memory.db'}",
        tenant_id="t1",
        thread_id="locomo",
        config=SLIDING,
        model="gpt-4o-mini",
        budget_tokens=2_000,
    )
    agent = agent_for(model)
    tokenizer = wm.tokenizer_for(COUNTED)
    share = SLIDING.chat_history_ratio * 2_000
    for exchange in exchanges:
        current["answer"] = exchange.answer
        assert await ask(agent, memory, exchange.question) == exchange.answer
        window = history(model.requests[-1])
        tokens = sum(
            tokenizer.count_message({"role": m.role.value, "content": m.content or ""})
            for m in window
        )
        assert tokens <= share
        assert window[0].role == MessageRole.USER
        assert window[-1].content == exchange.question
        assert memory_text(model.requests[-1]) == ""
    assert len(history(model.requests[-1])) < 2 * len(exchanges) - 1, "the window must cut"
    assert len(await memory.aget_all()) == 2 * len(exchanges)


# -- 3. SUMMARY_BUFFER: notes written in the background, shown once due -----------------------


async def test_summary_notes_reach_the_system_prompt_without_blocking_a_run(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """The update runs while the agent answers: a run returns, and the next one runs, while
    the cheap model is held; once it is done, the summary and the facts are in the memory's
    system message."""
    entered, release = threading.Event(), threading.Event()

    def held(request: dict[str, Any]) -> Reply:
        entered.set()
        release.wait(timeout=30)
        return summarizing_responder(request)

    config = wm.WorkingMemoryConfig(
        strategy=wm.Strategy.SUMMARY_BUFFER, update_every_turns=4, recent_turns=4
    )
    model = ScriptedModel(says("Noted."))
    agent = agent_for(model)
    async with ScriptedUpstream(responder=held) as upstream:
        memory = buffer(
            store=store,
            tenant_id=tenant,
            thread_id="th1",
            config=config,
            llm=cheap_model(upstream),
        )
        try:
            await ask(agent, memory, "Please remember: my cat is called Tom.")
            assert upstream.requests == [], "not due after two turns"
            await ask(agent, memory, "And my dog is Rex.")
            assert await _wait(entered), "the update starts after the fourth turn"
            await ask(agent, memory, "What did I tell you?")  # while the update is held
            assert not release.is_set()
            assert memory_text(model.requests[-1]) == "", "no notes before the update is done"
            release.set()
            await memory.when_idle()
            await ask(agent, memory, "Anything else?")
            notes = memory_text(model.requests[-1])
            assert "The conversation so far, through turn 4" in notes
            assert "my cat is called Tom" in notes
            assert len(await memory.aget_all()) == 8
        finally:
            release.set()
            await memory.aclose()  # drains the update while its cheap model still answers


async def _wait(event: threading.Event) -> bool:
    """Waits for a server thread's event off the event loop (the update runs on it)."""
    return await asyncio.to_thread(event.wait, 30)


# -- 4. SLIDING_WINDOW and memory switched off -------------------------------------------------


@pytest.mark.parametrize(
    ("config", "budget", "most"),
    [
        pytest.param(SLIDING, 200, None, id="sliding-window"),
        pytest.param(wm.WorkingMemoryConfig(enabled=False), None, 20, id="switched-off"),
    ],
)
async def test_window_as_configured_and_no_summary_calls(
    store: wm.Store,
    tenant: str,
    buffer: Buffers,
    upstream: ScriptedUpstream,
    config: wm.WorkingMemoryConfig,
    budget: int | None,
    most: int | None,
) -> None:
    """SLIDING_WINDOW gives the newest units within the share; switched off, the last 20
    turns; neither writes notes nor calls the cheap model, and the thread keeps it all."""
    memory = buffer(
        store=store,
        tenant_id=tenant,
        thread_id="th1",
        config=config,
        budget_tokens=budget,
        llm=cheap_model(upstream),
    )
    model = ScriptedModel(says("Fine, and you?"))
    agent = agent_for(model)
    runs = 14
    for run in range(1, runs + 1):
        await ask(agent, memory, f"How are you today, on day {run} of the trip?")
    await memory.when_idle()
    window = history(model.requests[-1])
    assert window[0].role == MessageRole.USER
    assert window[-1].content == f"How are you today, on day {runs} of the trip?"
    assert len(window) < 2 * runs - 1
    if most is not None:
        assert len(window) in (most, most - 1)  # a leading answer is dropped
    else:
        tokenizer = wm.tokenizer_for(COUNTED)
        tokens = sum(
            tokenizer.count_message({"role": m.role.value, "content": m.content or ""})
            for m in window
        )
        assert tokens <= config.chat_history_ratio * 200
    assert memory_text(model.requests[-1]) == ""
    assert upstream.requests == []
    assert len(await memory.aget_all()) == 2 * runs


# -- 5. a restart --------------------------------------------------------------------------------


async def test_a_new_process_continues_the_conversation(tmp_path: Path, buffer: Buffers) -> None:
    """Another process on the same database file: its model sees the earlier turns, and what
    it adds is stored after them."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    memory = buffer(store=url, tenant_id="t1", thread_id="th1", config=SLIDING)
    await ask(agent_for(ScriptedModel(says("Hello Ada."))), memory, "Hi, I am Ada.")
    await memory.aclose()

    parts = [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(RESTART_SCRIPT),
        url,
        "t1",
        "th1",
        "What is my name?",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, parts))},
    )
    stdout, _ = await asyncio.wait_for(child.communicate(), timeout=120)
    assert child.returncode == 0
    seen = json.loads(stdout.decode().splitlines()[-1])
    assert [(m["role"], m["content"]) for m in seen] == [
        ("system", SYSTEM_PROMPT),
        ("user", "Hi, I am Ada."),
        ("assistant", "Hello Ada."),
        ("user", "What is my name?"),
    ]
    memory = buffer(store=url, tenant_id="t1", thread_id="th1", config=SLIDING)
    assert [m.content for m in await memory.aget_all()] == [
        "Hi, I am Ada.",
        "Hello Ada.",
        "What is my name?",
        "You are Ada.",
    ]


# -- 6. tenants ------------------------------------------------------------------------------------


async def test_the_same_thread_id_under_two_tenants_never_mixes(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """Each tenant's model sees its own thread only; resetting one leaves the other."""
    other = f"{tenant}-other"
    memories = {
        t: buffer(store=store, tenant_id=t, thread_id="shared", config=SLIDING)
        for t in (tenant, other)
    }
    models = {t: ScriptedModel(says(f"Answer for {t}.")) for t in memories}
    for round_ in range(2):
        for t, memory in memories.items():
            await ask(agent_for(models[t]), memory, f"{t} asks, round {round_}.")
    for t, memory in memories.items():
        seen = " ".join(m.content or "" for m in models[t].requests[-1])
        stranger = other if t == tenant else tenant
        assert f"{stranger} asks" not in seen
        assert f"Answer for {stranger}." not in seen
        assert [m.content for m in await memory.aget_all()] == [
            f"{t} asks, round 0.",
            f"Answer for {t}.",
            f"{t} asks, round 1.",
            f"Answer for {t}.",
        ]
    await memories[tenant].areset()
    assert await memories[tenant].aget_all() == []
    assert len(await memories[other].aget_all()) == 4


# -- 7. without the extra ------------------------------------------------------------------------


def test_import_without_llama_index_names_the_extra() -> None:
    """Without llama-index-core the import fails with the pip line; the package still loads."""
    code = (
        "import sys\n"
        "sys.modules['llama_index'] = None\n"
        "import workingmem.integrations\n"
        "try:\n"
        "    import workingmem.integrations.llama_index\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    path = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        check=True,
    )
    assert "pip install 'workingmem[llama-index]'" in result.stdout


# -- 8. the memory's API on both backends: writes, reads back, bad input ------------------------


def openai_style_exchange() -> list[ChatMessage]:
    """A tool round as llama-index-llms-openai writes it: calls in ``additional_kwargs``."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"topic": "tea"}'},
    }
    return [
        ChatMessage(role=MessageRole.USER, content="Tell me about tea."),
        ChatMessage(
            role=MessageRole.ASSISTANT, content=None, additional_kwargs={"tool_calls": [call]}
        ),
        ChatMessage(
            role=MessageRole.TOOL,
            content="notes on tea",
            additional_kwargs={"tool_call_id": "call_1", "name": "lookup"},
        ),
        ChatMessage(role=MessageRole.ASSISTANT, content="Tea is a drink."),
    ]


async def test_messages_read_back_verbatim_and_set_replaces(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """`aput_messages` stores LlamaIndex's messages as they were (calls in additional_kwargs
    too); `aget` gives the window, `aset` replaces the thread, `areset` deletes it."""
    memory = buffer(store=store, tenant_id=tenant, thread_id="th1", config=SLIDING)
    exchange = openai_style_exchange()
    await memory.aput(exchange[0])
    await memory.aput_messages(exchange[1:])
    assert dumps(await memory.aget_all()) == dumps(exchange)
    assert dumps(await memory.aget(input="Tell me about tea.")) == dumps(exchange)
    turns = await store.list_turns(tenant_id=tenant, thread_id="th1", after_seq=0, limit=10)
    assert turns[1].to_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"topic": "tea"}'},
            }
        ],
    }
    assert turns[2].to_message() == {
        "role": "tool",
        "content": "notes on tea",
        "tool_call_id": "call_1",
    }

    shorter = [*exchange[:1], ChatMessage(role=MessageRole.ASSISTANT, content="Ask me later.")]
    await memory.aset(shorter)
    assert dumps(await memory.aget_all()) == dumps(shorter)
    await memory.areset()
    assert await memory.aget_all() == []
    assert await memory.aget() == []


async def test_turns_another_client_stored_read_as_llama_index_messages(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """A thread written in OpenAI's chat format (the gateway, another integration) reads
    back as LlamaIndex messages, tool calls as `ToolCallBlock`s."""
    await store.append(
        tenant_id=tenant,
        thread_id="th1",
        messages=[
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "cold"},
        ],
    )
    memory = buffer(store=store, tenant_id=tenant, thread_id="th1", config=SLIDING)
    user, call, result = await memory.aget_all()
    assert (user.role, user.content) == (MessageRole.USER, "Weather?")
    assert call.blocks == [
        ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Oslo"})
    ]
    assert (result.role, result.content) == (MessageRole.TOOL, "cold")
    assert result.additional_kwargs == {"tool_call_id": "c1"}


@pytest.mark.parametrize(
    "messages",
    [
        pytest.param(
            [ChatMessage(role=MessageRole.SYSTEM, content="Be brief.")], id="system-message"
        ),
        pytest.param(
            [
                ChatMessage(role=MessageRole.USER, content="Hi"),
                ChatMessage(role=MessageRole.TOOL, content="orphan"),
            ],
            id="tool-result-without-call-id",
        ),
        pytest.param(
            [
                ChatMessage(role=MessageRole.USER, content="Hi"),
                ChatMessage(
                    role=MessageRole.TOOL, content="x", additional_kwargs={"tool_call_id": "nope"}
                ),
            ],
            id="tool-result-answering-no-call",
        ),
        pytest.param(
            [ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(tool_name="lookup")])],
            id="call-without-id",
        ),
        pytest.param(["just a string"], id="not-a-chat-message"),
    ],
)
async def test_bad_messages_are_refused_and_nothing_changes(
    store: wm.Store, tenant: str, buffer: Buffers, messages: list[Any]
) -> None:
    """A message the thread cannot hold is a ValidationError; the thread stays as it was,
    all of a batch or none of it."""
    memory = buffer(store=store, tenant_id=tenant, thread_id="th1", config=SLIDING)
    before = [
        ChatMessage(role=MessageRole.USER, content="Kept."),
        ChatMessage(role="assistant", content="Yes."),
    ]
    await memory.aput_messages(before)
    with pytest.raises(wm.ValidationError):
        await memory.aput_messages(messages)
    with pytest.raises(wm.ValidationError):
        await memory.aset(messages)
    assert dumps(await memory.aget_all()) == dumps(before)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"tenant_id": " t1"}, id="tenant-with-space"),
        pytest.param({"thread_id": ""}, id="empty-thread"),
        pytest.param({"llm": MockFunctionCallingLLM()}, id="llama-index-llm-as-summarizer"),
        pytest.param({"budget_tokens": 0}, id="zero-budget"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any]) -> None:
    """Ids, the summaries' client and the budget are checked when the buffer is made."""
    settings: dict[str, Any] = {"tenant_id": "t1", "thread_id": "th1", **kwargs}
    with pytest.raises(wm.ValidationError):
        WorkingMemoryBuffer(store="sqlite:///unused.db", **settings)


def test_sync_methods_from_synchronous_code(tmp_path: Path) -> None:
    """`put`, `get`, `set`, `reset` and `close` work without an event loop of the caller's."""
    memory = WorkingMemoryBuffer.from_defaults(
        store=f"sqlite:///{tmp_path / 'memory.db'}", tenant_id="t1", thread_id="th1", config=SLIDING
    )
    question = ChatMessage(role=MessageRole.USER, blocks=[TextBlock(text="Sync?")])
    memory.put(question)
    memory.put_messages([ChatMessage(role=MessageRole.ASSISTANT, content="Yes.")])
    assert [m.content for m in memory.get()] == ["Sync?", "Yes."]
    memory.set([question])
    assert dumps(memory.get_all()) == dumps([question])
    memory.reset()
    assert memory.get_all() == []
    memory.close()
