"""A response as the Responses API's server-sent events.

    first = await first_piece(stream)      # a failure before the answer: a plain HTTP error
    return EventStreamResponse(response_events(stream, first, info, ...), ...)

The sequence a client's parser expects, numbered from 0: ``response.created``,
``response.in_progress``; for the text, the message item (``output_item.added``,
``content_part.added``, an ``output_text.delta`` per piece, ``output_text.done``,
``content_part.done``, ``output_item.done``); each call of the client's tools
(``output_item.added``, ``function_call_arguments.delta`` and ``.done``, or a custom tool's
``custom_tool_call_input.delta`` and ``.done``, ``output_item.done``); then
``response.completed`` (``response.incomplete`` when the answer was cut at
``max_output_tokens``). The items carry the ids the thread stores them under. A
failure once the stream has begun is a ``response.failed`` event and nothing is stored; a
client that disconnects closes the answer, and no half answer is stored either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from ..gateway import AnswerStream
from ..llm import TextDelta, Usage
from .disconnect import LastPiece
from .metrics import Metrics
from .response_body import ResponseInfo, response_object
from .sse import Finish, named_event, stream_failure

__all__ = ["Finish", "response_events"]

_CALLS = {
    "function_call": ("arguments", "response.function_call_arguments"),
    "custom_tool_call": ("input", "response.custom_tool_call_input"),
}
"""A call item's streamed field, and its events' name."""


async def response_events(
    stream: AnswerStream,
    first: TextDelta | None,
    info: ResponseInfo,
    *,
    message_id: str,
    finish: Finish,
    metrics: Metrics,
) -> AsyncIterator[bytes]:
    """The SSE body; closing it early (the client left) closes the answer: nothing stored."""
    number = -1

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal number
        number += 1
        return named_event({"type": kind, "sequence_number": number, **fields})

    def lifecycle(kind: str, status: Any, **more: Any) -> bytes:
        return event(kind, response=response_object(info, status=status, output=[], **more))

    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    where: dict[str, Any] = {"item_id": message_id, "output_index": 0, "content_index": 0}
    empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    opened = False
    pieces: list[str] = []

    def delta(piece: TextDelta) -> bytes:
        tokens = list(piece.logprobs)
        return event("response.output_text.delta", **where, delta=piece.text, logprobs=tokens)

    def open_message() -> list[bytes]:
        nonlocal opened
        opened = True
        return [
            event("response.output_item.added", output_index=where["output_index"], item=message),
            event("response.content_part.added", **where, part=empty_part),
        ]

    async with aclosing(stream):
        opening = [
            lifecycle("response.created", "in_progress"),
            lifecycle("response.in_progress", "in_progress"),
        ]
        try:
            if first is not None:
                opening += open_message()
                pieces.append(first.text)
                opening.append(delta(first))
            yield b"".join(opening)
            opening = []
            if first is not None:
                async for piece in stream.deltas():
                    pieces.append(piece.text)
                    yield delta(piece)
            result = stream.result
            assert result is not None, "a stream that ended has its result"
            body = await finish(result)
        except Exception as exc:
            failure = {"code": "server_error", "message": stream_failure(exc).message}
            yield b"".join([*opening, lifecycle("response.failed", "failed", error=failure)])
            return
        metrics.observe_answer(result.usage if result is not None else Usage())
        output: list[dict[str, Any]] = body["output"]
        streamed = next((i for i in output if i.get("id") == message_id), None)
        # the indexes follow the stream: the message the text went to first, when it has
        # begun; the order of the output is the completed response's
        order = ([streamed] if opened and streamed else []) + [
            item for item in output if not (opened and item is streamed)
        ]
        closing: list[bytes] = []  # ready at once: one piece of the body
        for index, item in enumerate(order):
            if item is streamed:
                if not opened:
                    where["output_index"] = index
                    closing += open_message()
                part: dict[str, Any] = item["content"][0] if item.get("content") else empty_part
                whole = part.get("text", "".join(pieces))
                closing += [
                    event(
                        "response.output_text.done",
                        **where,
                        text=whole,
                        logprobs=part.get("logprobs") or [],
                    ),
                    event("response.content_part.done", **where, part=part),
                    event("response.output_item.done", output_index=index, item=item),
                ]
            elif item.get("type") in _CALLS:
                field, kind = _CALLS[item["type"]]
                at = {"item_id": item.get("id", ""), "output_index": index}
                named = {"name": item.get("name")} if field == "arguments" else {}
                started = {**item, field: "", "status": "in_progress"}
                closing += [
                    event("response.output_item.added", output_index=index, item=started),
                    event(f"{kind}.delta", **at, delta=item[field]),
                    event(f"{kind}.done", **at, **named, **{field: item[field]}),
                    event("response.output_item.done", output_index=index, item=item),
                ]
            else:  # reasoning, another message: whole
                closing += [
                    event("response.output_item.added", output_index=index, item=item),
                    event("response.output_item.done", output_index=index, item=item),
                ]
        done = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
        closing.append(event(done, response=body))
        yield LastPiece(b"".join(closing))
