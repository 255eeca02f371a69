"""WorkingMemoryMiddleware inside LangChain v1's own agent loop (`create_agent`).

The model is LangChain's `GenericFakeChatModel`, scripted with the answers and tool calls of
each test and recording every request it receives; the agent runs through `invoke` /
`ainvoke` with LangGraph's checkpointer where a test needs one. Stores are real (a SQLite
file, the PostgreSQL server), and SUMMARY_BUFFER's cheap model is a real HTTP server.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langgraph.checkpoint.memory import InMemorySaver

import workingmem as wm
from tests.conftest import postgres_url
from tests.helpers import assert_in_provider_order, summarizing_responder
from tests.integrations.langchain_script import (
    SYSTEM,
    WINDOW,
    ask,
    call,
    lookup,
    scripted,
    state_ids,
    stored_ids,
    thread_config,
)
from tests.locomo import locomo_exchanges
from workingmem.agent_memory import AgentMemoryConfig
from workingmem.integrations.langchain import WorkingMemoryMiddleware, chat_view
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream

RESTART_SCRIPT = Path(__file__).with_name("_langchain_restart.py")
PACKAGE_ROOT = str(Path(wm.__file__).resolve().parents[1])
"""The copy of the package this test process imports, for the subprocesses."""


def subprocess_env() -> dict[str, str]:
    """The environment of a child interpreter that imports this same package."""
    path = [PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}


def tool_rounds(exchange: int) -> list[AIMessage]:
    """One exchange: a call of the application's tool, one of agent memory, the answer."""
    return [
        call("lookup", f"lookup-{exchange}", query=f"q{exchange}"),
        call("update_working_memory", f"memo-{exchange}", content=f"note {exchange}"),
        AIMessage(f"answer {exchange}"),
    ]


# -- 1. the agent's own loop, many turns with tool calls ---------------------------------------


async def test_each_message_is_stored_once_and_tool_units_reach_the_model_whole(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """Four `ainvoke`s with a checkpointer (which resends the whole state each time), three
    model calls each: every message of the state is stored once, in order, under its own id;
    every request holds whole tool units; the agent-memory tool ran with the run's ids."""
    middleware = WorkingMemoryMiddleware(
        store=store, tenant_id=tenant, config=WINDOW, agent_memory=AgentMemoryConfig()
    )
    middlewares.append(middleware)
    model = scripted(*(reply for exchange in range(4) for reply in tool_rounds(exchange)))
    agent = create_agent(
        model,
        tools=[lookup],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    state: dict[str, Any] = {}
    for exchange in range(4):
        state = await agent.ainvoke(ask(f"question {exchange}"), thread_config("th"))

    messages: list[BaseMessage] = state["messages"]
    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="th")
    assert len(messages) == 4 * 6
    assert stored_ids(turns) == state_ids(messages)
    assert [turn.format for turn in turns] == ["langchain"] * len(messages)
    assert sorted(model.tool_names) == sorted(
        ["lookup", "get_working_memory", "update_working_memory", "clear_working_memory"]
    )
    assert len(model.requests) == 12
    for request in model.requests:
        assert_in_provider_order(convert_to_openai_messages(request))
    # The window is made of the stored items: the state's own messages, ids and all.
    assert state_ids(model.history()) == state_ids(messages[:-1])
    assert model.system_text().startswith(SYSTEM)
    assert "note 3" in model.system_text()
    saved = await middleware.memory.run_tool(
        "get_working_memory", {}, tenant_id=tenant, thread_id="th"
    )
    assert "note 3" in saved


def test_sync_invoke_stores_the_same_way_with_a_store_url(
    backend_url: str, tenant: str, tmp_path: Path
) -> None:
    """`invoke` (sync code, the memory on its own loop) with the store given as a URL."""
    middleware = WorkingMemoryMiddleware(
        store=backend_url, tenant_id=tenant, config=WINDOW, agent_memory=AgentMemoryConfig()
    )
    model = scripted(*(reply for exchange in range(3) for reply in tool_rounds(exchange)))
    agent = create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver()
    )
    try:
        for exchange in range(3):
            state = agent.invoke(ask(f"question {exchange}"), thread_config("sync"))
        turns = middleware.memory.run_sync(
            lambda: middleware.memory.all_turns(tenant_id=tenant, thread_id="sync")
        )
    finally:
        middleware.close()
    assert stored_ids(turns) == state_ids(state["messages"])
    assert len(turns) == 3 * 6
    assert "note 2" in model.system_text()


