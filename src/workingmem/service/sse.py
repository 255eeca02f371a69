"""The answer as server-sent events in OpenAI's chunk format.

    first = await first_chat_piece(stream)      # a failure before the answer: a plain error
    return EventStreamResponse(answer_events(stream, first, ...), media_type="text/event-stream")

The events: a chunk with the assistant role, a chunk per piece of text (or of the upstream's
other delta fields, as it sent them: a reasoning model's ``reasoning_content``), the calls of
the client's tools (each whole, in one chunk), a chunk with the finish reason, the usage chunk
(``choices: []``) when ``stream_options.include_usage``, then ``data: [DONE]``. A failure
once the answer has begun is sent as one ``data: {"error": ...}`` event in OpenAI's error
shape, and the stream ends. Events ready at the same moment (the role with the first piece; the
finish, the usage and ``[DONE]``) go out as one piece of the body, as the Responses and
Messages streams do theirs: a piece costs the server a trip through the ASGI stack and a write.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ..errors import WorkingMemoryError
from ..formats.chat_custom_tools import in_client_words
from ..gateway import AnswerStream, AskResult
from ..llm import NativeEvent, TextDelta, Usage
from ..llm.usage import to_chat
from ..types import CHAT_FORMAT
from .chat_response import choice_logprobs
from .disconnect import LastPiece
from .errors import ApiError, error_body, map_error
from .metrics import Metrics

__all__ = [
    "Finish",
    "StreamInfo",
    "answer_events",
    "first_chat_piece",
    "named_event",
    "stream_failure",
]

logger = logging.getLogger("workingmem.service")


@dataclass(frozen=True, slots=True)
class StreamInfo:
    completion_id: str
    created: int
    model: str
    include_usage: bool
    custom: frozenset[str] = frozenset()
    """The request's custom tools: calls of them are sent as ``custom`` calls."""


async def first_chat_piece(stream: AnswerStream) -> TextDelta | NativeEvent | None:
    """Waits for the first piece of the answer (None: the answer is empty), so that a failure
    before it (a bad request, the upstream's 429) is answered as a plain HTTP error: its text
    or an upstream's chat delta that carries none (a reasoning model's thinking comes before
    its answer), for a chat or Responses client."""
    try:
        return await anext(stream.pieces(CHAT_FORMAT))
    except StopAsyncIteration:
        return None


async def first_event(stream: AnswerStream) -> str | NativeEvent | None:
    """`first_chat_piece` for a client that also takes the upstream's own events
    (`AnswerStream.events`): a thinking block may come before any text."""
    try:
        return await anext(stream.events())
    except StopAsyncIteration:
        return None


Finish = Callable[[AskResult], Awaitable[dict[str, Any]]]
"""Stores what an answer made, if anything beyond its turns, and returns the body a streamed
answer ends with (a Response, a Message)."""


def stream_failure(exc: Exception) -> ApiError:
    """What a client is told of a failure once its stream has begun: the library's error as
    the service maps it, anything else a logged 500."""
    if isinstance(exc, WorkingMemoryError):
        return map_error(exc)
    logger.exception("a streamed answer failed")
    return ApiError(500, "internal error", code="internal_error", type="server_error")


def named_event(payload: dict[str, Any]) -> bytes:
    """An event named by its payload's ``type`` (the Responses and Messages APIs' framing)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"event: {payload['type']}\ndata: {text}\n\n".encode()


def _event(payload: dict[str, Any]) -> bytes:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


async def answer_events(
    stream: AnswerStream,
    first: TextDelta | NativeEvent | None,
    info: StreamInfo,
    metrics: Metrics,
    keep: Finish | None = None,
) -> AsyncIterator[bytes]:
    """The SSE body; closing it early (the client left) closes the answer: nothing stored.
    `keep` stores the whole answer (a completion kept with ``store: true``) before the stream
    ends; its failure is the stream's. Each chunk names the model the upstream named (as a
    response not streamed does), else the model asked for."""
    model = _answering(stream) or info.model

    def chunk(
        delta: dict[str, Any],
        finish_reason: str | None = None,
        tokens: tuple[dict[str, Any], ...] = (),
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": info.completion_id,
            "object": "chat.completion.chunk",
            "created": info.created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": choice_logprobs(tokens),
                    "finish_reason": finish_reason,
                }
            ],
        }
        if info.include_usage:
            body["usage"] = None
        return body

    def piece_chunk(piece: TextDelta | NativeEvent) -> dict[str, Any]:
        if isinstance(piece, NativeEvent):  # the upstream's own delta fields, as it sent them
            return chunk(piece.event)
        return chunk({"content": piece.text}, tokens=piece.logprobs)

    async with aclosing(stream):
        opening = [_event(chunk({"role": "assistant", "content": ""}))]
        if first is not None:
            opening.append(_event(piece_chunk(first)))
        yield b"".join(opening)
        if first is not None:
            try:
                async for piece in stream.pieces(CHAT_FORMAT):
                    yield _event(piece_chunk(piece))
            except Exception as exc:
                yield _error_event(stream_failure(exc))
                return
        if keep is not None and stream.result is not None:
            try:
                await keep(stream.result)
            except Exception as exc:
                yield _error_event(stream_failure(exc))
                return
        closing: list[bytes] = []  # ready at once: one piece of the body
        calls = stream.result.tool_calls if stream.result is not None else ()
        if calls:  # whole, once the upstream's deltas are in: a client reads them by index
            said = in_client_words(calls, info.custom)
            tool_calls = [{"index": i, **call} for i, call in enumerate(said)]
            closing.append(_event(chunk({"tool_calls": tool_calls})))
        usage = stream.result.usage if stream.result is not None else Usage()
        metrics.observe_answer(usage)
        closing.append(_event(chunk({}, stream.result.finish_reason if stream.result else "stop")))
        if info.include_usage:
            last = chunk({})
            last["choices"] = []
            last["usage"] = to_chat(usage)
            closing.append(_event(last))
        closing.append(b"data: [DONE]\n\n")
        yield LastPiece(b"".join(closing))


def _answering(stream: AnswerStream) -> str | None:
    """The model the upstream named for the answer so far: in its first piece, or in its
    answer when it had no piece of text (tool calls only)."""
    if stream.model is not None:
        return stream.model
    return stream.result.answered_by if stream.result is not None else None


def _error_event(error: ApiError) -> bytes:
    return _event(error_body(error.message, error.type, error.code, error.param))
