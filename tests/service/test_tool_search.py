"""A tool search the client runs (``tool_search`` with ``execution: "client"``: the Codex CLI
offers one to the models it knows, its agents' and MCP servers' tools deferred behind it),
through the gateway: the upstream is offered a function ``tool_search``; its call comes back
as a ``tool_search_call``; the client's ``tool_search_output`` loads tools, which the upstream
is offered from then on (a namespace's as ``<namespace>__<name>``) and whose calls come back in
the client's words. A history resent whole (Codex's way) is one thread, each turn stored once.
The `openai` SDK over real HTTP, the scripted upstream speaking chat, Responses or Anthropic's
Messages, on both stores."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

from .test_client_tools import (
    ASK,
    CRM,
    WEATHER,
    answers,
    assert_refused,
    called,
    offered,
    streamed,
)
from .test_unserved import oai

__all__ = ["oai"]  # a fixture of these tests too

SEARCH: Any = {
    "type": "tool_search",
    "execution": "client",
    "description": "Searches the deferred tools; the tools found can be called next.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
        "required": ["query"],
        "additionalProperties": False,
    },
}
FOUND = "Tools found, callable from now on: crm__find_order, crm__cancel_order."


def searching(request: dict[str, Any]) -> Reply:
    """Searches for the order tools, calls ``crm__find_order`` once it is offered, and
    answers from its output."""
    if request.get("stream") is None and "tools" not in request:
        return Reply("Noted.")  # a helper call
    results = _results(request)
    if results and results[-1] != FOUND:
        return Reply(f"Found: {results[-1]}")
    if "crm__find_order" in offered(request):
        return Reply(None, tool_calls=[tool_call("crm__find_order", {"number": "42"}, id="c42")])
    search = tool_call("tool_search", {"query": "orders", "limit": 2}, id="call_s")
    return Reply(None, tool_calls=[search])


def _results(request: dict[str, Any]) -> list[str]:
    """The calls' results in the history the upstream was sent, in any API's shape."""
    if "input" in request:
        return [i["output"] for i in request["input"] if i.get("type") == "function_call_output"]
    found: list[str] = []
    for message in request["messages"]:
        if message.get("role") == "tool":
            found.append(message["content"])
        content = message.get("content")
        if isinstance(content, list):
            found += [_text(b["content"]) for b in content if b.get("type") == "tool_result"]
    return found


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


def output_of(search: Any, tools: Any) -> dict[str, Any]:
    """The client's answer to `search`: the tools it found."""
    return {
        "type": "tool_search_output",
        "call_id": search.call_id,
        "execution": "client",
        "status": "completed",
        "tools": tools,
    }


def test_a_history_resent_whole_searches_then_calls_a_tool_found(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """Codex's way: ``store: false``, the whole history every call, no thread id."""
    upstream.responder = searching

    def create(history: list[Any]) -> Any:
        return served.responses.create(
            model="answer-model",
            input=history,
            tools=[WEATHER, SEARCH],
            store=False,
            prompt_cache_key="ts1",
        )

    history: list[Any] = [{"type": "message", "role": "user", "content": ASK}]
    first = create(history)
    (search,) = first.output
    assert (search.type, search.execution, search.status) == (
        "tool_search_call",
        "client",
        "completed",
    )
    assert search.arguments == {"query": "orders", "limit": 2}
    sent = answers(upstream)[0]
    assert offered(sent) == {"get_weather": None, "tool_search": SEARCH["description"]}
    (function,) = [(t.get("function") or t) for t in sent["tools"] if "tool_search" in str(t)]
    assert (function.get("parameters") or function.get("input_schema")) == SEARCH["parameters"]

    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append(output_of(search, [CRM]))
    second = create(history)
    (call,) = second.output
    assert (call.type, call.namespace, call.name) == ("function_call", "crm", "find_order")
    sent = answers(upstream)[-1]
    assert list(offered(sent)) == [
        "get_weather",
        "tool_search",
        "crm__find_order",
        "crm__cancel_order",
    ]
    assert called(sent) == [("tool_search", {"query": "orders", "limit": 2})]
    assert _results(sent) == [FOUND]

    history += [item.model_dump(exclude_none=True) for item in second.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "shipped"})
    third = create(history)
    assert third.output_text == "Found: shipped"
    sent = answers(upstream)[-1]
    assert "crm__find_order" in offered(sent)  # still loaded: its output is in the history
    assert called(sent) == [  # each turn once: the thread stored each once
        ("tool_search", {"query": "orders", "limit": 2}),
        ("crm__find_order", {"number": "42"}),
    ]
    assert _results(sent) == [FOUND, "shipped"]


def searched(served: openai.OpenAI, upstream: ScriptedUpstream, thread: str) -> tuple[Any, Any]:
    """A response on `thread` whose one item is the model's search, and that call."""
    upstream.responder = searching
    first = served.responses.create(
        model="answer-model", input=ASK, tools=[SEARCH], extra_headers={"X-Thread-Id": thread}
    )
    (search,) = first.output
    return first, search


