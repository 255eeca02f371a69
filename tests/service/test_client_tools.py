"""The client's tools of the Responses API that chat has no word for, through the gateway:
``namespace`` tools (function tools grouped under a name; the Codex CLI sends its agents'
tools so), offered to each upstream as ``<namespace>__<name>``, and ``custom`` tools (free-form
input, maybe in a grammar; Codex sends ``apply_patch`` so to GPT-5 models), offered as a
function of one string, ``input``. A call comes back to the client as the tool it offered (a
``function_call`` with its ``namespace``, a ``custom_tool_call`` with its ``input``), whole and
streamed, and a call the client sends back (continuing a response, or in a history resent
whole) reaches the upstream as the call it made. The `openai` SDK over real HTTP, the scripted
upstream speaking chat, Responses or Anthropic's Messages."""

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
GRAMMAR = 'start: "*** Begin Patch" LF line+ "*** End Patch"'
PATCH: Any = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edits files. A FREEFORM tool: do not wrap the patch in JSON.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
}
A_PATCH = "*** Begin Patch\n+hello\n*** End Patch"
ASK = "Where is order 42?"
EDIT = "Please edit the file."


def calling(request: dict[str, Any]) -> Reply:
    """Calls crm's ``find_order`` on the user's question, and answers from its output."""
    if request.get("stream") is None and "tools" not in request:
        return Reply("Noted.")  # a helper call
    last = _last(request)
    if last is not None:
        return Reply(f"Found: {last}")
    if _asked(request) == EDIT:
        named = "crm__apply_patch" if "crm__apply_patch" in offered(request) else "apply_patch"
        return Reply(None, tool_calls=[tool_call(named, {"input": A_PATCH}, id="call_p")])
    return Reply(None, tool_calls=[tool_call("crm__find_order", {"number": "42"}, id="call_42")])


def _asked(request: dict[str, Any]) -> str:
    """The text of the request's last item or message."""
    last = (request.get("input") or request.get("messages") or [{}])[-1]
    content = last.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


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


def called(request: dict[str, Any]) -> list[tuple[str, Any]]:
    """The calls in the history the upstream was sent: their names and arguments, in the
    words it was offered the tools in."""
    if "input" in request:
        assert not any(i.get("type", "").startswith("custom") for i in request["input"])
        calls = [i for i in request["input"] if i.get("type") == "function_call"]
        assert all("namespace" not in call for call in calls)
        return [(call["name"], json.loads(call["arguments"])) for call in calls]
    found: list[tuple[str, Any]] = []
    for message in request["messages"]:
        for call in message.get("tool_calls") or ():
            found.append((call["function"]["name"], json.loads(call["function"]["arguments"])))
        content = message.get("content")
        if isinstance(content, list):
            found += [(b["name"], b["input"]) for b in content if b.get("type") == "tool_use"]
    return found


def answers(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if "tools" in r]


def assert_offered_as_input(sent: dict[str, Any]) -> None:
    """`PATCH` was offered in `sent` as a function of its input, its grammar described."""
    (tool,) = [t for t in sent["tools"] if (t.get("function") or t)["name"] == "apply_patch"]
    function = tool.get("function") or tool
    schema = function.get("parameters") or function.get("input_schema")
    assert list(schema["properties"]) == ["input"]
    assert GRAMMAR in schema["properties"]["input"]["description"]
    assert function["description"] == PATCH["description"]


def streamed(
    served: openai.OpenAI, asked: str, tools: Any, *, thread: str
) -> tuple[list[Any], Any]:
    """A streamed response's events, and the response they end with."""
    with served.responses.stream(
        model="answer-model", input=asked, tools=tools, extra_headers={"X-Thread-Id": thread}
    ) as stream:
        return list(stream), stream.get_final_response()


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
    assert called(answers(upstream)[-1]) == [("crm__find_order", {"number": "42"})]
    kept = served.responses.retrieve(response.id)
    assert (the_call(kept.output).namespace, the_call(kept.output).name) == ("crm", "find_order")


