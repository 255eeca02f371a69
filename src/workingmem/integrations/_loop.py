"""The event loop a memory's store and background updates live on.

A framework may call its memory from async code on any loop (``ainvoke``, ``aget``), from sync
code on any thread (``invoke``, ``get``, ``run_sync``), and from short-lived loops that a thread
makes for one call. A PostgreSQL pool and the background queue belong to one loop, so every
operation runs on the memory's home loop:

- a store the memory opens itself (given as a URL) lives on a loop of the memory's own, in a
  daemon thread: any caller hands its work over and waits, and the summary updates run there
  whatever becomes of the caller's loops;
- a store the application opened lives on the application's loop: the first loop that uses the
  memory is its home; a caller on another loop hands its work over while the home loop runs,
  and takes the home over once it has stopped (a SQLite store works on any loop; a PostgreSQL
  pool only on its own).
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

    def __init__(self, *, private: bool) -> None:
        """`private`: the home is a loop of this object's own, started on first use."""
        self._private = private
        self._home: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` on the home loop."""
        running = asyncio.get_running_loop()
        home = self._home_for(running)
        if home is running:
            return await work()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_call(work), home))

    def run_sync(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` on the home loop, from synchronous code; blocks until it is done."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        with self._lock:
            if self._private or self._home is None or self._home.is_closed():
                home = self._start_private() if self._private else self._adopt_private()
            else:
                home = self._home
        if home is running:
            raise RuntimeError(
                "a synchronous memory call from inside the event loop that owns its store "
                "would wait for itself: call the async method (ainvoke, aget, ...) instead"
            )
        if not home.is_running():  # the application's loop, stopped: run it for this call
            return home.run_until_complete(_call(work))
        return asyncio.run_coroutine_threadsafe(_call(work), home).result()

    def on_home(self) -> bool:
        """Whether the caller runs on the home loop (and so must not block on it)."""
        try:
            return asyncio.get_running_loop() is self._home
        except RuntimeError:
            return False

    def close(self) -> None:
        """Stops the memory's own loop, if it started one."""
        with self._lock:
            loop, thread = (self._home, self._thread) if self._thread is not None else (None, None)
            self._thread = None
            if loop is not None:
                self._home = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not threading.current_thread():
                thread.join()
                loop.close()

    def _home_for(self, running: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._private:
                return self._start_private()
            home = self._home
            if home is None or home.is_closed() or (home is not running and not home.is_running()):
                self._home = home = running  # the first loop, or the next once the last stopped
            return home

    def _start_private(self) -> asyncio.AbstractEventLoop:
        if self._home is not None and self._thread is not None:
            return self._home
        return self._adopt_private()

    def _adopt_private(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name="workingmem-memory-loop", daemon=True)
        thread.start()
        ready.wait()
        self._home, self._thread = loop, thread
        return loop


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
