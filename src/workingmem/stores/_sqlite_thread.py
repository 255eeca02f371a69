"""One sqlite3 connection and the one thread that runs it: a call is one trip to that thread.

    db = await Connection.open("memory.db")
    rows = await db.call(lambda c: c.execute("SELECT 1").fetchall())

A driver that makes every statement, fetch and cursor close its own trip between the event loop
and its thread pays that trip (tens of microseconds) several times per operation. Here a store
operation hands the thread one function that runs all its statements, so a read of a thread's
window is one trip, as a synchronous `sqlite3` read would be, without blocking the loop.

Calls run in the order they were made, each to its end, even when the task awaiting it is
cancelled (a client that went away): what `SQLiteDialect` relies on to end a transaction a
cancelled holder left open. `idle` tells when nothing handed to the thread is left to run, for
a caller that may then do the work on its own thread instead (`SQLiteDialect`'s inline
connections) without passing anything queued before it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["Connection"]

T = TypeVar("T")

_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA busy_timeout = 10000",
)


class Connection:
    """A sqlite3 connection in autocommit mode (transactions are explicit), used only from
    its own single worker thread."""

    def __init__(self, db: sqlite3.Connection, worker: ThreadPoolExecutor) -> None:
        self._db = db
        self._worker = worker
        self._sent = 0
        """Calls handed to the thread (under `_sending`: any thread may hand one)."""
        self._ran = 0
        """Calls the thread has finished (written by the thread alone)."""
        self._sending = threading.Lock()

    @classmethod
    async def open(cls, path: str) -> Connection:
        """Connects in the worker thread and sets WAL mode and the pragmas every use needs."""
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="workingmem-sqlite")

        def connect() -> sqlite3.Connection:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            try:
                for pragma in _PRAGMAS:
                    db.execute(pragma)
            except BaseException:
                db.close()
                raise
            return db

        try:
            db = await asyncio.get_running_loop().run_in_executor(worker, connect)
        except BaseException:
            worker.shutdown(wait=False)
            raise
        return cls(db, worker)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Runs `fn` with the connection in its thread: one trip, whatever `fn` runs."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._counted(fn), self._db)

    def submit(self, fn: Callable[[sqlite3.Connection], object]) -> None:
        """Queues `fn` behind every call made so far, without waiting for it."""
        self._worker.submit(self._counted(fn), self._db)

    @property
    def idle(self) -> bool:
        """Nothing handed to the thread is queued or running, and its connection has no
        transaction open (one a cancelled holder left is ended by the next call)."""
        return self._ran == self._sent and not self._db.in_transaction

    def _counted(self, fn: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
        with self._sending:
            self._sent += 1

        def run(db: sqlite3.Connection) -> T:
            try:
                return fn(db)
            finally:
                self._ran += 1

        return run

    async def close(self) -> None:
        """Closes the connection after every call made before it, then ends the thread."""
        try:
            await self.call(lambda db: db.close())
        finally:
            self._worker.shutdown(wait=False)