@pytest.fixture(params=["sqlite", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store as a URL, on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return postgres_url()


async def test_a_client_resending_its_history_without_a_checkpointer_adds_only_the_new(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """Without a checkpointer an application may send the whole conversation again, as
    fresh dicts (new ids each time): the thread already ends with its start, so only the
    new question and its answer are stored (the library's overlap rule)."""
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    agent = create_agent(scripted("one", "two", "three"), middleware=[middleware])
    history: list[AnyMessage | dict[str, Any]] = []
    for text in ("first", "second", "third"):
        history.append({"role": "user", "content": text})
        state = await agent.ainvoke({"messages": list(history)}, thread_config("resent"))
        history.append({"role": "assistant", "content": state["messages"][-1].text})
    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="resent")
    assert [turn.content for turn in turns] == [cast(dict[str, Any], m)["content"] for m in history]


async def test_time_travel_to_an_earlier_checkpoint_replaces_the_turns_after_it(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """LangGraph resumes a thread from an earlier checkpoint (a regenerated answer, an edit):
    the stored turns the state no longer has go, the new ones follow, and the model does not
    see the abandoned branch."""
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    model = scripted("one", "two", "two again")
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = thread_config("branch")
    await agent.ainvoke(ask("first"), config)
    after_first = (await agent.aget_state(config)).config
    await agent.ainvoke(ask("second"), config)

    state = await agent.ainvoke(ask("second, rephrased"), after_first)
    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="branch")
    assert [turn.content for turn in turns] == ["first", "one", "second, rephrased", "two again"]
    assert stored_ids(turns) == state_ids(state["messages"])
    assert [m.text for m in model.history()] == ["first", "one", "second, rephrased"]


async def test_turns_another_client_wrote_reach_the_model_from_their_chat_view(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """A thread begun through plain chat messages (the gateway, another integration)."""
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    await middleware.memory.append(
        tenant_id=tenant,
        thread_id="mixed",
        messages=[
            {"role": "user", "content": "my name is Ada"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"query": "Ada"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "found Ada"},
            {"role": "assistant", "content": "hello Ada"},
        ],
    )
    model = scripted("you are Ada")
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    await agent.ainvoke(ask("who am I?"), thread_config("mixed"))
    seen = model.history()
    assert [type(m) for m in seen] == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
        HumanMessage,
    ]
    assert cast(AIMessage, seen[1]).tool_calls[0]["args"] == {"query": "Ada"}
    assert cast(ToolMessage, seen[2]).tool_call_id == "c1"


# -- 2. a long conversation under SLIDING_WINDOW -----------------------------------------------


async def test_locomo_every_request_stays_within_the_windows_share_of_the_budget(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """LoCoMo's first 160 turns through a checkpointed agent: the state keeps every message,
    each request's history fits half of the 2,000-token budget (gpt-4o-mini's tokenizer),
    opens on a user turn and ends with the question asked."""
    exchanges = locomo_exchanges(160)
    config = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
    middleware = WorkingMemoryMiddleware(
        store=store, tenant_id=tenant, config=config, model="gpt-4o-mini", budget_tokens=2_000
    )
    middlewares.append(middleware)
    model = scripted(*(AIMessage(exchange.answer) for exchange in exchanges))
    agent = create_agent(
        model, system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )
    for exchange in exchanges:
        state = await agent.ainvoke(ask(exchange.question), thread_config("locomo"))

    tokenizer = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o-mini", context_window=128_000))
    share = config.chat_history_ratio * 2_000
    for index, exchange in enumerate(exchanges):
        history = model.history(index)
        assert sum(tokenizer.count_message(chat_view(m)) for m in history) <= share
        assert isinstance(history[0], HumanMessage)
        assert history[-1].text == exchange.question
    assert len(state["messages"]) == 2 * len(exchanges)
    assert len(model.history()) < len(state["messages"]) / 4
    assert model.system_text() == SYSTEM


# -- 3. SUMMARY_BUFFER: notes written in the background ----------------------------------------


async def test_summary_buffer_notes_reach_the_system_prompt_without_blocking_the_run(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """The cheap model is held: the agent's runs still return; once it answers and the
    update is done, its summary is in the next request's system message."""
    entered, release = threading.Event(), threading.Event()

    def held(request: dict[str, Any]) -> Reply:
        entered.set()
        release.wait(timeout=30)
        return summarizing_responder(request)

    config = wm.WorkingMemoryConfig(
        strategy=wm.Strategy.SUMMARY_BUFFER, recent_turns=4, update_every_turns=2
    )
    async with (
        ScriptedUpstream(responder=held) as upstream,
        OpenAIClient(base_url=upstream.base_url, api_key="unused", max_retries=0) as llm,
    ):
        middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=config, llm=llm)
        middlewares.append(middleware)
        model = scripted(*(f"answer {n}" for n in range(5)))
        agent = create_agent(
            model, system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
        )
        try:
            await agent.ainvoke(ask("question 0"), thread_config("sb"))
            assert await asyncio.to_thread(entered.wait, 10)  # the update is under way, held
            for n in (1, 2):
                await agent.ainvoke(ask(f"question {n}"), thread_config("sb"))
            assert not release.is_set()
            assert "About this conversation" not in model.system_text()
        finally:
            release.set()
        await middleware.when_idle()
        await agent.ainvoke(ask("question 3"), thread_config("sb"))
        assert model.system_text().startswith(SYSTEM)
        assert "About this conversation" in model.system_text()
        assert "The conversation so far, through turn" in model.system_text()
        await middleware.aclose()
    assert upstream.requests


# -- 4. SLIDING_WINDOW and switched off --------------------------------------------------------


async def test_sliding_window_writes_no_notes_and_calls_no_cheap_model(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    async with (
        ScriptedUpstream(responder=summarizing_responder) as upstream,
        OpenAIClient(base_url=upstream.base_url, api_key="unused", max_retries=0) as llm,
    ):
        config = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
        middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=config, llm=llm)
        middlewares.append(middleware)
        model = scripted(*(f"answer {n}" for n in range(10)))
        agent = create_agent(model, system_prompt=SYSTEM, middleware=[middleware])
        for n in range(10):
            await agent.ainvoke(ask(f"question {n}"), thread_config("sw"))
        await middleware.when_idle()
        await middleware.aclose()
    assert upstream.requests == []
    assert model.system_text() == SYSTEM
    assert len(model.history()) == 19  # the whole thread: no checkpointer, the memory has it


async def test_switched_off_the_model_reads_the_last_twenty_turns_and_no_notes(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    config = wm.WorkingMemoryConfig(enabled=False)
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=config)
    middlewares.append(middleware)
    model = scripted(*(f"answer {n}" for n in range(15)))
    agent = create_agent(
        model, system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )
    for n in range(15):
        state = await agent.ainvoke(ask(f"question {n}"), thread_config("off"))
    history = model.history()
    assert len(state["messages"]) == 30
    assert len(history) <= 20
    assert isinstance(history[0], HumanMessage)
    assert state_ids(history) == state_ids(state["messages"][-1 - len(history) : -1])
    assert model.system_text() == SYSTEM


# -- 5. a restart --------------------------------------------------------------------------


async def test_a_new_process_continues_the_thread_from_the_database_file(
    tmp_path: Path, tenant: str
) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    config = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
    middleware = WorkingMemoryMiddleware(store=url, tenant_id=tenant, config=config)
    agent = create_agent(scripted("Hello Ada.", "Noted: tea."), middleware=[middleware])
    await agent.ainvoke(ask("My name is Ada."), thread_config("restart"))
    await agent.ainvoke(ask("I like tea."), thread_config("restart"))
    await middleware.aclose()

    args = [url, tenant, "restart", "What do you know about me?", "You are Ada; you like tea."]
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(RESTART_SCRIPT), *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert [(m["role"], m["content"]) for m in seen] == [
        ("user", "My name is Ada."),
        ("assistant", "Hello Ada."),
        ("user", "I like tea."),
        ("assistant", "Noted: tea."),
        ("user", "What do you know about me?"),
    ]
    reopened = WorkingMemoryMiddleware(store=url, tenant_id=tenant, config=config)
    turns = await reopened.memory.all_turns(tenant_id=tenant, thread_id="restart")
    await reopened.aclose()
    assert turns[-1].content == "You are Ada; you like tea."
    assert len(turns) == 6


# -- 6. tenants ----------------------------------------------------------------------------


async def test_the_same_thread_id_under_two_tenants_never_mixes(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    other = f"{tenant}-other"
    ours = WorkingMemoryMiddleware(
        store=store, tenant_id=tenant, config=WINDOW, agent_memory=AgentMemoryConfig()
    )
    theirs = WorkingMemoryMiddleware(
        store=store, tenant_id=other, config=WINDOW, agent_memory=AgentMemoryConfig()
    )
    middlewares.extend([ours, theirs])
    our_model = scripted(
        call("update_working_memory", "m1", content="ours", tenant_id=other), AIMessage("a")
    )
    their_model = scripted("b")
    await create_agent(our_model, middleware=[ours]).ainvoke(
        ask("our secret"), thread_config("shared")
    )
    await create_agent(their_model, middleware=[theirs]).ainvoke(
        ask("their question"), thread_config("shared")
    )
    assert [m.text for m in their_model.history()] == ["their question"]
    assert "ours" not in their_model.system_text()
    their_turns = await theirs.memory.all_turns(tenant_id=other, thread_id="shared")
    our_turns = await ours.memory.all_turns(tenant_id=tenant, thread_id="shared")
    assert [t.content for t in their_turns] == ["their question", "b"]
    assert our_turns[0].content == "our secret"
    assert len(our_turns) == 4
    # The model named the other tenant in its arguments; the document is the run's own.
    documents = {
        name: await middleware.memory.run_tool(
            "get_working_memory", {}, tenant_id=tenant_id, thread_id="shared"
        )
        for name, middleware, tenant_id in [("ours", ours, tenant), ("theirs", theirs, other)]
    }
    assert "ours" in documents["ours"]
    assert "ours" not in documents["theirs"]


# -- ids -----------------------------------------------------------------------------------


async def test_a_run_without_a_thread_is_a_validation_error_and_stores_nothing(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    agent = create_agent(scripted("never"), middleware=[middleware])
    with pytest.raises(wm.ValidationError) as error:
        await agent.ainvoke(ask("hi"))
    assert error.value.field == "thread_id"
    assert await store.list_threads(tenant_id=tenant) == []


async def test_the_constructors_thread_serves_a_run_without_one(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    middleware = WorkingMemoryMiddleware(
        store=store, tenant_id=tenant, thread_id="fixed", config=WINDOW
    )
    middlewares.append(middleware)
    model = scripted("one", "two")
    agent = create_agent(model, middleware=[middleware])
    await agent.ainvoke(ask("first"))
    await agent.ainvoke(ask("second"))
    assert [m.text for m in model.history()] == ["first", "one", "second"]


def test_bad_ids_are_refused_when_the_middleware_is_made() -> None:
    with pytest.raises(wm.ValidationError) as error:
        WorkingMemoryMiddleware(store="sqlite:///unused.db", tenant_id=" padded ")
    assert error.value.field == "tenant_id"


# -- 7. the extra --------------------------------------------------------------------------


@pytest.mark.parametrize("blocked", ["langchain", "langchain_core", "langgraph"])
def test_the_import_without_the_extra_names_the_pip_line(blocked: str) -> None:
    code = (
        f"import sys\nsys.modules[{blocked!r}] = None\n"
        "try:\n"
        "    import workingmem.integrations.langchain\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        check=True,
    )
    assert "pip install 'workingmem[langchain]'" in result.stdout
