"""What `ScriptedUpstream` answers on OpenAI's endpoints: a chat completion and its chunks
(``POST /v1/chat/completions``), a Response and its events (``POST /v1/responses``), for a
scripted `Reply`.

Usage is the reply's, or estimated (4 characters a token) from the request and the answer;
``Reply(reasoning=...)`` puts a reasoning item with that encrypted content before a
Response's answer.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any

from ..formats.chat_answer import call_fields

if TYPE_CHECKING:
    from .testing import Reply

__all__ = [
    "DEFAULT_MODEL",
    "completion_body",
    "completion_chunks",
    "response_body",
    "response_events",
    "text_of",
]

DEFAULT_MODEL = "scripted-model"


def text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        )
    return ""


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def usage_of(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = sum(
            estimate_tokens(text_of(message.get("content"))) + 4
            for message in request.get("messages") or []
            if isinstance(message, dict)
        )
    completion = reply.completion_tokens
    if completion is None:
        completion = estimate_tokens(reply.text or "")
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {
            "cached_tokens": reply.cached_tokens,
            "audio_tokens": 0,
            **(
                {"cache_write_tokens": reply.cache_write_tokens} if reply.cache_write_tokens else {}
            ),
        },
        "completion_tokens_details": {
            "reasoning_tokens": reply.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def finish_reason_of(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def logprobs_of(text: str, step: int, request: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The text's tokens with log probabilities when `request` asks for them (the chat API's
    ``logprobs``, the Responses API's ``include``), else None: a token per piece a stream
    sends, its log probability made from its length, ``top_logprobs`` alternatives after it."""
    include = request.get("include") or ()
    if not request.get("logprobs") and "message.output_text.logprobs" not in include:
        return None
    top = int(request.get("top_logprobs") or 0)
    tokens = []
    for i in range(0, len(text), step):
        token = text[i : i + step]
        logprob = -len(token) / 100
        others = [(token, logprob), *((f"{token}~{k}", logprob - k) for k in range(1, top))]
        tokens.append(
            {
                "token": token,
                "logprob": logprob,
                "bytes": list(token.encode()),
                "top_logprobs": [
                    {"token": t, "logprob": p, "bytes": list(t.encode())} for t, p in others[:top]
                ],
            }
        )
    return tokens


def model_of(reply: Reply, request: dict[str, Any]) -> str:
    return reply.model or str(request.get("model") or DEFAULT_MODEL)


def completion_body(reply: Reply, request: dict[str, Any], completion_id: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, **reply.message_extra}
    if reply.tool_calls:
        message["tool_calls"] = [dict(call) for call in reply.tool_calls]
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_of(reply, request),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": _chat_logprobs(
                    logprobs_of(reply.text or "", max(1, reply.chunk_chars), request)
                ),
                "finish_reason": finish_reason_of(reply),
            },
            *(
                {
                    "index": index,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
                for index, text in enumerate(reply.more_choices, start=1)
            ),
        ],
        **reply.extra,
    }
    if reply.usage:
        body["usage"] = usage_of(reply, request)
    return body


def completion_chunks(
    reply: Reply, request: dict[str, Any], completion_id: str, include_usage: bool
) -> list[dict[str, Any]]:
    """The OpenAI stream of one reply: role, content pieces, tool calls, finish, usage."""
    include_usage = include_usage and reply.usage  # Reply(usage=False): a server without it
    created = int(time.time())
    model = model_of(reply, request)

    def chunk(
        delta: dict[str, Any],
        finish_reason: str | None = None,
        tokens: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        if tokens is not None:
            choice["logprobs"] = _chat_logprobs(tokens)
        body: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
        }
        if include_usage:
            body["usage"] = None
        return body

    chunks = [chunk({"role": "assistant", "content": ""})]
    text = reply.text or ""
    step = max(1, reply.chunk_chars)
    for key, value in reply.message_extra.items():
        pieces = [value[i : i + step] for i in range(0, len(value), step)]
        chunks.extend(
            chunk({key: piece}) for piece in (pieces if isinstance(value, str) else [value])
        )
    tokens = logprobs_of(text, step, request)
    chunks.extend(
        chunk({"content": text[i : i + step]}, tokens=None if tokens is None else [tokens[n]])
        for n, i in enumerate(range(0, len(text), step))
    )
    for index, call in enumerate(reply.tool_calls):
        function = call.get("function") or {}
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.get("id"),
                            "type": "function",
                            "function": {
                                "name": function.get("name"),
                                "arguments": function.get("arguments", ""),
                            },
                            **call_fields(call),  # a server's own, in the first delta
                        }
                    ]
                }
            )
        )
    chunks.append(chunk({}, finish_reason_of(reply)))
    if include_usage:
        usage_chunk = chunk({})
        usage_chunk["choices"] = []
        usage_chunk["usage"] = usage_of(reply, request)
        chunks.append(usage_chunk)
    return chunks


def response_body(reply: Reply, request: dict[str, Any], number: int) -> dict[str, Any]:
    """A Response object answering `request` with `reply`."""
    output: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        output.append(
            {
                "id": f"rs_scripted_{number}",
                "type": "reasoning",
                "summary": [],
                "encrypted_content": reply.reasoning,
            }
        )
    if reply.text or not reply.tool_calls:
        output.append(
            {
                "id": f"msg_scripted_{number}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": reply.text or "",
                        "annotations": [],
                        "logprobs": logprobs_of(
                            reply.text or "", max(1, reply.chunk_chars), request
                        )
                        or [],
                    }
                ],
            }
        )
    for index, call in enumerate(reply.tool_calls):
        function = call["function"]
        output.append(
            {
                "id": f"fc_scripted_{number}_{index}",
                "type": "function_call",
                "status": "completed",
                "call_id": call["id"],
                "name": function["name"],
                "arguments": function["arguments"],
            }
        )
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = estimate_tokens(json.dumps(request.get("input"), ensure_ascii=False))
    completion = reply.completion_tokens
    if completion is None:
        completion = estimate_tokens(reply.text or "")
    cut = reply.finish_reason == "length"
    return {
        "id": f"resp_scripted_{number}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": model_of(reply, request),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {
                "cached_tokens": reply.cached_tokens,
                "cache_write_tokens": reply.cache_write_tokens,
            },
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
            "total_tokens": prompt + completion,
        },
    }


def response_events(reply: Reply, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Responses API's events for `body`: its items one by one, the text in pieces."""
    started = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    for index, item in enumerate(body["output"]):
        if item["type"] != "message":
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": item}
            )
            events.append(
                {"type": "response.output_item.done", "output_index": index, "item": item}
            )
            continue
        text = item["content"][0]["text"]
        tokens = item["content"][0].get("logprobs") or []
        at = {"item_id": item["id"], "output_index": index, "content_index": 0}
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "content": []},
            }
        )
        step = max(1, reply.chunk_chars)
        events += [
            {
                "type": "response.output_text.delta",
                **at,
                "delta": text[i : i + step],
                "logprobs": tokens[n : n + 1],
            }
            for n, i in enumerate(range(0, len(text), step))
        ]
        events.append({"type": "response.output_text.done", **at, "text": text, "logprobs": tokens})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    kind = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append({"type": kind, "response": body})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _chat_logprobs(tokens: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    return None if tokens is None else {"content": tokens, "refusal": None}
