"""An answer as the Messages API's server-sent events.

    first = await first_event(stream)      # a failure before the answer: a plain HTTP error
    return EventStreamResponse(message_events(stream, first, ...), ...)

The order the `anthropic` SDK's stream helpers read: ``message_start`` (the message, no
content yet), a ``ping``, the blocks numbered from 0 as they come (an Anthropic upstream's
thinking block with its ``thinking_delta`` and ``signature_delta`` events as it sent them, or a
chat upstream's thinking as a thinking block, a ``thinking_delta`` per piece, when the request
turned thinking on; the text block, a ``text_delta`` per piece), then the answer's other
blocks whole (each ``tool_use`` with its input as one ``input_json_delta``), ``message_delta``
(the stop reason and the usage), then ``message_stop``. A failure once the stream has begun
is an ``error`` event, and nothing is stored; a client that disconnects closes the answer, and
nothing is stored either.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ..formats.anthropic import FORMAT
from ..formats.chat_answer import reasoning_of
from ..gateway import AnswerStream
from ..llm import NativeEvent
from ..types import CHAT_FORMAT
from .disconnect import LastPiece
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
    first: str | NativeEvent | None,
    info: MessageInfo,
    *,
    finish: Finish,
    metrics: Metrics,
    thinking: bool = False,
) -> AsyncIterator[bytes]:
    """The SSE body; closing it early (the client left) closes the answer: nothing stored.
    With `thinking` (the request turned it on), a chat upstream's thinking streams as a
    thinking block before the text."""
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
        blocks = _Blocks(thinking)
        opening = [
            named_event({"type": "message_start", "message": started}),
            named_event({"type": "ping"}),
        ]
        try:
            if first is not None:
                opening += blocks.add(first)
            yield b"".join(opening)
            opening = []
            if first is not None:
                async for piece in stream.events():
                    if events := blocks.add(piece):
                        yield b"".join(events)
            result = stream.result
            assert result is not None, "a stream that ended has its result"
            message = await finish(result)
        except Exception as exc:
            yield b"".join([*opening, named_event(anthropic_error_body(stream_failure(exc)))])
            return
        metrics.observe_answer(result.usage)
        closing = blocks.rest(message["content"])  # ready at once: one piece of the body
        closing.append(
            named_event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": message["usage"],
                }
            )
        )
        closing.append(named_event({"type": "message_stop"}))
        yield LastPiece(b"".join(closing))


class _Blocks:
    """The content blocks as they are streamed, numbered in order: a chat upstream's thinking
    as it comes (when shown), the text as it comes, an upstream's thinking blocks as it sent
    them (renumbered), then the rest of the answer's blocks whole once it is known."""

    def __init__(self, thinking: bool) -> None:
        self.count = 0
        self._thinking = thinking
        self._open_block: int | None = None
        """The text or thinking block being streamed, if any."""
        self._open_kind: str | None = None
        self._numbers: dict[int, int] = {}
        """The upstream's index of each block passed on, to ours."""
        self.streamed: set[str] = set()
        """The kinds of block already streamed (not sent again from the answer)."""

    def add(self, piece: str | NativeEvent) -> list[bytes]:
        if isinstance(piece, str):
            return self._piece("text", piece)
        event = piece.event
        if piece.format == CHAT_FORMAT:
            return self._piece("thinking", reasoning_of(event)) if self._thinking else []
        if piece.format != FORMAT or not isinstance(event.get("index"), int):
            return []
        out: list[bytes] = []
        if event.get("type") == "content_block_start":
            out = self._close_open()  # blocks are streamed one after the other
            block = dict(event.get("content_block") or {})
            self._numbers[event["index"]] = self._open(block, out)
            self.streamed.add(str(block.get("type")))
        elif event["index"] in self._numbers:
            out.append(named_event({**event, "index": self._numbers[event["index"]]}))
        return out

    def _piece(self, kind: str, text: str) -> list[bytes]:
        """A piece of the text or of a chat upstream's thinking, in the block of its kind:
        opened by its first piece; thinking only before the text (one block of it)."""
        out: list[bytes] = []
        if self._open_kind != kind:
            if not text or (kind == "thinking" and self.streamed & {"text", "thinking"}):
                return []
            out = self._close_open()
            self._open_block = self._open(_EMPTY[kind], out)
            self._open_kind = kind
            self.streamed.add(kind)
        assert self._open_block is not None
        out.append(_delta(self._open_block, kind, text))
        return out

    def rest(self, content: list[dict[str, Any]]) -> list[bytes]:
        """The answer's blocks that were not streamed, after the ones that were."""
        out = self._close_open()
        for block in content:
            kind = block.get("type")
            if kind in self.streamed:
                continue
            if kind == "text":
                number = self._open({"type": "text", "text": ""}, out)
                if block.get("text"):
                    out.append(_delta(number, "text", str(block["text"])))
            elif kind == "tool_use":
                number = self._open({**block, "input": {}}, out)
                partial = json.dumps(block.get("input", {}), ensure_ascii=False)
                delta = {"type": "input_json_delta", "partial_json": partial}
                out.append(
                    named_event({"type": "content_block_delta", "index": number, "delta": delta})
                )
            else:
                number = self._open(block, out)
            out.append(named_event({"type": "content_block_stop", "index": number}))
        return out

    def _open(self, block: dict[str, Any], out: list[bytes]) -> int:
        number = self.count
        self.count += 1
        out.append(
            named_event({"type": "content_block_start", "index": number, "content_block": block})
        )
        return number

    def _close_open(self) -> list[bytes]:
        if self._open_block is None:
            return []
        number, self._open_block, self._open_kind = self._open_block, None, None
        return [named_event({"type": "content_block_stop", "index": number})]


_EMPTY = {
    "text": {"type": "text", "text": ""},
    "thinking": {"type": "thinking", "thinking": "", "signature": ""},
}
"""A streamed block as it opens."""


def _delta(index: int, kind: str, text: str) -> bytes:
    """A piece of a text (``text_delta``) or thinking block (``thinking_delta``)."""
    return named_event(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": f"{kind}_delta", kind: text},
        }
    )
