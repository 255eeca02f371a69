"""The event loop a store lives on, and a private one for a framework's synchronous calls.

A PostgreSQL pool belongs to the loop it was opened on. A framework may call its memory from
async code (``ainvoke``, ``aget``) or from sync code on any thread (``invoke``, ``get``), so
every operation runs on the store's home loop: directly when the caller is on it, handed over
when the caller's loop is another one, and, for sync code, on a loop of our own in a daemon
thread (the home loop when a sync call comes first).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["HomeLoop"]

T = TypeVar("T")


class HomeLoop:
    """Runs coroutines on one loop, from async code on any loop or from sync code."""

    def __init__(self) -> None:
        self._home: asyncio.AbstractEventLoop | None = None
        self._private: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def claim(self) -> None:
        """Makes the running loop the home one, if there is none yet."""
        with self._lock:
            if self._home is None or self._home.is_closed():
                self._home = asyncio.get_running_loop()

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` on the home loop (the running one, when there is none yet)."""
        self.claim()
        home = self._home
        assert home is not None
        if home is asyncio.get_running_loop():
            return await work()
        if not home.is_running():
            raise RuntimeError(
                "this memory's store was opened on an event loop that has stopped; "
                "create the memory again in the loop that uses it"
            )
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_call(work), home))

    def run_sync(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` on the home loop, from synchronous code; blocks until it is done."""
        with self._lock:
            if self._home is None or self._home.is_closed():
                self._home = self._start_private()
            home = self._home
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is home:
            raise RuntimeError(
                "a synchronous memory call from inside the event loop that owns its store "
                "would wait for itself: call the async method (ainvoke, aget, ...) instead"
            )
        if not home.is_running():
            raise RuntimeError(
                "this memory's store was opened on an event loop that has stopped; "
                "create the memory again in the loop that uses it"
            )
        return asyncio.run_coroutine_threadsafe(_call(work), home).result()

    def close(self) -> None:
        """Stops the private loop, if one was started."""
        with self._lock:
            loop, thread = self._private, self._thread
            self._private = self._thread = None
            if self._home is loop:
                self._home = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    def _start_private(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name="workingmem-sync-loop", daemon=True)
        thread.start()
        ready.wait()
        self._private, self._thread = loop, thread
        return loop


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
