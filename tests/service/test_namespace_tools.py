"""OpenAI's ``namespace`` tools (function tools grouped under a name; the Codex CLI sends its
agents' tools so) through the gateway: each upstream is offered the namespace's functions as
``<namespace>__<name>``, a call of one comes back to the client with its ``namespace`` and
``name``, whole and streamed, and a call the client sends back (continuing a response, or in a
history resent whole) reaches the upstream under the name it was offered. The `openai` SDK over
real HTTP, the scripted upstream speaking chat, Responses or Anthropic's Messages."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from workingmem.agent_memory.tools import TOOL_NAMES
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

from .test_unserved import oai, refused, stored_nothing

__all__ = ["oai"]  # a fixture of these tests too

CRM: Any = {
    "type": "namespace",
    "name": "crm",
    "description": "The shop's customer records.",
    "tools": [
        {
            "type": "function",
            "name": "find_order",
            "description": "Finds an order by its number.",
            "parameters": {"type": "object", "properties": {"number": {"type": "string"}}},
        },
        {"type": "function", "name": "cancel_order", "parameters": {"type": "object"}},
    ],
}
WEATHER: Any = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
ASK = "Where is order 42?"


def calling(request: dict[str, Any]) -> Reply:
    """Calls crm's ``find_order`` on the user's question, and answers from its output."""
    if request.get("stream") is None and "tools" not in request:
        return Reply("Noted.")  # a helper call
    last = _last(request)
    if last is not None:
        return Reply(f"Found: {last}")
    return Reply(None, tool_calls=[tool_call("crm__find_order", {"number": "42"}, id="call_42")])


def _last(request: dict[str, Any]) -> str | None:
    """The output of a call, when the request ends with one (in any API's shape)."""
    if "input" in request:
        item = request["input"][-1]
        return item["output"] if item.get("type") == "function_call_output" else None
    message = request["messages"][-1]
    if message.get("role") == "tool":
        return str(message["content"])
    content = message.get("content")
    if isinstance(content, list) and content and content[-1].get("type") == "tool_result":
        result = content[-1]["content"]
        return result if isinstance(result, str) else result[0]["text"]
    return None


def offered(request: dict[str, Any]) -> dict[str, str | None]:
    """The client's tools the upstream was offered: name -> description."""
    found = {}
    for tool in request.get("tools") or ():
        function = tool.get("function") or tool
        found[function["name"]] = function.get("description")
    return {name: text for name, text in found.items() if name not in TOOL_NAMES}


def called(request: dict[str, Any]) -> list[str]:
    """The names of the calls in the history the upstream was sent."""
    if "input" in request:
        calls = [i for i in request["input"] if i.get("type") == "function_call"]
        assert all("namespace" not in call for call in calls)
        return [call["name"] for call in calls]
    names: list[str] = []
    for message in request["messages"]:
        names += [call["function"]["name"] for call in message.get("tool_calls") or ()]
        content = message.get("content")
        if isinstance(content, list):
            names += [block["name"] for block in content if block.get("type") == "tool_use"]
    return names


def answers(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if "tools" in r]


def the_call(output: list[Any]) -> Any:
    (call,) = [item for item in output if item.type == "function_call"]
    return call


def test_a_namespace_s_functions_are_offered_and_called_by_name(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    response = served.responses.create(
        model="answer-model", input=ASK, tools=[WEATHER, CRM], extra_headers={"X-Thread-Id": "n1"}
    )
    call = the_call(response.output)
    assert (call.namespace, call.name) == ("crm", "find_order")
    assert json.loads(call.arguments) == {"number": "42"}
    assert offered(answers(upstream)[0]) == {
        "get_weather": None,
        "crm__find_order": "The shop's customer records.\n\nFinds an order by its number.",
        "crm__cancel_order": "The shop's customer records.",
    }
    answer = served.responses.create(
        model="answer-model",
        previous_response_id=response.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}],
        tools=[WEATHER, CRM],
    )
    assert answer.output_text == "Found: shipped"
    assert called(answers(upstream)[-1]) == ["crm__find_order"]
    kept = served.responses.retrieve(response.id)
    assert (the_call(kept.output).namespace, the_call(kept.output).name) == ("crm", "find_order")


def test_a_streamed_call_names_its_namespace(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    with served.responses.stream(
        model="answer-model", input=ASK, tools=[CRM], extra_headers={"X-Thread-Id": "n2"}
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    (done,) = [e.item for e in events if e.type == "response.output_item.done"]
    assert done.type == "function_call"
    assert (done.namespace, done.name) == ("crm", "find_order")
    assert (the_call(final.output).namespace, the_call(final.output).name) == ("crm", "find_order")


def test_a_history_resent_whole_keeps_the_call_in_its_namespace(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """The Codex CLI's way: ``store: false``, the whole history every call, no thread id."""
    upstream.responder = calling
    history: list[Any] = [{"type": "message", "role": "user", "content": ASK}]
    first = served.responses.create(
        model="answer-model", input=history, tools=[CRM], store=False, prompt_cache_key="s1"
    )
    history += [item.model_dump(exclude_none=True) for item in first.output]
    call = the_call(first.output)
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "lost"})
    second = served.responses.create(
        model="answer-model", input=history, tools=[CRM], store=False, prompt_cache_key="s1"
    )
    assert second.output_text == "Found: lost"
    sent = answers(upstream)[-1]
    assert called(sent) == ["crm__find_order"]  # once: the resent call is the stored one


@pytest.mark.parametrize(
    ("tools", "param", "named"),
    [
        (
            [{**CRM, "tools": [{"type": "custom", "name": "grep"}]}],
            "tools[0].tools[0].type",
            "'custom' tools are not served",
        ),
        (
            [{**CRM, "name": "c" * 60}],
            "tools[0].tools[0].name",
            "at most 64 characters",
        ),
        (
            [CRM, {**WEATHER, "name": "crm__cancel_order"}],
            "tools[0].tools[1].name",
            "'crm__cancel_order' names two tools",
        ),
    ],
)
def test_a_namespace_the_gateway_cannot_offer_is_refused(
    tools: Any, param: str, named: str, oai: openai.OpenAI, api: httpx.Client
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        oai.responses.create(
            model="answer-model", input=ASK, tools=tools, extra_headers={"X-Thread-Id": "n3"}
        )
    found, message = refused(raised)
    assert (found, named in message) == (param, True), message
    with pytest.raises(openai.BadRequestError):
        oai.responses.input_tokens.count(model="answer-model", input=ASK, tools=tools)
    stored_nothing(api, "n3")


def test_an_empty_namespace_is_refused_by_the_schema(oai: openai.OpenAI, api: httpx.Client) -> None:
    empty: Any = {**CRM, "tools": []}
    with pytest.raises(openai.UnprocessableEntityError) as raised:
        oai.responses.create(
            model="answer-model",
            input=ASK,
            tools=[empty],
            extra_headers={"X-Thread-Id": "n4"},
        )
    assert "tools.0.namespace.tools: List should have at least 1 item" in str(raised.value)
    stored_nothing(api, "n4")