def test_a_streamed_call_names_its_namespace(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    events, final = streamed(served, ASK, [CRM], thread="n2")
    (done,) = [e.item for e in events if e.type == "response.output_item.done"]
    arguments = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [json.loads(e.arguments) for e in arguments] == [{"number": "42"}]
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
    assert called(sent) == [("crm__find_order", {"number": "42"})]  # once: the stored one


@pytest.mark.parametrize(
    ("tools", "param", "named"),
    [
        (
            [{**CRM, "tools": [{"type": "web_search"}]}],
            "tools[0].tools[0].type",
            "'web_search' tools are not served: only function and custom tools are",
        ),
        (
            [WEATHER, {"type": "file_search", "vector_store_ids": ["vs_1"]}],
            "tools[1].type",
            "'file_search' tools are not served: only function and custom tools are",
        ),
        (
            [{**CRM, "name": "c" * 60}],
            "tools[0].tools[0].name",
            "at most 64 characters",
        ),
        (
            [CRM, {**WEATHER, "name": "crm__cancel_order"}],
            "tools[1].name",
            "'crm__cancel_order' names two tools",
        ),
    ],
)
def test_a_namespace_the_gateway_cannot_offer_is_refused(
    tools: Any, param: str, named: str, oai: openai.OpenAI, api: httpx.Client
) -> None:
    assert_refused(oai, api, (param, named), thread="n3", input=ASK, tools=tools)


def assert_refused(
    oai: openai.OpenAI, api: httpx.Client, error: tuple[str, str], *, thread: str, **request: Any
) -> None:
    """`request` is a 400 whose param is `error`'s first, its message saying its second, to
    create a response and to count its tokens; nothing was stored."""
    with pytest.raises(openai.BadRequestError) as raised:
        oai.responses.create(model="answer-model", extra_headers={"X-Thread-Id": thread}, **request)
    found, message = refused(raised)
    assert (found, error[1] in message) == (error[0], True), message
    with pytest.raises(openai.BadRequestError):
        oai.responses.input_tokens.count(model="answer-model", **request)
    stored_nothing(api, thread)


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


def test_a_custom_tool_is_offered_as_a_function_of_its_input(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    response = served.responses.create(
        model="answer-model", input=EDIT, tools=[PATCH], extra_headers={"X-Thread-Id": "c1"}
    )
    (call,) = [item for item in response.output if item.type == "custom_tool_call"]
    assert call.type == "custom_tool_call"
    assert (call.name, call.input, call.namespace) == ("apply_patch", A_PATCH, None)
    assert_offered_as_input(answers(upstream)[0])
    answer = served.responses.create(
        model="answer-model",
        previous_response_id=response.id,
        input=[{"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"}],
        tools=[PATCH],
    )
    assert answer.output_text == "Found: Done!"
    assert called(answers(upstream)[-1]) == [("apply_patch", {"input": A_PATCH})]


def test_a_custom_tool_s_call_streams_its_input(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    events, final = streamed(served, EDIT, [PATCH], thread="c2")
    (done,) = [e.item for e in events if e.type == "response.output_item.done"]
    assert done.type == "custom_tool_call"
    assert (done.type, done.name, done.input) == ("custom_tool_call", "apply_patch", A_PATCH)
    deltas = [e.delta for e in events if e.type == "response.custom_tool_call_input.delta"]
    (whole,) = [e.input for e in events if e.type == "response.custom_tool_call_input.done"]
    assert "".join(deltas) == whole == A_PATCH
    assert [item.type for item in final.output] == ["custom_tool_call"]


def test_a_resent_custom_call_in_a_namespace_is_the_stored_one(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    tools: Any = [{**CRM, "tools": [*CRM["tools"], PATCH]}]
    history: list[Any] = [{"type": "message", "role": "user", "content": EDIT}]
    first = served.responses.create(
        model="answer-model", input=history, tools=tools, store=False, prompt_cache_key="s2"
    )
    call: Any = first.output[0]
    assert len(first.output) == 1
    assert (call.type, call.namespace, call.name) == ("custom_tool_call", "crm", "apply_patch")
    history += [call.model_dump(exclude_none=True)]
    history.append({"type": "custom_tool_call_output", "call_id": call.call_id, "output": "ok"})
    second = served.responses.create(
        model="answer-model", input=history, tools=tools, store=False, prompt_cache_key="s2"
    )
    assert second.output_text == "Found: ok"
    assert called(answers(upstream)[-1]) == [("crm__apply_patch", {"input": A_PATCH})]
