"""The frameworks people point at an OpenAI endpoint, pointed at the gateway: LangChain's
`ChatOpenAI` (with `bind_tools`, and an agent from `create_agent`) and the OpenAI Agents SDK
(an `Agent` with a function tool on `OpenAIChatCompletionsModel`). Each resends the whole
history on every call; real frameworks, real HTTP, the scripted upstream behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.helpers import assert_in_provider_order
from workingmem.llm.testing import ScriptedUpstream

from .live import LiveServer
from .test_openai_clients import agent_upstream, answer_requests, stored
from .test_openai_sdk import until

set_tracing_disabled(True)  # the SDK would send its traces to OpenAI

TURNS = ["Hi", "What is the weather in Lyon?", "Nice.", "I am Ada.", "And the weather now?"]
TURNS += [f"Fact number {n}." for n in range(4)]


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    assert city == "Lyon"
    return "sunny, 21 C"


@function_tool(name_override="get_weather")
def weather(city: str) -> str:
    """The weather in a city."""
    assert city == "Lyon"
    return "sunny, 21 C"


def check_the_thread(
    api: httpx.Client, upstream: ScriptedUpstream, thread: str, history: int
) -> None:
    """Every turn the client sent once, tool units whole; the upstream's requests valid and
    bounded by the memory, not by the client's ever longer history; the notes in, once due."""
    turns = stored(api, thread)
    assert len(turns) == history
    assert_in_provider_order([{"role": "system", "content": ""}, *turns])
    requests = answer_requests(upstream)
    for request in requests:
        assert_in_provider_order(request["messages"])
    assert max(len(r["messages"]) for r in requests) < history  # the window, not the history
    until(lambda: api.get(f"/v1/threads/{thread}/memory").json()["covered_turns"] >= 8)
    assert api.get(f"/v1/threads/{thread}/memory").json()["summary"]


def async_client(service: LiveServer, key: str, thread: str) -> openai.AsyncOpenAI:
    """The async `openai` client a framework is given, on the service, naming `thread`."""
    return openai.AsyncOpenAI(
        base_url=f"{service.url}/v1",
        api_key=key,
        max_retries=0,
        default_headers={"X-Thread-Id": thread},
    )


@pytest.fixture
def chat_model(service: LiveServer, key: str, upstream: ScriptedUpstream) -> Iterator[ChatOpenAI]:
    """LangChain's model over the service; its HTTP client closed after the test (left to the
    garbage collector, its pooled socket may be finalized before it, in another test)."""
    upstream.responder = agent_upstream
    with httpx.Client() as http:
        yield langchain_model(service, key, http)


def langchain_model(
    service: LiveServer, key: str, http: httpx.Client, **options: Any
) -> ChatOpenAI:
    """LangChain's `ChatOpenAI` on the service, on the thread ``langchain``."""
    return ChatOpenAI(
        base_url=f"{service.url}/v1",
        api_key=key,  # type: ignore[arg-type]
        model="answer-model",
        max_retries=0,
        default_headers={"X-Thread-Id": "langchain"},
        http_client=http,
        **options,
    )


def test_langchain_bind_tools_gets_the_call_and_sends_the_result(
    chat_model: ChatOpenAI, api: httpx.Client
) -> None:
    bound = chat_model.bind_tools([get_weather])
    history: list[BaseMessage] = [HumanMessage("What is the weather in Lyon?")]
    called = bound.invoke(history)
    assert isinstance(called, AIMessage)
    assert [(c["name"], c["args"]) for c in called.tool_calls] == [
        ("get_weather", {"city": "Lyon"})
    ]
    history.append(called)
    history.append(get_weather.invoke(called.tool_calls[0]))  # a ToolMessage
    answer = bound.invoke(history)
    assert answer.content == "It is sunny, 21 C there."
    assert [t["role"] for t in stored(api, "langchain")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def agent_over_turns(model: ChatOpenAI) -> list[Any]:
    """A LangChain agent with the weather tool and a system prompt, asked `TURNS` one by one
    with its whole history: its messages at the end."""
    agent = create_agent(model=model, tools=[get_weather], system_prompt="Be brief.")
    messages: list[Any] = []
    for text in TURNS:
        state = agent.invoke({"messages": [*messages, HumanMessage(text)]})
        messages = state["messages"]
        assert messages[-1].text  # an answer each turn
    return messages


def test_a_langchain_agent_over_many_turns(
    chat_model: ChatOpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    messages = agent_over_turns(chat_model)
    assert "It is sunny, 21 C there." in {m.content for m in messages}
    check_the_thread(api, upstream, "langchain", history=len(messages))


async def test_the_openai_agents_sdk_over_many_turns(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    upstream.responder = agent_upstream
    client = async_client(service, key, "agents")
    model = OpenAIChatCompletionsModel(model="answer-model", openai_client=client)
    agent = Agent(name="weather", instructions="Be brief.", tools=[weather], model=model)
    items: list[Any] = []
    async with client:
        for text in TURNS:
            result = await Runner.run(agent, [*items, {"role": "user", "content": text}])
            items = result.to_input_list()
            assert result.final_output
    said = json.dumps(items)
    assert "It is sunny, 21 C there." in said
    assert len(stored(api, "agents")) == sum(
        1 for item in items if item.get("type") in (None, "message", "function_call_output")
    ) + sum(1 for item in items if item.get("type") == "function_call")
    check_the_thread(api, upstream, "agents", history=len(stored(api, "agents")))


def test_two_langchain_agents_without_a_thread_id_stay_apart(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Neither names a thread: the gateway finds each conversation by how it opens, and two
    that open alike part into threads of their own, each with only its own turns."""
    upstream.responder = agent_upstream
    found: dict[str, set[str]] = {"Ada": set(), "Bob": set()}

    def remember(response: httpx.Response) -> None:
        response.read()
        found[current].add(response.headers["X-Thread-Id"])

    histories: dict[str, list[Any]] = {"Ada": [], "Bob": []}
    with httpx.Client(event_hooks={"response": [remember]}) as http:
        model = ChatOpenAI(
            base_url=f"{service.url}/v1",
            api_key=key,  # type: ignore[arg-type]
            model="answer-model",
            max_retries=0,
            http_client=http,
        )
        agent = create_agent(model=model, tools=[get_weather], system_prompt="Be brief.")
        for text in ["Hi", "I am {name}.", "What is the weather in Lyon?", "Who am I?"]:
            for current in ("Ada", "Bob"):
                said = HumanMessage(text.format(name=current))
                state = agent.invoke({"messages": [*histories[current], said]})
                histories[current] = state["messages"]
    assert len(found["Ada"]) == len(found["Bob"]) == 1  # one thread each, every call
    ((ada,), (bob,)) = found["Ada"], found["Bob"]
    assert ada != bob
    for name, thread, other in (("Ada", ada, "Bob"), ("Bob", bob, "Ada")):
        text = json.dumps([t["content"] for t in stored(api, thread)])
        assert f"I am {name}." in text
        assert other not in text
        assert len(stored(api, thread)) == len(histories[name])  # each turn once
