"""One sqlite3 connection and the one thread that runs it: a call is one trip to that thread.

    db = await Connection.open("memory.db")
    rows = await db.call(lambda c: c.execute("SELECT 1").fetchall())

A driver that makes every statement, fetch and cursor close its own trip between the event loop
and its thread pays that trip (tens of microseconds) several times per operation. Here a store
operation hands the thread one function that runs all its statements, so a read of a thread's
window is one trip, as a synchronous `sqlite3` read would be, without blocking the loop.

Calls run in the order they were made, each to its end, even when the task awaiting it is
cancelled (a client that went away): what `SQLiteDialect` relies on to end a transaction a
cancelled holder left open.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

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
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, self._db)

    def submit(self, fn: Callable[[sqlite3.Connection], object]) -> None:
        """Queues `fn` behind every call made so far, without waiting for it."""
        self._worker.submit(fn, self._db)

    async def fetchall(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return await self.call(lambda db: db.execute(sql, params).fetchall())

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Runs one statement; the rows it changed."""
        return await self.call(lambda db: db.execute(sql, params).rowcount)

    async def executemany(self, sql: str, params: Sequence[Sequence[object]]) -> None:
        await self.call(lambda db: db.executemany(sql, params))

    @property
    def in_transaction(self) -> bool:
        return self._db.in_transaction

    async def close(self) -> None:
        """Closes the connection after every call made before it, then ends the thread."""
        try:
            await self.call(lambda db: db.close())
        finally:
            self._worker.shutdown(wait=False)
