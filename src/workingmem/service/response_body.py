"""The Response object a ``POST /v1/responses`` returns (and a stream's lifecycle events carry).

    body = response_object(info, status="completed", output=items, usage=result.usage)

The request's own settings are echoed as OpenAI echoes them (with its defaults where the
request left them out), so that the SDK's `Response` reads every required field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..llm import Usage
from ..llm.usage import to_responses
from .responses_schemas import ResponseCreateRequest

__all__ = ["ResponseInfo", "Status", "response_object", "with_logprobs"]

Status = Literal["in_progress", "completed", "incomplete", "failed"]


@dataclass(frozen=True, slots=True)
class ResponseInfo:
    """What every state of one response shares."""

    response_id: str
    created_at: int
    model: str
    request: ResponseCreateRequest
    conversation_id: str | None = None


def response_object(
    info: ResponseInfo,
    *,
    status: Status,
    output: list[dict[str, Any]],
    usage: Usage | None = None,
    error: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
) -> dict[str, Any]:
    request = info.request
    text = request.sent("text") or {}
    reasoning = request.sent("reasoning") or {}
    return {
        "id": info.response_id,
        "object": "response",
        "created_at": info.created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "metadata": dict(request.metadata or {}),
        "model": info.model,
        "output": output,
        "parallel_tool_calls": True
        if request.parallel_tool_calls is None
        else request.parallel_tool_calls,
        "previous_response_id": request.previous_response_id,
        "conversation": {"id": info.conversation_id} if info.conversation_id else None,
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": request.store,
        "temperature": 1.0 if request.temperature is None else request.temperature,
        "text": {
            "format": text.get("format") or {"type": "text"},
            **{k: v for k, v in text.items() if k != "format"},
        },
        "tool_choice": request.sent("tool_choice") or "auto",
        "tools": [tool.model_dump(mode="json", exclude_unset=True) for tool in request.tools or ()],
        "top_p": 1.0 if request.top_p is None else request.top_p,
        "top_logprobs": request.top_logprobs,
        "truncation": request.truncation or "disabled",
        "usage": to_responses(usage) if usage is not None else None,
        "user": request.user,
        "safety_identifier": request.safety_identifier,
        "prompt_cache_key": request.prompt_cache_key,
    }


def with_logprobs(
    items: list[dict[str, Any]], tokens: tuple[dict[str, Any], ...] | None
) -> list[dict[str, Any]]:
    """The answer's output items with its tokens' log probabilities in its text (a copy): a
    chat upstream's give them beside the text, a Responses upstream's already in it."""
    texts = ((i, text) for i, item in enumerate(items) if (text := _text_of(item)) is not None)
    at, text = next(texts, (0, None))
    if text is None or text.get("logprobs") or not tokens:
        return items
    given = {
        **items[at],
        "content": [{**text, "logprobs": list(tokens)}, *items[at]["content"][1:]],
    }
    return [*items[:at], given, *items[at + 1 :]]


def _text_of(item: dict[str, Any]) -> dict[str, Any] | None:
    """A message item's output text (its first part), if it has one."""
    parts = item.get("content") if item.get("type") == "message" else None
    first = parts[0] if parts else None
    return first if isinstance(first, dict) and first.get("type") == "output_text" else None
