"""A tool search the server runs (``tool_search`` without ``execution``, or ``"server"``: the
OpenAI Agents SDK's `ToolSearchTool()`), which the gateway runs: the tools marked
``defer_loading`` are not offered at first; the upstream is offered a function ``tool_search``
that lists what it can load, and its call is answered inside the same request, the tools
found offered from then on. The response shows the ``tool_search_call`` and its
``tool_search_output`` before the answer, and a history resent whole with them (the Agents
SDK's way) is each turn stored once, the tools they loaded still offered. The `openai` SDK
and the Agents SDK over real HTTP, the scripted upstream speaking chat, Responses or
Anthropic's Messages, on both stores."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from agents import Agent, Runner, ToolSearchTool, function_tool, tool_namespace

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

from .live import LiveServer
from .test_agents_responses import blocking, config, threads_of
from .test_client_tools import ASK, WEATHER, answers, assert_refused, called, offered
from .test_tool_search import SEARCH, _results
from .test_unserved import oai

__all__ = ["oai"]  # a fixture of these tests too

FIND: Any = {
    "type": "function",
    "name": "find_order",
    "description": "Finds an order by its number.",
    "parameters": {"type": "object", "properties": {"number": {"type": "string"}}},
    "defer_loading": True,
}
CANCEL: Any = {
    "type": "function",
    "name": "cancel_order",
    "parameters": {"type": "object"},
    "defer_loading": True,
}
CRM: Any = {
    "type": "namespace",
    "name": "crm",
    "description": "The shop's customer records.",
    "tools": [FIND, CANCEL],
}
INVOICE: Any = {
    "type": "function",
    "name": "get_invoice",
    "description": "An order's invoice.",
    "parameters": {"type": "object"},
    "defer_loading": True,
}
SERVER_SEARCH: Any = {"type": "tool_search"}
TOOLS = [WEATHER, SERVER_SEARCH, CRM, INVOICE]
FOUND = "Tools found, callable from now on: crm__find_order, crm__cancel_order."


def loading(request: dict[str, Any]) -> Reply:
    """Loads crm's tools, calls ``crm__find_order`` once it is offered, and answers from its
    output."""
    if request.get("stream") is None and "tools" not in request:
        return Reply("Noted.")  # a helper call
    results = _results(request)
    if results and not results[-1].startswith("Tools found"):
        return Reply(f"Found: {results[-1]}")
    if "crm__find_order" in offered(request):
        return Reply(None, tool_calls=[tool_call("crm__find_order", {"number": "42"}, id="c42")])
    return Reply(None, tool_calls=[tool_call("tool_search", {"paths": ["crm"]}, id="call_s")])


def test_a_search_is_run_in_the_request_and_the_tool_found_called(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = loading

    def create(history: list[Any]) -> Any:
        return served.responses.create(
            model="answer-model",
            input=history,
            tools=TOOLS,
            extra_headers={"X-Thread-Id": "sts1"},
        )

    history: list[Any] = [{"type": "message", "role": "user", "content": ASK}]
    first = create(history)
    search, found, call = first.output
    assert (search.type, search.execution, search.arguments) == (
        "tool_search_call",
        "server",
        {"paths": ["crm"]},
    )
    assert (found.type, found.execution, found.call_id) == (
        "tool_search_output",
        "server",
        search.call_id,
    )
    loaded = [tool.model_dump(exclude_none=True) for tool in found.tools]
    assert loaded == [CRM]
    assert (call.type, call.namespace, call.name) == ("function_call", "crm", "find_order")

    searching, calling = answers(upstream)
    assert list(offered(searching)) == ["get_weather", "tool_search"]
    description = offered(searching)["tool_search"] or ""
    assert "- crm (find_order, cancel_order): The shop's customer records." in description
    assert "- get_invoice: An order's invoice." in description
    assert list(offered(calling)) == [
        "get_weather",
        "tool_search",
        "crm__find_order",
        "crm__cancel_order",
    ]
    assert called(calling) == [("tool_search", {"paths": ["crm"]})]
    assert _results(calling) == [FOUND]

    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "shipped"})
    second = create(history)
    assert second.output_text == "Found: shipped"
    sent = answers(upstream)[-1]
    assert "crm__find_order" in offered(sent)  # loaded still: its output is in the history
    assert called(sent) == [  # each turn once: the thread stored each once
        ("tool_search", {"paths": ["crm"]}),
        ("crm__find_order", {"number": "42"}),
    ]
    assert _results(sent) == [FOUND, "shipped"]


def test_a_client_s_own_history_reads_the_search_too(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """History "client": the upstream is sent the client's items, then the search's round."""
    upstream.responder = loading
    response = served.responses.create(
        model="answer-model",
        input=ASK,
        tools=TOOLS,
        extra_headers={"X-Workingmem-History": "client", "X-Thread-Id": "sts6"},
    )
    kinds = [item.type for item in response.output]
    assert kinds == ["tool_search_call", "tool_search_output", "function_call"]
    calling = answers(upstream)[-1]
    assert called(calling) == [("tool_search", {"paths": ["crm"]})]
    assert _results(calling) == [FOUND]


def test_the_gateway_s_memory_rounds_stay_out_of_the_output_beside_a_search(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """R30: the agent-memory calls never reach the client; the search's items do."""

    def remembering(request: dict[str, Any]) -> Reply:
        """Reads the working memory, then searches, then calls the tool found."""
        if "tools" not in request:
            return Reply("Noted.")
        names = [name for name, _ in called(request)]
        if "get_working_memory" not in names:
            return Reply(None, tool_calls=[tool_call("get_working_memory", {}, id="m1")])
        if "tool_search" not in names:
            return Reply(None, tool_calls=[tool_call("tool_search", {"paths": ["crm"]})])
        return Reply(None, tool_calls=[tool_call("crm__find_order", {"number": "42"})])

    upstream.responder = remembering
    response = served.responses.create(
        model="answer-model", input=ASK, tools=TOOLS, extra_headers={"X-Thread-Id": "sts7"}
    )
    kinds = [item.type for item in response.output]
    assert kinds == ["tool_search_call", "tool_search_output", "function_call"]
    assert "working_memory" not in response.model_dump_json()
    _, searching, calling = answers(upstream)
    assert [name for name, _ in called(searching)] == ["get_working_memory"]
    assert list(offered(calling))[2:] == ["crm__find_order", "crm__cancel_order"]


