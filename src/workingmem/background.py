"""The background queue: memory updates off the request path, one at a time per thread.

    async with BackgroundQueue(workers=4) as queue:
        queue.submit(("t1", "th1"), lambda: memory.save_context(...))   # returns at once
        await queue.when_idle()                                           # tests, shutdown

- `submit` never blocks and never raises into the caller.
- Jobs of one key (a thread) run one at a time, and coalesce: submits that arrive while a
  job of the key waits replace it; submits while it runs give exactly one more run after it,
  not one per submit. Each job reads what is due from the store, so the last run covers all.
- A failing job is logged and counted (`failures`), never raised.
- `aclose()` drains what is queued (or, with `cancel=True`, cancels it) and stops the workers.
  The queue is an owned resource: start it with the app's lifespan, close it there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from types import TracebackType
from typing import Self

__all__ = ["BackgroundQueue", "Job"]

logger = logging.getLogger("workingmem.background")

Job = Callable[[], Awaitable[object]]


class BackgroundQueue:
    """Per-key single-flight, coalescing job queue on a fixed set of worker tasks."""

    def __init__(self, *, workers: int = 4) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self._size = workers
        self._ready: asyncio.Queue[Hashable] = asyncio.Queue()
        self._waiting: dict[Hashable, Job] = {}  # queued, not started: the newest job wins
        self._running: set[Hashable] = set()
        self._again: dict[Hashable, Job] = {}  # submitted while running: one more run
        self._workers: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self.completed = 0
        self.failures = 0

    @property
    def depth(self) -> int:
        """Jobs waiting or running."""
        return len(self._waiting) + len(self._running) + len(self._again)

    def start(self) -> None:
        """Starts the workers; `submit` and `async with` call it when needed."""
        if self._closed:
            raise RuntimeError("the background queue is closed")
        if not self._workers:
            self._workers = [
                asyncio.create_task(self._work(), name=f"workingmem-background-{i}")
                for i in range(self._size)
            ]

    def submit(self, key: Hashable, job: Job) -> bool:
        """Queues `job` for `key`; False (and a log line) when the queue is closed."""
        if self._closed:
            logger.warning("background queue closed: job for %r dropped", key)
            return False
        self.start()
        self._idle.clear()
        if key in self._running:
            self._again[key] = job
        elif key in self._waiting:
            self._waiting[key] = job
        else:
            self._waiting[key] = job
            self._ready.put_nowait(key)
        return True

    async def when_idle(self) -> None:
        """Returns once nothing waits or runs."""
        await self._idle.wait()

    async def aclose(self, *, cancel: bool = False) -> None:
        """Stops taking jobs; finishes the queued ones (or cancels them), then the workers."""
        self._closed = True
        if cancel:
            self._waiting.clear()
            self._again.clear()
        else:
            await self.when_idle()
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        self._idle.set()

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _work(self) -> None:
        while True:
            key = await self._ready.get()
            job = self._waiting.pop(key, None)
            if job is None:  # cancelled by aclose(cancel=True)
                self._settle()
                continue
            self._running.add(key)
            try:
                await job()
                self.completed += 1
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures += 1
                logger.exception("background job for %r failed", key)
            finally:
                self._running.discard(key)
                again = self._again.pop(key, None)
                if again is not None and key not in self._waiting:
                    self._waiting[key] = again
                    self._ready.put_nowait(key)
                self._settle()
            # A job whose clean-up raised over its cancellation (a store closed under it)
            # swallowed it: the worker stops all the same, or a loop that shuts down waits for
            # it forever.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError

    def _settle(self) -> None:
        if not self._waiting and not self._running and not self._again:
            self._idle.set()
