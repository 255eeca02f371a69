"""WorkingMemoryMiddleware at the edges of what LangChain v1's agent loop hands it: a system
prompt of content blocks, a tool call with malformed arguments, content parts chat format has
no place for, answers a middleware inside ours made (or did not), a run opened by a system
message alone, and the agent-memory tools in a run without a thread.

Each test runs `create_agent` over the scripted model of `langchain_script`, on a real store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    InputAgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

import workingmem as wm
from tests.helpers import assert_in_provider_order
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
from workingmem.integrations.langchain import WorkingMemoryMiddleware


class Canned(AgentMiddleware[AgentState[Any], Any, Any]):
    """Answers a request whose last message it knows without calling the model, as a
    response cache, a canned greeting or a guardrail does, with a message of its own making
    (no id); an answer of None is a response of no message at all."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        super().__init__()
        self.answers = answers

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        question = request.messages[-1].text
        if question not in self.answers:
            return await handler(request)
        answer = self.answers[question]
        return AIMessage(answer) if answer is not None else ModelResponse(result=[])


async def test_a_system_prompt_of_blocks_keeps_them_and_gets_the_notes_as_one_more(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """An application's system prompt given as content blocks (a cache mark on its block, as
    Anthropic's prompt caching takes it) reaches the model with its blocks as they are, and
    the memory's notes (here the agent-memory document) as one more text block after them."""
    middleware = WorkingMemoryMiddleware(
        store=store, tenant_id=tenant, config=WINDOW, agent_memory=wm.AgentMemoryConfig()
    )
    middlewares.append(middleware)
    block = {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    model = scripted(call("update_working_memory", "m1", content="likes tea"), "Noted.")
    agent = create_agent(
        model, system_prompt=SystemMessage(content=[block]), middleware=[middleware]
    )
    await agent.ainvoke(ask("I like tea."), thread_config("th"))

    system = model.requests[-1][0]
    assert isinstance(system, SystemMessage)
    assert isinstance(system.content, list)
    assert len(system.content) == 2
    assert system.content[0] == block
    notes = cast(dict[str, Any], system.content[1])
    assert notes["type"] == "text"
    assert "likes tea" in notes["text"]


async def test_a_call_with_malformed_arguments_is_stored_with_its_error_result_as_one_unit(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """A model's call whose arguments are not JSON (an ``invalid_tool_call``) beside a good
    one: LangChain answers it with an error result, and the thread keeps both calls, the bad
    arguments as the model sent them, with their results as one unit, so the thread read in
    chat format (the gateway, another client) answers every call; the model is given its
    malformed call back."""
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    calls = AIMessage(
        "",
        tool_calls=[{"name": "lookup", "args": {"query": "tea"}, "id": "good"}],
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "name": "lookup",
                "args": '{"query": "te',
                "id": "bad",
                "error": "unterminated string",
            }
        ],
    )
    model = scripted(calls, "Found tea.")
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    state = await agent.ainvoke(ask("Look up tea."), thread_config("th"))

    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="th")
    assert stored_ids(turns) == state_ids(state["messages"])
    chat: list[dict[str, Any]] = [dict(turn.to_message()) for turn in turns]
    assert [(c["id"], c["function"]["arguments"]) for c in chat[1]["tool_calls"]] == [
        ("good", '{"query": "tea"}'),
        ("bad", '{"query": "te'),
    ]
    assert sorted(m["tool_call_id"] for m in chat[2:4]) == ["bad", "good"]
    assert_in_provider_order([{"role": "system", "content": SYSTEM}, *chat])
    seen = cast(AIMessage, model.history()[1])
    assert [c["id"] for c in seen.invalid_tool_calls] == ["bad"]


async def test_parts_chat_format_has_no_place_for_are_stored_and_given_back_whole(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """Parts chat format has no place for (a user's document block, an answer's signed
    thinking, as Anthropic's models use them) do not refuse the run: the thread's chat view
    reads the message's text (a user message keeps the parts chat format takes), and the
    model is given both messages back whole, the thinking's signature included."""
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "Sales rose 4%."},
    }
    question = HumanMessage([{"type": "text", "text": "Summarize this."}, document])
    thinking = {"type": "thinking", "thinking": "One line will do.", "signature": "sig-1"}
    answer = AIMessage([thinking, {"type": "text", "text": "Sales rose."}])
    model = scripted(answer, "By 4%.")
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [question]}, thread_config("th"))
    await agent.ainvoke(ask("By how much?"), thread_config("th"))

    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="th")
    assert [turn.content for turn in turns] == [
        [{"type": "text", "text": "Summarize this."}],
        "Sales rose.",
        "By how much?",
        "By 4%.",
    ]
    given_back = model.history()
    assert given_back[0].content == question.content
    assert given_back[1].content == answer.content