def test_the_search_s_items_stream_before_the_answer(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = loading
    with served.responses.stream(
        model="answer-model", input=ASK, tools=TOOLS, extra_headers={"X-Thread-Id": "sts2"}
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    done = [e.item for e in events if e.type == "response.output_item.done"]
    kinds = ["tool_search_call", "tool_search_output", "function_call"]
    assert [item.type for item in done] == kinds
    assert [item.model_dump()["id"] for item in final.output] == [
        i.model_dump()["id"] for i in done
    ]


def test_a_streamed_text_answer_comes_after_the_search_s_items(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    def answering(request: dict[str, Any]) -> Reply:
        if "tools" not in request:
            return Reply("Noted.")
        if _results(request):
            return Reply("The order tools are loaded.")
        return Reply(None, tool_calls=[tool_call("tool_search", {"paths": ["crm"]})])

    upstream.responder = answering
    with served.responses.stream(
        model="answer-model", input=ASK, tools=TOOLS, extra_headers={"X-Thread-Id": "sts3"}
    ) as stream:
        events: list[Any] = list(stream)
        final = stream.get_final_response()
    placed = [
        (e.type, e.output_index, e.item.type)
        for e in events
        if e.type in ("response.output_item.added", "response.output_item.done")
    ]
    assert placed == [
        ("response.output_item.added", 0, "tool_search_call"),
        ("response.output_item.done", 0, "tool_search_call"),
        ("response.output_item.added", 1, "tool_search_output"),
        ("response.output_item.done", 1, "tool_search_output"),
        ("response.output_item.added", 2, "message"),
        ("response.output_item.done", 2, "message"),
    ]
    first_delta = next(i for i, e in enumerate(events) if e.type.endswith("text.delta"))
    assert events[first_delta].output_index == 2
    assert [e.type for e in events[:first_delta]].count("response.output_item.done") == 2
    assert final.output_text == "The order tools are loaded."
    assert [item.type for item in final.output] == [
        "tool_search_call",
        "tool_search_output",
        "message",
    ]


def test_a_chain_of_responses_keeps_what_its_search_loaded(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = loading
    first = served.responses.create(model="answer-model", input=ASK, tools=TOOLS)
    kept = served.responses.retrieve(first.id)
    assert [item.type for item in kept.output] == [
        "tool_search_call",
        "tool_search_output",
        "function_call",
    ]
    call: Any = kept.output[-1]
    output: Any = [{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}]
    second = served.responses.create(
        model="answer-model", previous_response_id=first.id, input=output, tools=TOOLS
    )
    assert second.output_text == "Found: shipped"
    sent = answers(upstream)[-1]
    assert called(sent) == [  # the thread's turns, each once
        ("tool_search", {"paths": ["crm"]}),
        ("crm__find_order", {"number": "42"}),
    ]
    assert "crm__find_order" in offered(sent)  # loaded by the response it continues
    third = served.responses.create(
        model="answer-model", previous_response_id=second.id, input="And 43?", tools=TOOLS
    )
    assert third.output[0].type == "function_call"  # no search: loaded by the chain
    assert list(offered(answers(upstream)[-1]))[2:] == ["crm__find_order", "crm__cancel_order"]


def test_a_conversation_keeps_what_its_search_loaded(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = loading
    conversation = served.conversations.create().id

    def create(given: Any) -> Any:
        return served.responses.create(
            model="answer-model", conversation=conversation, input=given, tools=TOOLS
        )

    call: Any = create(ASK).output[-1]
    output: Any = [{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}]
    assert create(output).output_text == "Found: shipped"
    assert "crm__find_order" in offered(answers(upstream)[-1])
    assert create("And 43?").output[0].type == "function_call"  # no search: loaded
    assert list(offered(answers(upstream)[-1]))[2:] == ["crm__find_order", "crm__cancel_order"]


def test_a_thread_named_by_its_id_keeps_what_its_search_loaded(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """A client that names its thread (``X-Thread-Id``) and sends only its new input, offering
    the search each time: the tools loaded earlier are offered (and counted) without another
    search. A request that offers no search is offered none of them."""
    upstream.responder = loading
    named = {"X-Thread-Id": "sts-named"}

    def create(given: Any, tools: Any = TOOLS) -> Any:
        return served.responses.create(
            model="answer-model", input=given, tools=tools, extra_headers=named
        )

    call: Any = create(ASK).output[-1]
    output: Any = [{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}]
    assert create(output).output_text == "Found: shipped"
    assert create("And 43?").output[0].type == "function_call"  # no search: loaded
    assert list(offered(answers(upstream)[-1]))[2:] == ["crm__find_order", "crm__cancel_order"]

    def tools_cost(thread: str) -> int:  # what TOOLS add to a count of the thread's request
        def count(tools: Any) -> int:
            return served.responses.input_tokens.count(
                model="answer-model",
                input="And 44?",
                tools=tools,
                extra_headers={"X-Thread-Id": thread},
            ).input_tokens

        return count(TOOLS) - count([WEATHER])

    assert tools_cost("sts-named") > tools_cost("sts-new")  # the loaded tools are counted
    create("Thanks", tools=[WEATHER])
    assert list(offered(answers(upstream)[-1])) == ["get_weather"]


@pytest.mark.parametrize(
    ("paths", "loads"),
    [
        (["crm.cancel_order"], ["crm__cancel_order"]),
        (["get_invoice", "crm__find_order"], ["crm__find_order", "get_invoice"]),
        (["invoice"], ["get_invoice"]),  # no such name: the words of a query
        (["nothing"], []),
    ],
)
def test_a_path_loads_what_it_names(
    paths: list[str], loads: list[str], served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    def searching(request: dict[str, Any]) -> Reply:
        if "tools" not in request:
            return Reply("Noted.")
        if _results(request):
            return Reply("Done.")
        return Reply(None, tool_calls=[tool_call("tool_search", {"paths": paths}, id="call_p")])

    upstream.responder = searching
    response = served.responses.create(model="answer-model", input=ASK, tools=TOOLS)
    assert response.output_text == "Done."
    _, after = answers(upstream)
    assert list(offered(after))[2:] == loads


def test_without_a_server_search_deferred_tools_are_offered(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    served.responses.create(model="answer-model", input=ASK, tools=[WEATHER, SEARCH, CRM])
    (sent,) = answers(upstream)
    assert list(offered(sent)) == [
        "get_weather",
        "tool_search",
        "crm__find_order",
        "crm__cancel_order",
    ]


def test_a_model_that_keeps_searching_is_answered_within_the_rounds(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """The rounds are capped as the agent-memory tools' are: once the cap is reached the
    search is no longer offered, and the model answers."""

    def searching(request: dict[str, Any]) -> Reply:
        if "tools" not in request:
            return Reply("Noted.")
        if "tool_search" not in offered(request):
            return Reply("Without searching.")
        return Reply(None, tool_calls=[tool_call("tool_search", {"paths": ["crm"]})])

    upstream.responder = searching
    response = served.responses.create(model="answer-model", input=ASK, tools=TOOLS)
    assert response.output_text == "Without searching."
    kinds = [item.type for item in response.output]
    assert kinds.count("tool_search_call") == len(answers(upstream)) - 1 > 0


def test_a_search_called_once_no_longer_offered_is_not_run(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    def searching(request: dict[str, Any]) -> Reply:
        if "tools" not in request:
            return Reply("Noted.")
        search = tool_call("tool_search", {"paths": ["crm"]})
        return Reply("Searching.", tool_calls=[search])

    upstream.responder = searching
    response = served.responses.create(model="answer-model", input=ASK, tools=TOOLS)
    rounds = len(answers(upstream)) - 1
    kinds = [item.type for item in response.output]
    assert kinds == ["message", "tool_search_call", "tool_search_output"] * rounds + ["message"]
    assert "tool_search" not in offered(answers(upstream)[-1])


@pytest.mark.parametrize(
    ("tools", "param", "named"),
    [
        (
            [SERVER_SEARCH, {**CRM, "tools": [{**FIND, "name": "f" * 62}]}],
            "tools[1].tools[0].name",
            "at most 64 characters",
        ),
        ([SERVER_SEARCH, WEATHER, {**WEATHER, "defer_loading": True}], "tools[2].name", "two"),
        (
            [SERVER_SEARCH, {"type": "web_search", "defer_loading": True}],
            "tools[1].type",
            "'web_search' tools are not served",
        ),
    ],
)
def test_a_deferred_tool_the_gateway_cannot_offer_is_refused_up_front(
    tools: Any, param: str, named: str, oai: openai.OpenAI, api: httpx.Client
) -> None:
    """Before anything is stored, not when a search loads it."""
    assert_refused(oai, api, (param, named), thread="sts5", input=ASK, tools=tools)


def test_the_deferred_tools_are_not_counted_until_loaded(served: openai.OpenAI) -> None:
    def count(tools: Any) -> int:
        counted = served.responses.input_tokens.count(model="answer-model", input=ASK, tools=tools)
        return counted.input_tokens

    undeferred = json.loads(json.dumps(TOOLS).replace('"defer_loading": true', '"x": 1'))
    assert count([WEATHER]) < count(TOOLS) < count(undeferred)


# -- the Agents SDK ------------------------------------------------------------------------------


@function_tool(defer_loading=True)
def find_order(number: str) -> str:
    """Finds an order by its number."""
    return f"order {number}: shipped"


@function_tool(defer_loading=True)
def cancel_order(number: str) -> str:
    """Cancels an order."""
    return f"order {number}: cancelled"


SHOP = Agent(
    name="shop",
    instructions="Be brief.",
    model="answer-model",
    tools=[
        *tool_namespace(
            name="crm",
            description="The shop's customer records.",
            tools=[find_order, cancel_order],
        ),
        ToolSearchTool(),
    ],
)


@pytest.mark.asyncio
async def test_an_agent_s_tool_search_loads_the_tool_it_runs(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    upstream.responder = loading
    async with openai.AsyncOpenAI(
        base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10
    ) as client:
        result = await Runner.run(SHOP, ASK, run_config=config(client))
    assert result.final_output == "Found: order 42: shipped"
    kinds = [item.type for item in result.new_items]
    assert kinds == [
        "tool_search_call_item",
        "tool_search_output_item",
        "tool_call_item",
        "tool_call_output_item",
        "message_output_item",
    ]
    last = answers(upstream)[-1]
    assert called(last) == [
        ("tool_search", {"paths": ["crm"]}),
        ("crm__find_order", {"number": "42"}),
    ]
    (thread,) = await threads_of(api)
    messages = (await blocking(api.get)(f"/v1/threads/{thread['id']}/messages")).json()["data"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert json.dumps(messages).count("Tools found") == 1
