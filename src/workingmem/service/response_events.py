"""A response as the Responses API's server-sent events.

    first = await first_chat_piece(stream)  # a failure before the answer: a plain HTTP error
    return EventStreamResponse(response_events(stream, first, info, ...), ...)

The sequence a client's parser expects, numbered from 0: ``response.created``,
``response.in_progress``; a chat upstream's thinking as a reasoning item, as it comes
(``output_item.added``, ``content_part.added``, a ``reasoning_text.delta`` per piece,
``reasoning_text.done``, ``content_part.done``, ``output_item.done``); for the text, the
message item (``output_item.added``, ``content_part.added``, an ``output_text.delta`` per
piece, ``output_text.done``, ``content_part.done``, ``output_item.done``); each call of the
client's tools (``output_item.added``, ``function_call_arguments.delta`` and ``.done``, or a
custom tool's ``custom_tool_call_input.delta`` and ``.done``, ``output_item.done``); then
``response.completed`` (``response.incomplete`` when the answer was cut at
``max_output_tokens``). The items carry the ids the thread stores them under. A failure once
the stream has begun is a ``response.failed`` event and nothing is stored; a client that
disconnects closes the answer, and no half answer is stored either.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from ..formats.chat_answer import reasoning_of
from ..formats.responses_chat import reasoning_item
from ..gateway import AnswerStream
from ..llm import NativeEvent, TextDelta, Usage
from ..types import CHAT_FORMAT
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
    first: TextDelta | NativeEvent | None,
    info: ResponseInfo,
    *,
    message_id: str,
    reasoning_id: str,
    finish: Finish,
    metrics: Metrics,
    served: Sequence[dict[str, Any]] = (),
    encode: Callable[[dict[str, Any]], bytes] = named_event,
) -> AsyncGenerator[bytes, None]:
    """The SSE body (each event as `encode` frames it: SSE's by default); closing it early
    (the client left) closes the answer: nothing stored. A chat upstream's thinking streams
    as the reasoning item `reasoning_id` before the text. `served` grows with the items of
    the rounds the gateway ran for the answer (its tool searches): each is sent whole as the
    next piece comes, before it."""
    number = -1

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal number
        number += 1
        return encode({"type": kind, "sequence_number": number, **fields})

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
    thinking = _Thinking(reasoning_id, event)

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

    announced: dict[str, int] = {}
    """The served items sent: their ids and output indexes."""

    def announce() -> list[bytes]:
        """The served items not sent yet, whole, at the next output indexes."""
        out: list[bytes] = []
        for item in served[len(announced) :]:
            index = thinking.items + len(announced)
            announced[item["id"]] = index
            out += [
                event("response.output_item.added", output_index=index, item=item),
                event("response.output_item.done", output_index=index, item=item),
            ]
        return out

    def add(piece: TextDelta | NativeEvent) -> list[bytes]:
        out = announce()
        if isinstance(piece, NativeEvent):
            return out + ([] if opened else thinking.add(reasoning_of(piece.event), len(announced)))
        out += thinking.close()
        if not opened:
            where["output_index"] = thinking.items + len(announced)
            out += open_message()
        pieces.append(piece.text)
        out.append(delta(piece))
        return out

    async with aclosing(stream):
        opening = [
            lifecycle("response.created", "in_progress"),
            lifecycle("response.in_progress", "in_progress"),
        ]
        try:
            if first is not None:
                opening += add(first)
            yield b"".join(opening)
            opening = []
            if first is not None:
                async for piece in stream.pieces(CHAT_FORMAT):
                    if events := add(piece):
                        yield b"".join(events)
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
        thought = next((i for i in output if i.get("id") == reasoning_id), None)
        # the indexes follow the stream: the reasoning, the served items and the message the
        # text went to first, when they have begun; the order of the output is the completed
        # response's
        by_index = {announced[i["id"]]: i for i in output if i.get("id") in announced}
        if thinking.items and thought:
            by_index[thinking.index] = thought
        if opened and streamed:
            by_index[where["output_index"]] = streamed
        begun = [by_index[index] for index in sorted(by_index)]
        order = begun + [item for item in output if not any(item is b for b in begun)]
        closing: list[bytes] = thinking.close(thought)  # ready at once: one piece of the body
        for index, item in enumerate(order):
            if (item is thought and thinking.items) or item.get("id") in announced:
                continue
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


class _Thinking:
    """A chat upstream's thinking as the reasoning item streamed before the answer's text
    (output index 0, or after the served items sent before it): opened by its first piece,
    its text as ``reasoning_text`` deltas, done when the text begins or the answer ends."""

    def __init__(self, item_id: str, event: Callable[..., bytes]) -> None:
        self._id = item_id
        self._event = event
        self._where: dict[str, Any] = {"item_id": item_id, "output_index": 0, "content_index": 0}
        self._pieces: list[str] = []
        self._done = False

    @property
    def index(self) -> int:
        """Its output index."""
        return int(self._where["output_index"])

    @property
    def items(self) -> int:
        """The output items it took: 1 once it has begun."""
        return 1 if self._pieces else 0

    def add(self, text: str, index: int = 0) -> list[bytes]:
        """The events of a piece of thinking; the first opens the item at output `index`."""
        if not text or self._done:
            return []
        out = []
        if not self._pieces:
            self._where["output_index"] = index
            item = {"id": self._id, "type": "reasoning", "summary": [], "content": []}
            part = {"type": "reasoning_text", "text": ""}
            out += [
                self._event("response.output_item.added", output_index=index, item=item),
                self._event("response.content_part.added", **self._where, part=part),
            ]
        self._pieces.append(text)
        out.append(self._event("response.reasoning_text.delta", **self._where, delta=text))
        return out

    def close(self, stored: dict[str, Any] | None = None) -> list[bytes]:
        """Its closing events, once (the item as stored when the answer is known)."""
        if not self._pieces or self._done:
            return []
        self._done = True
        text = "".join(self._pieces)
        item = stored or reasoning_item(self._id, text)
        where = self._where
        part = {"type": "reasoning_text", "text": text}
        return [
            self._event("response.reasoning_text.done", **where, text=text),
            self._event("response.content_part.done", **where, part=part),
            self._event("response.output_item.done", output_index=self.index, item=item),
        ]