async def test_an_answer_without_an_id_is_stored_under_the_id_the_state_keeps(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """An answer a middleware inside ours made without an id (a canned greeting, a cached
    answer) is stored under the id the agent's state then keeps, even where no message before
    it lets a later run find it by another (a thread the greeting opens): every message of
    the state once, under its own id."""
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    model = scripted("At nine.")
    greeter = Canned({"Greet the user.": "Hello! How can I help?"})
    agent = create_agent(model, middleware=[middleware, greeter], checkpointer=InMemorySaver())
    instruction: InputAgentState = {"messages": [{"role": "system", "content": "Greet the user."}]}
    await agent.ainvoke(instruction, thread_config("th"))
    state = await agent.ainvoke(ask("When do you open?"), thread_config("th"))

    messages = [m for m in state["messages"] if not isinstance(m, SystemMessage)]
    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="th")
    assert [turn.content for turn in turns] == [
        "Hello! How can I help?",
        "When do you open?",
        "At nine.",
    ]
    assert stored_ids(turns) == state_ids(messages)


async def test_a_model_call_answered_with_no_message_stores_nothing_and_the_thread_goes_on(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """A middleware inside ours may end a model call with no message at all (a guardrail
    that stops it): the run ends with the question stored alone, and the next run goes on
    from there."""
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    model = scripted("Hello.")
    guard = Canned({"Say something forbidden.": None})
    agent = create_agent(model, middleware=[middleware, guard])
    await agent.ainvoke(ask("Say something forbidden."), thread_config("th"))
    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="th")
    assert [turn.content for turn in turns] == ["Say something forbidden."]

    await agent.ainvoke(ask("Hi."), thread_config("th"))
    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="th")
    assert [turn.content for turn in turns] == ["Say something forbidden.", "Hi.", "Hello."]


async def test_runs_opened_by_a_system_message_alone_store_only_their_answers(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """An application may start the agent with an instruction alone (greet the user, check
    in): a system message is no turn of the thread, so each such run stores its answer
    only, the first on a new thread and the next on one with turns, and the model reads the
    instruction each time."""
    middleware = WorkingMemoryMiddleware(store=store, tenant_id=tenant, config=WINDOW)
    middlewares.append(middleware)
    model = scripted("Hello! How can I help?", "Welcome back!")
    agent = create_agent(model, middleware=[middleware])
    instruction: InputAgentState = {"messages": [{"role": "system", "content": "Greet the user."}]}
    await agent.ainvoke(instruction, thread_config("th"))
    await agent.ainvoke(instruction, thread_config("th"))

    turns = await middleware.memory.all_turns(tenant_id=tenant, thread_id="th")
    assert [turn.content for turn in turns] == ["Hello! How can I help?", "Welcome back!"]
    for request in model.requests:
        assert [m.text for m in request if isinstance(m, SystemMessage)] == ["Greet the user."]


async def test_the_memory_tools_act_on_the_constructors_thread_in_a_run_without_one(
    store: wm.Store, tenant: str, middlewares: list[WorkingMemoryMiddleware]
) -> None:
    """In a run without ``configurable.thread_id``, the agent-memory tools act on the thread
    the middleware was given, as the model calls do: the document the model writes is that
    thread's, and the next run's model reads it."""
    agent_memory = wm.AgentMemoryConfig()
    middleware = WorkingMemoryMiddleware(
        store=store, tenant_id=tenant, thread_id="fixed", config=WINDOW, agent_memory=agent_memory
    )
    middlewares.append(middleware)
    model = scripted(call("update_working_memory", "m1", content="likes tea"), "Noted.", "Tea.")
    agent = create_agent(model, middleware=[middleware])
    await agent.ainvoke(ask("I like tea."))
    await agent.ainvoke(ask("What do I like?"))

    documents = wm.AgentMemory(store=store, config=agent_memory)
    assert await documents.get_working_memory(tenant_id=tenant, conversation_id="fixed") == (
        "likes tea"
    )
    assert "likes tea" in model.system_text()
