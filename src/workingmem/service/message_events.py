"""An answer as the Messages API's server-sent events.

    first = await first_piece(stream)      # a failure before the answer: a plain HTTP error
    return StreamingResponse(message_events(stream, first, ...), ...)

The order the `anthropic` SDK's stream helpers read: ``message_start`` (the message, no
content yet), a ``ping``, the text block (``content_block_start``, a ``text_delta`` per piece,
``content_block_stop``), each ``tool_use`` block (its start, its input as one
``input_json_delta``, its stop), ``message_delta`` (the stop reason and the usage), then
``message_stop``. A failure once the stream has begun is an ``error`` event, and nothing is
stored; a client that disconnects closes the answer, and nothing is stored either.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ..gateway import AnswerStream
from .errors import anthropic_error_body
from .metrics import Metrics
from .sse import Finish, named_event, stream_failure

__all__ = ["MessageInfo", "message_events"]


@dataclass(frozen=True, slots=True)
class MessageInfo:
    message_id: str
    model: str


async def message_events(
    stream: AnswerStream,
    first: str | None,
    info: MessageInfo,
    *,
    finish: Finish,
    metrics: Metrics,
) -> AsyncIterator[bytes]:
    """The SSE body; closing it early (the client left) closes the answer: nothing stored."""
    started: dict[str, Any] = {
        "id": info.message_id,
        "type": "message",
        "role": "assistant",
        "model": info.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    async with aclosing(stream):
        yield named_event({"type": "message_start", "message": started})
        yield named_event({"type": "ping"})
        opened = False
        try:
            if first is not None:
                opened = True
                block = {"type": "text", "text": ""}
                yield named_event(
                    {"type": "content_block_start", "index": 0, "content_block": block}
                )
                for text in (first,):
                    yield _delta(0, text)
                async for text in stream:
                    yield _delta(0, text)
            result = stream.result
            assert result is not None, "a stream that ended has its result"
            message = await finish(result)
        except Exception as exc:
            yield named_event(anthropic_error_body(stream_failure(exc)))
            return
        metrics.observe_answer(result.usage)
        blocks: list[dict[str, Any]] = message["content"]
        index = 0
        if opened:
            yield named_event({"type": "content_block_stop", "index": 0})
            index = 1
        for block in blocks:
            if block.get("type") == "text":
                if opened:
                    continue  # streamed above
                empty: dict[str, Any] = {"type": "text", "text": ""}
                yield named_event(
                    {"type": "content_block_start", "index": index, "content_block": empty}
                )
                if block.get("text"):
                    yield _delta(index, str(block["text"]))
            elif block.get("type") == "tool_use":
                start: dict[str, Any] = {**block, "input": {}}
                yield named_event(
                    {"type": "content_block_start", "index": index, "content_block": start}
                )
                partial = json.dumps(block.get("input", {}), ensure_ascii=False)
                yield named_event(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": partial},
                    }
                )
            else:
                yield named_event(
                    {"type": "content_block_start", "index": index, "content_block": block}
                )
            yield named_event({"type": "content_block_stop", "index": index})
            index += 1
        yield named_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {
                    "input_tokens": message["usage"]["input_tokens"],
                    "output_tokens": message["usage"]["output_tokens"],
                },
            }
        )
        yield named_event({"type": "message_stop"})


def _delta(index: int, text: str) -> bytes:
    return named_event(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        }
    )
