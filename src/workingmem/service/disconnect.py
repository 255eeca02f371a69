"""Work that stops when the client goes away.

    result = await unless_disconnected(request, gateway.ask(...))

A client that disconnects before its answer is ready will never read it: the model's work is
cancelled (the local model stops generating at its next token) and nothing more is stored for
it. A streamed answer needs none of this: Starlette closes the stream's generator on a
disconnect, and closing it stops the generation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi import Request

__all__ = ["ClientDisconnectedError", "unless_disconnected"]

T = TypeVar("T")


class ClientDisconnectedError(Exception):
    """The client went away before the work was done; the work was cancelled."""


async def unless_disconnected(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """The work's result; `ClientDisconnectedError` once the client has gone (the work cancelled).

    The request's body must have been read already: the next ASGI message is then the
    disconnect, whenever it comes.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():  # the client left, or this request itself was cancelled
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if task.cancelled():
        raise ClientDisconnectedError("the client disconnected before the answer was ready")
    return task.result()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
