"""`unless_disconnected`: the work stops when the client goes, and only then.

Driven through a Starlette request over an ASGI receive that the test controls: the client's
disconnect is the ASGI message a server sends, when the test sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from starlette.requests import Request

from workingmem.service.disconnect import ClientDisconnectedError, unless_disconnected


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
