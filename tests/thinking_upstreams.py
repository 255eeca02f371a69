"""Upstreams that put fields of their own in an answer and refuse the next request without
them, as DeepSeek's thinking mode and Gemini 3 do (scripted responders for `ScriptedUpstream`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tests.helpers import summarizing_responder
from workingmem.agent_memory.tools import GET_TOOL
from workingmem.llm.testing import (
    Reply,
    Responder,
    ScriptedResponse,
    ScriptedUpstream,
    StatusError,
    tool_call,
)

WEATHER: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}
DEEPSEEK_REFUSAL = "The `reasoning_content` in the thinking mode must be passed back to the API."
GEMINI_REFUSAL = "Function call is missing a thought_signature in functionCall parts."


def last_answer_request(upstream: ScriptedUpstream) -> list[Any]:
    """The messages of `upstream`'s last request for an answer: a background update of the
    summary (the cheap model's) may come after it."""
    asked = [r for r in upstream.requests if r.get("model") != "cheap-model"]
    return list(asked[-1]["messages"])


def thought(call_id: str) -> str:
    return f"I should call a tool ({call_id})."


def signature(call_id: str) -> dict[str, Any]:
    return {"google": {"thought_signature": f"sig-{call_id}"}}


def deepseek_thinking(request: dict[str, Any]) -> ScriptedResponse:
    """DeepSeek's thinking mode: once the model called a tool, every later request carries
    each assistant message's reasoning as it was given."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    messages = request["messages"]
    for message in messages:
        calls = message.get("tool_calls") or ()
        if calls and message.get("reasoning_content") != thought(calls[0]["id"]):
            return StatusError(400, DEEPSEEK_REFUSAL, type="invalid_request_error")
    last = messages[-1]
    number = len(messages)
    if last["role"] == "user" and "memory" in str(last["content"]):
        call = tool_call(GET_TOOL, {}, id=f"mem{number}")
        return Reply(
            None, tool_calls=[call], message_extra={"reasoning_content": thought(call["id"])}
        )
    if last["role"] == "user" and "weather" in str(last["content"]):
        call = tool_call("get_weather", {}, id=f"w{number}")
        return Reply(
            None, tool_calls=[call], message_extra={"reasoning_content": thought(call["id"])}
        )
    return Reply("It is sunny.", message_extra={"reasoning_content": "The result says so."})


def gemini_signatures(request: dict[str, Any]) -> ScriptedResponse:
    """Gemini 3: each call of the current turn (since the last user message) comes back with
    the signature it was given."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    messages = request["messages"]
    turn_start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    for message in messages[turn_start:]:
        for call in message.get("tool_calls") or ():
            if call.get("extra_content") != signature(call["id"]):
                return StatusError(400, GEMINI_REFUSAL, type="invalid_request_error")
    if messages[-1]["role"] == "user":
        call_id = f"g{len(messages)}"
        call = {**tool_call("get_weather", {}, id=call_id), "extra_content": signature(call_id)}
        return Reply(None, tool_calls=[call])
    return Reply("It is sunny.")


GROQ_REFUSAL = (
    "'messages.1' : for 'role:assistant' the following must be satisfied"
    "[('messages.1' : property 'reasoning' is unsupported)]"
)


def groq_reasoning(request: dict[str, Any]) -> ScriptedResponse:
    """Groq: a reasoning model's answer carries its ``reasoning``, which the server refuses in
    a request's messages."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    if any("reasoning" in message for message in request["messages"]):
        return StatusError(400, GROQ_REFUSAL, type="invalid_request_error")
    return Reply("Noted.", message_extra={"reasoning": "A short answer will do."})


def thinking(answer: Callable[[dict[str, Any]], ScriptedResponse]) -> Responder:
    """`answer` as DeepSeek's thinking mode gives it through its chat API: each answer with its
    ``reasoning_content`` (a call's names the call), and every request after a call refused
    unless each calling assistant message carries its reasoning as given. Requests in another
    API's words, and the helper's, are `answer`'s alone."""

    def respond(request: dict[str, Any]) -> ScriptedResponse:
        messages = request.get("messages")
        if not isinstance(messages, list) or request.get("model") == "cheap-model":
            return answer(request)
        for message in messages:
            calls = message.get("tool_calls") or ()
            if calls and message.get("reasoning_content") != thought(calls[0]["id"]):
                return StatusError(400, DEEPSEEK_REFUSAL, type="invalid_request_error")
        reply = answer(request)
        if not isinstance(reply, Reply):
            return reply
        reasoning = thought(reply.tool_calls[0]["id"]) if reply.tool_calls else "I can answer."
        return replace(reply, message_extra={**reply.message_extra, "reasoning_content": reasoning})

    return respond
