"""Chat Completions' ``custom`` tools (free-form input, maybe in a grammar, as GPT-5 models take
them) through the gateway: offered to each upstream as a function of one string, ``input``; a
call comes back as the ``custom`` call the `openai` SDK types (its
``ChatCompletionMessageCustomToolCall``), whole and streamed; a history resent with it is the
thread's own (each turn once), and the upstream reads the call as the function call it made. A
choice of a custom tool (named, or in ``allowed_tools``) reaches the upstream as a choice of its
function. The `openai` SDK over real HTTP, the scripted upstream speaking chat, Responses or
Anthropic's Messages."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

from .test_allowed_tools import OWN, names
from .test_client_tools import (
    A_PATCH,
    EDIT,
    PATCH,
    answers,
    assert_offered_as_input,
    called,
    calling,
)
from .test_unserved import refused

CHAT_PATCH: Any = {
    "type": "custom",
    "custom": {k: v for k, v in PATCH.items() if k != "type"},
}
WEATHER: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


def read_turns(served: openai.OpenAI, thread: str) -> httpx.Response:
    """The thread's stored turns, read over the gateway's REST API."""
    return httpx.get(
        f"{served.base_url}threads/{thread}/messages",
        headers={"Authorization": f"Bearer {served.api_key}"},
    )


def turns_of(served: openai.OpenAI, thread: str) -> list[dict[str, Any]]:
    answer = read_turns(served, thread)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])


def choice_sent(upstream: ScriptedUpstream) -> str:
    """The name of the tool the last answer's request chose, in its API's words."""
    choice = answers(upstream)[-1]["tool_choice"]
    return str((choice.get("function") or choice)["name"])


def test_a_custom_tool_s_call_comes_back_as_a_custom_call(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    ask: Any = [{"role": "user", "content": EDIT}]
    first = served.chat.completions.create(
        model="answer-model", messages=ask, tools=[CHAT_PATCH], extra_headers={"X-Thread-Id": "k1"}
    )
    (call,) = first.choices[0].message.tool_calls or []
    assert call.type == "custom"
    assert (call.custom.name, call.custom.input) == ("apply_patch", A_PATCH)
    assert first.choices[0].finish_reason == "tool_calls"
    assert_offered_as_input(answers(upstream)[0])
    # the whole history resent, the call as the SDK gave it: the thread's own turns
    history: Any = [
        *ask,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Done!"},
    ]
    second = served.chat.completions.create(
        model="answer-model",
        messages=history,
        tools=[CHAT_PATCH],
        extra_headers={"X-Thread-Id": "k1"},
    )
    assert second.choices[0].message.content == "Found: Done!"
    assert called(answers(upstream)[-1]) == [("apply_patch", {"input": A_PATCH})]
    stored = turns_of(served, "k1")
    assert [turn["role"] for turn in stored] == ["user", "assistant", "tool", "assistant"]
    (kept,) = stored[1]["tool_calls"]
    assert json.loads(kept["function"]["arguments"]) == {"input": A_PATCH}


def test_a_custom_tool_s_call_streams_as_a_custom_call(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    chunks = list(
        served.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": EDIT}],
            tools=[WEATHER, CHAT_PATCH],
            stream=True,
            extra_headers={"X-Thread-Id": "k2"},
        )
    )
    deltas = [
        call.model_dump(exclude_none=True)
        for chunk in chunks
        for choice in chunk.choices
        for call in choice.delta.tool_calls or ()
    ]
    assert deltas == [
        {
            "index": 0,
            "id": "call_p",
            "type": "custom",
            "custom": {"name": "apply_patch", "input": A_PATCH},
        }
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    (kept,) = turns_of(served, "k2")[1]["tool_calls"]
    assert kept["function"]["name"] == "apply_patch"


def test_a_choice_of_a_custom_tool_chooses_its_function(
    served: openai.OpenAI, upstream: ScriptedUpstream, upstream_api: str
) -> None:
    upstream.responder = calling
    ask: Any = [{"role": "user", "content": EDIT}]
    named: Any = {"type": "custom", "custom": {"name": "apply_patch"}}
    answer = served.chat.completions.create(
        model="answer-model", messages=ask, tools=[WEATHER, CHAT_PATCH], tool_choice=named
    )
    assert (answer.choices[0].message.tool_calls or [])[0].type == "custom"
    assert choice_sent(upstream) == "apply_patch"
    served.responses.create(
        model="answer-model",
        input=EDIT,
        tools=[PATCH],
        tool_choice={"type": "custom", "name": "apply_patch"},
    )
    assert choice_sent(upstream) == "apply_patch"
    only: Any = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [named]},
    }
    served.chat.completions.create(
        model="answer-model", messages=ask, tools=[WEATHER, CHAT_PATCH], tool_choice=only
    )
    sent = answers(upstream)[-1]
    if upstream_api == "chat":
        assert names(sent["tool_choice"]["allowed_tools"]["tools"]) == sorted(["apply_patch", *OWN])
    elif upstream_api == "responses":
        assert names(sent["tool_choice"]["tools"]) == sorted(["apply_patch", *OWN])
    else:  # no such choice at Anthropic: the tools are cut to those allowed
        assert names(sent["tools"]) == sorted(["apply_patch", *OWN])


def test_a_stored_completion_keeps_the_custom_call(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = calling
    answer = served.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": EDIT}],
        tools=[CHAT_PATCH],
        store=True,
        extra_headers={"X-Thread-Id": "k3"},
    )
    kept = served.chat.completions.retrieve(answer.id)
    (call,) = kept.choices[0].message.tool_calls or []
    assert call.type == "custom"
    assert (call.custom.name, call.custom.input) == ("apply_patch", A_PATCH)


def test_a_custom_tool_named_like_another_is_refused(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    twin: Any = {"type": "custom", "custom": {"name": "get_weather"}}
    with pytest.raises(openai.BadRequestError) as raised:
        served.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": EDIT}],
            tools=[WEATHER, twin],
            extra_headers={"X-Thread-Id": "k4"},
        )
    assert refused(raised) == (
        "tools[1].custom.name",
        "tools[1].custom.name: 'get_weather' names two tools",
    )
    assert answers(upstream) == []
    assert read_turns(served, "k4").status_code == 404


def test_the_gateway_s_own_round_never_reaches_the_client_beside_a_custom_call(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """R30 with a custom tool: the model reads its working memory (the gateway runs it), then
    calls the client's custom tool; the client sees that call alone."""
    rounds = iter(
        [
            Reply(None, tool_calls=[tool_call("get_working_memory", {}, id="m1")]),
            Reply(None, tool_calls=[tool_call("apply_patch", {"input": A_PATCH}, id="call_p")]),
        ]
    )
    upstream.responder = lambda request: next(rounds) if "tools" in request else Reply("Noted.")
    answer = served.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": EDIT}],
        tools=[CHAT_PATCH],
        extra_headers={"X-Thread-Id": "k5"},
    )
    calls = [
        call.model_dump(exclude_none=True) for call in answer.choices[0].message.tool_calls or ()
    ]
    assert calls == [
        {"id": "call_p", "type": "custom", "custom": {"name": "apply_patch", "input": A_PATCH}}
    ]
    stored = turns_of(served, "k5")
    assert [turn["role"] for turn in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1]["tool_calls"][0]["function"]["name"] == "get_working_memory"


def test_a_custom_tool_named_like_the_gateway_s_own_is_refused(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    own: Any = {"type": "custom", "custom": {"name": "get_working_memory"}}
    with pytest.raises(openai.BadRequestError) as raised:
        served.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": EDIT}],
            tools=[own],
            extra_headers={"X-Thread-Id": "k6"},
        )
    assert "'get_working_memory' is the gateway's own agent-memory tool" in refused(raised)[1]
    assert answers(upstream) == []
    assert read_turns(served, "k6").status_code == 404
