"""What `ScriptedUpstream` answers on ``POST /v1/messages``: Anthropic's Message, its events
and its errors, for a scripted `Reply`.

A reply's text is a text block, its tool calls (OpenAI's format, as everywhere in the script)
are ``tool_use`` blocks, and ``Reply(thinking=...)`` puts a thinking block with its signature
first, streamed as ``thinking_delta`` pieces and one ``signature_delta``.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Any

from ..formats.anthropic import error_type

if TYPE_CHECKING:
    from .testing import Reply

__all__ = ["count_of", "error_body", "message_body", "message_events", "signature_of"]

_STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use", "stop": "end_turn"}


def signature_of(thinking: str) -> str:
    """The signature a scripted thinking block carries: opaque, and the same for the same
    text, so that a test can tell it came back unchanged."""
    return "sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:32]


def count_of(request: dict[str, Any]) -> int:
    """The scripted count of a request's input tokens: 4 characters of its JSON a token
    (system, messages and tools), so that a test can say what it should be."""
    given = [request.get("system"), request.get("messages"), request.get("tools")]
    return math.ceil(len(json.dumps(given, ensure_ascii=False)) / 4)


def message_body(reply: Reply, request: dict[str, Any], number: int) -> dict[str, Any]:
    """The Message answering `request` with `reply`."""
    content: list[dict[str, Any]] = []
    if reply.thinking is not None:
        content.append(
            {
                "type": "thinking",
                "thinking": reply.thinking,
                "signature": signature_of(reply.thinking),
            }
        )
    if reply.text or not reply.tool_calls:
        content.append({"type": "text", "text": reply.text or ""})
    for call in reply.tool_calls:
        function = call["function"]
        content.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": function["name"],
                "input": json.loads(function["arguments"] or "{}"),
            }
        )
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = count_of(request)
    output = reply.completion_tokens
    if output is None:
        output = math.ceil(len((reply.text or "") + (reply.thinking or "")) / 4)
    reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": f"msg_scripted_{number}",
        "type": "message",
        "role": "assistant",
        "model": reply.model or str(request.get("model") or "scripted-model"),
        "content": content,
        "stop_reason": _STOP_REASONS.get(reason, reason),
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt - reply.cached_tokens - reply.cache_write_tokens,
            "output_tokens": output,
            "cache_creation_input_tokens": reply.cache_write_tokens,
            "cache_read_input_tokens": reply.cached_tokens,
            **(
                {"output_tokens_details": {"thinking_tokens": reply.reasoning_tokens}}
                if reply.reasoning_tokens
                else {}
            ),
        },
    }


def message_events(reply: Reply, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Messages API's events for `body`, in the order Anthropic sends them."""
    started = {**body, "content": [], "stop_reason": None, "usage": {**body["usage"]}}
    started["usage"]["output_tokens"] = 1
    events: list[dict[str, Any]] = [{"type": "message_start", "message": started}, {"type": "ping"}]
    step = max(1, reply.chunk_chars)
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        at = {"index": index}
        if kind == "text":
            events.append(
                {"type": "content_block_start", **at, "content_block": {**block, "text": ""}}
            )
            events += [
                {
                    "type": "content_block_delta",
                    **at,
                    "delta": {"type": "text_delta", "text": piece},
                }
                for piece in _pieces(block["text"], step)
            ]
        elif kind == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            events.append({"type": "content_block_start", **at, "content_block": empty})
            events += [
                {
                    "type": "content_block_delta",
                    **at,
                    "delta": {"type": "thinking_delta", "thinking": piece},
                }
                for piece in _pieces(block["thinking"], step)
            ]
            events.append(
                {
                    "type": "content_block_delta",
                    **at,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                }
            )
        else:  # tool_use
            events.append(
                {"type": "content_block_start", **at, "content_block": {**block, "input": {}}}
            )
            partial = json.dumps(block["input"])
            events.append(
                {
                    "type": "content_block_delta",
                    **at,
                    "delta": {"type": "input_json_delta", "partial_json": partial},
                }
            )
        events.append({"type": "content_block_stop", **at})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": body["usage"]["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def error_body(status: int, message: str, kind: str | None) -> dict[str, Any]:
    """Anthropic's error shape."""
    return {
        "type": "error",
        "error": {"type": kind or error_type(status), "message": message},
    }


def _pieces(text: str, step: int) -> list[str]:
    return [text[i : i + step] for i in range(0, len(text), step)]
