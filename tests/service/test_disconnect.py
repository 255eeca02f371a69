"""`unless_disconnected` and `EventStreamResponse`: the work (a streamed answer too) stops
when the client goes, and only then.

Driven through a Starlette request over an ASGI receive that the test controls: the client's
disconnect is the ASGI message a server sends, when the test sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest
from starlette.requests import Request

from workingmem.service.disconnect import (
    ClientDisconnectedError,
    EventStreamResponse,
    unless_disconnected,
)


class _Client:
    """The ASGI side of one request whose body was read: its next message is the disconnect,
    sent when `leave` is called."""

    def __init__(self) -> None:
        self.left = asyncio.Event()
        self.receiving = asyncio.Event()
        scope: dict[str, Any] = {"type": "http", "method": "POST", "headers": []}
        self.request = Request(scope, self._receive)

    async def _receive(self) -> dict[str, Any]:
        self.receiving.set()
        await self.left.wait()
        return {"type": "http.disconnect"}

    def leave(self) -> None:
        self.left.set()


def _cancelling() -> int:
    """The cancel requests pending on the test's own task (the request's, in a server)."""
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling()


async def test_the_work_s_result_when_the_client_stays() -> None:
    client = _Client()

    async def work() -> str:
        await client.receiving.wait()  # the watcher listens meanwhile
        return "answer"

    assert await unless_disconnected(client.request, work()) == "answer"
    assert _cancelling() == 0
    client.leave()  # a disconnect after the work cancels nothing
    await asyncio.sleep(0)
    assert _cancelling() == 0


async def test_a_disconnect_cancels_the_work_and_leaves_the_request_s_task_uncancelled() -> None:
    client = _Client()
    stopped = asyncio.Event()

    async def work() -> str:
        try:
            await client.receiving.wait()
            client.leave()
            await asyncio.Event().wait()  # the model's work, until cancelled
        except asyncio.CancelledError:
            stopped.set()
            raise
        return "never"

    with pytest.raises(ClientDisconnectedError):
        await unless_disconnected(client.request, work())
    assert stopped.is_set()
    assert _cancelling() == 0
    await asyncio.sleep(0)  # nothing is left to cancel the task later


async def test_a_cancel_of_the_request_itself_stays_a_cancel() -> None:
    client = _Client()
    started = asyncio.Event()

    async def work() -> None:
        started.set()
        await asyncio.Event().wait()

    request_task = asyncio.create_task(unless_disconnected(client.request, work()))
    await started.wait()
    request_task.cancel()  # the server shutting down, say: not the client's disconnect
    with pytest.raises(asyncio.CancelledError):
        await request_task
    assert request_task.cancelled()


async def test_work_that_finishes_despite_the_disconnect_gives_its_result() -> None:
    client = _Client()

    async def work() -> str:
        await client.receiving.wait()
        client.leave()
        with contextlib.suppress(asyncio.CancelledError):  # work that ends on its own terms
            await asyncio.Event().wait()
        return "stored"

    assert await unless_disconnected(client.request, work()) == "stored"
    assert _cancelling() == 0


class _Sink:
    """The ASGI send of a streamed response: what it was sent, and a hook once a piece is."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.ended = False
        self.piece = asyncio.Event()

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            self.bodies.append(message["body"])
            self.ended = not message.get("more_body", False)
            self.piece.set()


async def test_a_stream_ends_whole_when_the_client_stays() -> None:
    client, sink = _Client(), _Sink()

    async def events() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        await client.receiving.wait()  # the watcher listens while the stream goes on
        yield b"data: [DONE]\n\n"

    response = EventStreamResponse(events(), media_type="text/event-stream")
    await response({"type": "http"}, client.request.receive, sink)
    assert sink.bodies == [b"data: 1\n\n", b"data: [DONE]\n\n", b""]
    assert sink.ended
    assert _cancelling() == 0


async def test_a_stream_the_client_leaves_is_stopped_where_it_waits_and_closed() -> None:
    """The generation stops with the stream: the generator is cancelled at its wait and its
    clean-up runs; nothing more is sent, and the request's task is left uncancelled."""
    client, sink = _Client(), _Sink()
    never = asyncio.Event()
    closed: list[str] = []

    async def events() -> AsyncIterator[bytes]:
        try:
            yield b"data: 1\n\n"
            await never.wait()  # the upstream's next token, which never comes
            yield b"data: 2\n\n"
        finally:
            closed.append("generation stopped")

    response = EventStreamResponse(events(), media_type="text/event-stream")
    streaming = asyncio.create_task(response({"type": "http"}, client.request.receive, sink))
    await sink.piece.wait()
    await client.receiving.wait()
    client.leave()
    await streaming
    assert sink.bodies == [b"data: 1\n\n"]
    assert not sink.ended
    assert closed == ["generation stopped"]
    assert streaming.cancelling() == 0
