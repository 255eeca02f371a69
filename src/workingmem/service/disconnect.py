"""Work that stops when the client goes away.

    result = await unless_disconnected(request, gateway.ask(...))
    return EventStreamResponse(answer_events(...), media_type="text/event-stream")

A client that disconnects before its answer is ready will never read it: the model's work is
cancelled (the local model stops generating at its next token) and nothing more is stored for
it. A streamed answer stops the same way: its generator is cancelled where it waits, and
closing it stops the generation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["ClientDisconnectedError", "EventStreamResponse", "LastPiece", "unless_disconnected"]

T = TypeVar("T")


class ClientDisconnectedError(Exception):
    """The client went away before the work was done; the work was cancelled."""


async def unless_disconnected(request: Request | Receive, work: Coroutine[Any, Any, T]) -> T:
    """The work's result; `ClientDisconnectedError` once the client has gone (the work cancelled).

    The request's body must have been read already (`request`: the request, or its ASGI
    receive): the next ASGI message is then the disconnect, whenever it comes. The work runs
    in the request's own task, and a watcher task cancels it on the disconnect: one task a
    request, not two and a wait on both.
    """
    receive = request.receive if isinstance(request, Request) else request
    current = asyncio.current_task()
    assert current is not None, "called from a task"
    state = _Watch()

    def on_disconnect(watcher: asyncio.Future[None]) -> None:
        if watcher.cancelled() or watcher.exception() is not None or state.finished:
            return  # the work ended first (or the receive failed: the work goes on)
        state.gone = True
        current.cancel()

    watcher = asyncio.ensure_future(_disconnected(receive))
    watcher.add_done_callback(on_disconnect)
    try:
        result = await work
    except asyncio.CancelledError:
        # Ours alone when nothing else cancelled the request meanwhile (a server shutdown).
        if state.gone and current.uncancel() == 0:
            raise ClientDisconnectedError(
                "the client disconnected before the answer was ready"
            ) from None
        raise
    finally:
        state.finished = True
        watcher.cancel()
    if state.gone:
        current.uncancel()  # the work finished all the same: the cancel is withdrawn
    return result


@dataclass(slots=True)
class _Watch:
    """What the watcher's callback and the work's end tell each other: whether the client went,
    and whether the work is over (a disconnect seen after it cancels nothing)."""

    gone: bool = False
    finished: bool = False


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class LastPiece(bytes):
    """A stream's last piece of the body (its close): `EventStreamResponse` sends it as the
    body's end, one trip through the ASGI stack and one write, where a piece and then the end
    took two of each."""


class EventStreamResponse(StreamingResponse):
    """A `StreamingResponse` whose stream stops when the client goes, by `unless_disconnected`.

    Starlette's, under an ASGI server of spec 2.3 (uvicorn's), runs the stream and a disconnect
    listener as two tasks of an AnyIO task group, for every response. Here the stream is
    written from the request's own task and one watcher cancels it: in one service under wrk,
    a streamed answer cost 0.19-0.27 ms more than a JSON one, against 0.30-0.40 before."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        try:
            await unless_disconnected(receive, self.stream_response(send))
        except ClientDisconnectedError:
            return  # nobody reads the rest, and nothing runs after it
        if self.background is not None:
            await self.background()

    async def stream_response(self, send: Send) -> None:
        """Starlette's, but a `LastPiece` ends the body; the stream then runs to its end."""
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        pieces = aiter(self.body_iterator)
        async for piece in pieces:
            last = isinstance(piece, LastPiece)
            body = piece.encode(self.charset) if isinstance(piece, str) else bytes(piece)
            await send({"type": "http.response.body", "body": body, "more_body": not last})
            if last:
                extra = await anext(pieces, None)  # the stream's end: it closes what it holds
                assert extra is None, f"a piece after the last: {extra!r}"
                return
        await send({"type": "http.response.body", "body": b"", "more_body": False})
