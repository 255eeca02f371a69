"""What a chat upstream puts in an answer beyond OpenAI's chat message, and asks back: DeepSeek's
thinking mode refuses any request after a tool call whose assistant messages lack their
``reasoning_content``; Gemini 3 refuses a call of the current turn without the thought signature
it gave in the call's ``extra_content``. The gateway keeps those fields with the stored turn and
sends them back with the window, through the client's tool loops and its own agent-memory rounds,
whole and streamed; a Responses or Anthropic client is shown the thinking as its API shows it.
The upstream here refuses as those servers do. The official SDK over real HTTP, on SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.thinking_upstreams import (
    WEATHER,
    deepseek_thinking,
    gemini_signatures,
    groq_reasoning,
    last_answer_request,
    signature,
    thought,
)
from workingmem.agent_memory.tools import GET_TOOL
from workingmem.llm.testing import ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key

TOOL_LOOP_AND_A_QUESTION = ["user", "assistant", "tool", "assistant", "user", "assistant"]
"""A thread's roles after a call of the client's tool, its answer and one more question."""


@pytest.fixture
def live(database_url: str, upstream: ScriptedUpstream, tenant: str) -> Iterator[tuple[str, str]]:
    with LiveServer(create_app(settings_for(database_url, upstream))) as server:
        yield server.url, create_key(database_url, tenant, "tests").secret


def ask(sdk: openai.OpenAI, thread: str, messages: list[Any], stream: bool) -> dict[str, Any]:
    """One call on `thread` with the weather tool; the answer's message as the client got it
    (a stream's deltas gathered)."""
    fields: Any = {
        "model": "answer-model",
        "messages": messages,
        "tools": [WEATHER],
        "extra_headers": {"X-Thread-Id": thread},
    }
    if not stream:
        message: dict[str, Any] = (
            sdk.chat.completions.create(**fields).choices[0].message.model_dump()
        )
        return message
    said: dict[str, Any] = {"content": "", "tool_calls": []}
    for chunk in sdk.chat.completions.create(**fields, stream=True):
        for choice in chunk.choices:
            said["content"] += choice.delta.content or ""
            said["tool_calls"] += [c.model_dump() for c in choice.delta.tool_calls or ()]
    return said


def stored(url: str, key: str, thread: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as rest:
        page = rest.get(f"/v1/threads/{thread}/messages").json()
    return list(page["data"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_thinking_model_gets_its_reasoning_back_after_a_tool_call(
    live: tuple[str, str], upstream: ScriptedUpstream, stream: bool
) -> None:
    url, key = live
    upstream.responder = deepseek_thinking
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        asked = ask(sdk, "think", [{"role": "user", "content": "The weather in Paris?"}], stream)
        call_id = asked["tool_calls"][0]["id"]
        result = {"role": "tool", "tool_call_id": call_id, "content": "sunny"}
        assert ask(sdk, "think", [result], stream)["content"] == "It is sunny."
        assert ask(sdk, "think", [{"role": "user", "content": "Thanks!"}], stream)["content"]
    answers = [r for r in upstream.requests if r["model"] == "answer-model"]
    assert len(answers) == 3
    calling = [m for m in answers[1]["messages"] if m.get("tool_calls")]
    assert [m["reasoning_content"] for m in calling] == [thought(call_id)]
    for request in answers[2:]:  # while the window holds the call, its reasoning goes too
        calling = [m for m in request["messages"] if m.get("tool_calls")]
        assert [m["reasoning_content"] for m in calling] in ([], [thought(call_id)])
    said = stored(url, key, "think")
    assert [m["role"] for m in said] == TOOL_LOOP_AND_A_QUESTION
    assert all("reasoning_content" not in m for m in said)  # the thread shows what was said


def test_a_history_resent_whole_with_its_reasoning_keeps_one_thread(
    live: tuple[str, str], upstream: ScriptedUpstream
) -> None:
    """The usual agent loop appends each answer as the SDK read it (its reasoning included):
    the thread stays one, each turn once, and the window carries the stored reasoning."""
    url, key = live
    upstream.responder = deepseek_thinking
    history: list[Any] = [{"role": "user", "content": "The weather in Paris?"}]
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        for _ in range(2):
            message = ask(sdk, "loop", history, stream=False)
            history.append({k: v for k, v in message.items() if v is not None})
            for call in message.get("tool_calls") or ():
                history.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny"})
        history.append({"role": "user", "content": "Thanks!"})
        assert ask(sdk, "loop", history, stream=False)["content"] == "It is sunny."
    assert [m["role"] for m in stored(url, key, "loop")] == TOOL_LOOP_AND_A_QUESTION


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_gateway_s_own_rounds_keep_the_reasoning(
    live: tuple[str, str], upstream: ScriptedUpstream, stream: bool
) -> None:
    """The agent-memory round the gateway runs inside one answer, and the next request,
    send the round's reasoning back."""
    url, key = live
    upstream.responder = deepseek_thinking
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        first = ask(sdk, "rounds", [{"role": "user", "content": "What is in your memory?"}], stream)
        assert first["content"] == "It is sunny."
        assert ask(sdk, "rounds", [{"role": "user", "content": "And now?"}], stream)["content"]
    answers = [r for r in upstream.requests if r["model"] == "answer-model"]
    assert len(answers) == 3  # the round, the answer after it, the next question's
    calling = [m for m in answers[1]["messages"] if m.get("tool_calls")]
    assert [m["tool_calls"][0]["function"]["name"] for m in calling] == [GET_TOOL]
    assert calling[0]["reasoning_content"] == thought(calling[0]["tool_calls"][0]["id"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_s_signature_reaches_the_client_and_goes_back_upstream(
    live: tuple[str, str], upstream: ScriptedUpstream, stream: bool
) -> None:
    url, key = live
    upstream.responder = gemini_signatures
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        asked = ask(sdk, "gemini", [{"role": "user", "content": "The weather?"}], stream)
        call = asked["tool_calls"][0]
        assert call["extra_content"] == signature(call["id"])  # the client may send it back
        result = {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}
        assert ask(sdk, "gemini", [result], stream)["content"] == "It is sunny."
    sent = last_answer_request(upstream)
    calls = [c for m in sent for c in m.get("tool_calls") or ()]
    assert calls == [
        {**tool_call("get_weather", {}, id=call["id"]), "extra_content": signature(call["id"])}
    ]
    said = stored(url, key, "gemini")
    assert [m["role"] for m in said] == ["user", "assistant", "tool", "assistant"]
    assert "extra_content" not in said[1]["tool_calls"][0]


def test_a_server_that_refuses_its_own_field_back_is_sent_none(
    live: tuple[str, str], upstream: ScriptedUpstream
) -> None:
    """Groq gives a reasoning model's ``reasoning`` and refuses it in a request: the refusal
    is answered by sending the messages without it, and the model's next requests go so."""
    url, key = live
    upstream.responder = groq_reasoning
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        for text in ("Hi!", "And now?", "Once more."):
            assert ask(sdk, "groq", [{"role": "user", "content": text}], stream=False)["content"]
    answers = [r for r in upstream.requests if r["model"] == "answer-model"]
    sent_reasoning = [any("reasoning" in m for m in r["messages"]) for r in answers]
    assert sent_reasoning == [False, True, False, False]  # refused once, then learned


WEATHER_RESPONSES: Any = {"type": "function", "name": "get_weather", "parameters": {}}
WEATHER_ANTHROPIC: Any = {"name": "get_weather", "input_schema": {"type": "object"}}


THINKING: Any = {"type": "enabled", "budget_tokens": 1024}


def respond(sdk: openai.OpenAI, given: list[Any], stream: bool) -> tuple[Any, list[Any]]:
    """One Responses call on the thread "codex" with the weather tool, as Codex makes it (the
    whole input each time, nothing stored upstream): the final Response and, streamed, the
    events, read through the SDK's stream helper (which refuses events out of order)."""
    fields: Any = {
        "model": "answer-model",
        "input": given,
        "tools": [WEATHER_RESPONSES],
        "store": False,
        "extra_headers": {"X-Thread-Id": "codex"},
    }
    if not stream:
        return sdk.responses.create(**fields), []
    with sdk.responses.stream(**fields) as events:
        seen = list(events)
        return events.get_final_response(), seen


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_responses_client_s_tool_loop_in_front_of_a_thinking_chat_upstream(
    live: tuple[str, str], upstream: ScriptedUpstream, stream: bool
) -> None:
    """Codex in front of DeepSeek: the client is shown the thinking as a reasoning item (its
    text as ``reasoning_text``), streamed as it comes, as OpenAI's API gives an open model's;
    the answer is stored as the items the client was shown, carrying the chat answer the
    upstream asks back, which the client never sees."""
    url, key = live
    upstream.responder = deepseek_thinking
    given: list[Any] = [{"role": "user", "content": "The weather in Paris?"}]
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        first, events = respond(sdk, given, stream)
        assert "workingmem" not in first.model_dump_json()
        assert [item.type for item in first.output] == ["reasoning", "function_call"]
        reasoning, call = first.output
        assert [part.text for part in reasoning.content] == [thought(call.call_id)]
        assert reasoning.summary == []
        if stream:
            deltas = [e.delta for e in events if e.type == "response.reasoning_text.delta"]
            assert "".join(deltas) == thought(call.call_id)
            assert len(deltas) > 1  # as it came, not whole at the end
            added = [e for e in events if e.type == "response.output_item.added"]
            assert [(e.output_index, e.item.id) for e in added] == [
                (0, reasoning.id),
                (1, call.id),
            ]
        given += [item.model_dump(exclude_none=True) for item in first.output]
        given.append({"type": "function_call_output", "call_id": call.call_id, "output": "sunny"})
        second, _ = respond(sdk, given, stream)
    assert [item.type for item in second.output] == ["reasoning", "message"]
    assert [part.text for part in second.output[0].content] == ["The result says so."]
    assert second.output_text == "It is sunny."
    sent = last_answer_request(upstream)
    assert [m.get("reasoning_content") for m in sent if m.get("tool_calls")] == [
        thought(call.call_id)
    ]
    assert [m["role"] for m in stored(url, key, "codex")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_anthropic_client_s_tool_loop_in_front_of_a_thinking_chat_upstream(
    live: tuple[str, str], upstream: ScriptedUpstream, stream: bool
) -> None:
    """Claude Code in front of DeepSeek's chat API: the same, for the Messages API's blocks;
    with thinking on, the thinking is a thinking block, streamed as it comes."""
    url, key = live
    upstream.responder = deepseek_thinking
    messages: list[Any] = [{"role": "user", "content": "The weather in Paris?"}]
    with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as claude:

        def answer() -> tuple[Any, list[Any]]:
            fields: Any = {
                "model": "answer-model",
                "max_tokens": 2048,
                "messages": messages,
                "tools": [WEATHER_ANTHROPIC],
                "thinking": THINKING,
                "extra_headers": {"X-Thread-Id": "claude"},
            }
            if not stream:
                return claude.messages.create(**fields), []
            with claude.messages.stream(**fields) as events:
                seen = list(events)
                return events.get_final_message(), seen

        first, events = answer()
        assert "workingmem" not in first.model_dump_json()
        assert [block.type for block in first.content] == ["thinking", "tool_use"]
        thinking, use = first.content
        assert thinking.thinking == thought(use.id)
        if stream:
            pieces = [e.thinking for e in events if e.type == "thinking"]
            assert "".join(pieces) == thought(use.id)
            assert len(pieces) > 1  # as it came
        messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
        result = {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}
        messages.append({"role": "user", "content": [result]})
        second, _ = answer()
    assert [block.model_dump() for block in second.content] == [
        {"type": "thinking", "thinking": "The result says so.", "signature": ""},
        {"type": "text", "text": "It is sunny.", "citations": None},
    ]
    sent = last_answer_request(upstream)
    assert [m.get("reasoning_content") for m in sent if m.get("tool_calls")] == [thought(use.id)]
    assert [m["role"] for m in stored(url, key, "claude")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_anthropic_client_without_thinking_is_shown_none(
    live: tuple[str, str], upstream: ScriptedUpstream, stream: bool
) -> None:
    """As at Anthropic: no thinking block unless the request turns thinking on."""
    url, key = live
    upstream.responder = deepseek_thinking
    fields: Any = {
        "model": "answer-model",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "Hello"}],
        "extra_headers": {"X-Thread-Id": "plain"},
    }
    with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as claude:
        if stream:
            with claude.messages.stream(**fields) as events:
                assert not [e for e in events if e.type == "thinking"]
                answered = events.get_final_message()
        else:
            answered = claude.messages.create(**fields)
    assert [block.model_dump() for block in answered.content] == [
        {"type": "text", "text": "It is sunny.", "citations": None}
    ]


@pytest.mark.parametrize("upstream_kind", ["deepseek", "gemini"])
def test_a_history_new_to_the_gateway_keeps_what_its_upstream_asks_back(
    live: tuple[str, str], upstream: ScriptedUpstream, upstream_kind: str
) -> None:
    """A conversation the gateway has not seen (a client that kept its own history, a fresh
    database), in the middle of a tool loop: the fields of the upstream's own that the client
    resends with its answer are kept with it, so its first request through the gateway is not
    refused."""
    url, key = live
    call: Any = tool_call("get_weather", {}, id="w2")
    answered: Any = {"role": "assistant", "content": None, "tool_calls": [call]}
    if upstream_kind == "deepseek":
        upstream.responder = deepseek_thinking
        answered["reasoning_content"] = thought("w2")
    else:
        upstream.responder = gemini_signatures
        call["extra_content"] = signature("w2")
    history = [
        {"role": "user", "content": "The weather in Paris?"},
        answered,
        {"role": "tool", "tool_call_id": "w2", "content": "sunny"},
    ]
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        assert ask(sdk, "adopted", history, stream=False)["content"] == "It is sunny."
    said = stored(url, key, "adopted")
    assert [m["role"] for m in said] == ["user", "assistant", "tool", "assistant"]
    assert "reasoning_content" not in said[1]  # the thread shows what was said
    assert "extra_content" not in said[1]["tool_calls"][0]
