"""The answer as OpenAI's chat completion: the upstream's own response, handed on.

    body = completion_body(result, completion_id=..., created=...)

When the upstream's response is there (`AskResult.response`), the client gets it as it came:
every choice, logprobs, ``system_fingerprint``, fields this service does not know. Two things
change: the gateway's agent-memory calls are taken out of the choices (the client never runs
them), and the usage is the sum over the answer's rounds. Without it (the local model, a host's
client, an upstream that speaks another API), the body is built from the result, its tokens'
log probabilities included when the upstream gave them.
"""

from __future__ import annotations

from typing import Any

from ..formats.chat_custom_tools import in_client_words
from ..gateway import AskResult
from ..llm.usage import to_chat
from ..placement import GATEWAY_TOOLS, tool_name
from .chat_schemas import AssistantMessage, ChatCompletion, Choice, CompletionUsage, ToolCallOut

__all__ = ["choice_logprobs", "completion_body"]


def completion_body(
    result: AskResult, *, completion_id: str, created: int, custom: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The answer's body; the calls of the request's `custom` tools as ``custom`` calls."""
    body = _body(result, completion_id=completion_id, created=created)
    if custom:
        for choice in body["choices"]:
            message = choice.get("message") or {}
            if message.get("tool_calls"):
                message["tool_calls"] = in_client_words(message["tool_calls"], custom)
    return body


def _body(result: AskResult, *, completion_id: str, created: int) -> dict[str, Any]:
    usage = to_chat(result.usage)
    if result.response is None or not result.response.get("choices"):
        return ChatCompletion(
            id=completion_id,
            created=created,
            model=result.answered_by or result.model,
            choices=[
                Choice(
                    message=AssistantMessage(
                        content=result.answer if result.answer or not result.tool_calls else None,
                        tool_calls=[ToolCallOut.model_validate(c) for c in result.tool_calls]
                        or None,
                    ),
                    finish_reason=result.finish_reason,
                    logprobs=choice_logprobs(result.logprobs),
                )
            ],
            usage=CompletionUsage.of(result.usage),
        ).model_dump(mode="json", exclude_none=True)
    body = _writable(result.response)
    body.setdefault("id", completion_id)
    body.setdefault("object", "chat.completion")
    body.setdefault("created", created)
    body.setdefault("model", result.model)
    if result.tool_rounds:
        body["usage"] = usage  # the rounds' sum; the details we do not read do not add up
    else:
        body["usage"] = _with_upstream_details(body.get("usage"), usage)
    for choice in body["choices"]:
        message = choice.get("message") or {}
        calls = [c for c in message.get("tool_calls") or () if tool_name(c) not in GATEWAY_TOOLS]
        if calls:
            message["tool_calls"] = calls
        else:
            message.pop("tool_calls", None)
    first = body["choices"][0]
    first["finish_reason"] = result.finish_reason
    message = first.setdefault("message", {})
    message["content"] = result.answer if result.answer or not result.tool_calls else None
    if result.tool_calls:  # exactly what was stored: the client's calls, not the gateway's
        message["tool_calls"] = list(result.tool_calls)
    else:
        message.pop("tool_calls", None)
    return body


def choice_logprobs(tokens: tuple[dict[str, Any], ...] | None) -> dict[str, Any] | None:
    """A choice's (or a chunk's) ``logprobs``: the tokens the upstream gave, None for none."""
    return {"content": list(tokens), "refusal": None} if tokens else None


def _with_upstream_details(given: object, usage: dict[str, Any]) -> dict[str, Any]:
    """`usage` over the upstream's own: the details we do not read (audio tokens, predicted
    tokens, ...) kept beside those we do."""
    if not isinstance(given, dict):
        return usage
    merged = {**given, **usage}
    for key in ("prompt_tokens_details", "completion_tokens_details"):
        theirs = given.get(key)
        if isinstance(theirs, dict):
            merged[key] = {**theirs, **usage[key]}
    return merged


def _writable(response: dict[str, Any]) -> dict[str, Any]:
    """A copy of the levels `completion_body` writes (the body, its choices, their messages),
    sharing the rest with the stored result: a deep copy cost more than the whole body's
    building."""
    body = dict(response)
    choices = []
    for choice in body["choices"]:
        choice = dict(choice)
        if isinstance(choice.get("message"), dict):
            choice["message"] = dict(choice["message"])
        choices.append(choice)
    body["choices"] = choices
    return body