def test_a_chain_of_responses_is_offered_the_tools_its_inputs_loaded(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    first, search = searched(served, upstream, "ts2")
    loading: Any = [output_of(search, [CRM])]
    second = served.responses.create(
        model="answer-model", previous_response_id=first.id, input=loading, tools=[SEARCH]
    )
    (call,) = second.output
    assert call.type == "function_call"
    assert (call.namespace, call.name) == ("crm", "find_order")
    kept = served.responses.retrieve(first.id)
    assert [item.type for item in kept.output] == ["tool_search_call"]
    output: Any = [{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}]
    served.responses.create(
        model="answer-model", previous_response_id=second.id, input=output, tools=[SEARCH]
    )
    sent = answers(upstream)[-1]
    assert list(offered(sent)) == ["tool_search", "crm__find_order", "crm__cancel_order"]


def test_a_search_call_streams_as_one_item(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = searching
    events, final = streamed(served, ASK, [SEARCH], thread="ts3")
    added = [e.item for e in events if e.type == "response.output_item.added"]
    (done,) = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.type for item in added] == ["tool_search_call"]
    assert (done.type, done.arguments) == ("tool_search_call", {"query": "orders", "limit": 2})
    assert [item.model_dump() for item in final.output] == [done.model_dump()]


def test_a_tool_loaded_twice_or_offered_already_is_offered_once(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    first, search = searched(served, upstream, "ts4")
    again = {**output_of(search, [CRM]), "call_id": "call_again"}
    loading: Any = [output_of(search, [WEATHER, CRM]), again]
    served.responses.create(
        model="answer-model", previous_response_id=first.id, input=loading, tools=[SEARCH, WEATHER]
    )
    sent = answers(upstream)[-1]
    assert list(offered(sent)) == [
        "tool_search",
        "get_weather",
        "crm__find_order",
        "crm__cancel_order",
    ]


def _with_output(tools: Any) -> list[Any]:
    return [
        {"type": "message", "role": "user", "content": ASK},
        {"type": "tool_search_call", "call_id": "call_s", "execution": "client", "arguments": {}},
        {"type": "tool_search_output", "call_id": "call_s", "execution": "client", "tools": tools},
    ]


@pytest.mark.parametrize(
    ("tools", "given", "param", "named"),
    [
        ([SEARCH, SEARCH], ASK, "tools[1]", "'tool_search' names two tools"),
        (
            [SEARCH, {**WEATHER, "name": "tool_search"}],
            ASK,
            "tools[1].name",
            "'tool_search' names two tools",
        ),
        (
            [SEARCH],
            _with_output([{"type": "web_search"}]),
            "input[2].tools[0].type",
            "'web_search' tools are not served",
        ),
        (
            [SEARCH],
            _with_output([{**CRM, "tools": [{"type": "function", "name": "a b"}]}]),
            "input[2].tools[0].tools[0].name",
            "must be 1 to 64 letters",
        ),
        ([SEARCH], _with_output("crm"), "input[2].tools", "must be a list of tools"),
    ],
)
def test_a_search_the_gateway_cannot_serve_is_refused(
    tools: Any, given: Any, param: str, named: str, oai: openai.OpenAI, api: httpx.Client
) -> None:
    assert_refused(oai, api, (param, named), thread="ts5", input=given, tools=tools)


def test_the_tools_loaded_are_counted(oai: openai.OpenAI) -> None:
    def count(tools: Any) -> int:
        counted = oai.responses.input_tokens.count(
            model="answer-model", input=_with_output(tools), tools=[SEARCH]
        )
        return counted.input_tokens

    assert count([CRM]) > count([]) + len(json.dumps(CRM)) // 8


def test_a_developer_s_additional_tools_are_offered_from_there_on(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """An ``additional_tools`` item (a developer's tools, added mid-conversation): its tools
    are offered as a search's are, and the model reads where they were added; the item is a
    turn of the thread, found again when the history is resent."""
    upstream.responder = searching
    history: list[Any] = [
        {"type": "message", "role": "user", "content": "Hello."},
        {"type": "additional_tools", "role": "developer", "tools": [CRM]},
        {"type": "message", "role": "user", "content": ASK},
    ]
    first = served.responses.create(
        model="answer-model", input=history, tools=[WEATHER], store=False, prompt_cache_key="ts6"
    )
    (call,) = first.output
    assert call.type == "function_call"
    assert (call.namespace, call.name) == ("crm", "find_order")
    sent = answers(upstream)[-1]
    assert list(offered(sent)) == ["get_weather", "crm__find_order", "crm__cancel_order"]
    assert "Tools added, callable from now on: crm__find_order, crm__cancel_order." in str(sent)
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "lost"})
    second = served.responses.create(
        model="answer-model", input=history, tools=[WEATHER], store=False, prompt_cache_key="ts6"
    )
    assert second.output_text == "Found: lost"
    assert called(answers(upstream)[-1]) == [("crm__find_order", {"number": "42"})]
