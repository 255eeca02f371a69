"""Where threads live: the ThreadStore protocol, SQLite (default) and PostgreSQL.

    async with await open_store() as store:          # .workingmem/memory.db
        ...
    async with await open_store("postgresql://app@db:5432/memory") as store:
        ...

`open_store(None)` reads ``WORKINGMEM_DATABASE_URL`` and falls back to the SQLite file
``.workingmem/memory.db`` under the current folder: no set-up needed.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import ValidationError
from .base import (
    AskLockStore,
    Claim,
    MemoryStateStore,
    PooledStore,
    StateWrite,
    Store,
    Tail,
    ThreadStore,
    TurnsAtStore,
    TurnSearchStore,
    TurnStore,
)
from .completions import CompletionStore
from .items import ItemIndex, ItemPlace
from .records import KeptRecords, RecordStore
from .responses import ResponseStore
from .sql import SQLStore
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "DEFAULT_SQLITE_PATH",
    "AskLockStore",
    "Claim",
    "CompletionStore",
    "ItemIndex",
    "ItemPlace",
    "KeptRecords",
    "MemoryStateStore",
    "PooledStore",
    "PostgresStore",
    "RecordStore",
    "ResponseStore",
    "SQLStore",
    "SQLiteStore",
    "StateWrite",
    "Store",
    "Tail",
    "ThreadStore",
    "TurnSearchStore",
    "TurnStore",
    "TurnsAtStore",
    "open_store",
]

DEFAULT_SQLITE_PATH = ".workingmem/memory.db"
DATABASE_URL_ENV = "WORKINGMEM_DATABASE_URL"


async def open_store(url: str | None = None) -> SQLiteStore | PostgresStore:
    """Opens (and migrates) the store a URL names.

    Args:
        url: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``,
            ``sqlite:///:memory:``, a plain file path (SQLite), or
            ``postgresql://user:password@host:port/db``. None reads ``WORKINGMEM_DATABASE_URL``,
            else uses ``.workingmem/memory.db``.
    """
    target = url if url is not None else os.environ.get(DATABASE_URL_ENV) or DEFAULT_SQLITE_PATH
    if not isinstance(target, str) or not target.strip():
        raise ValidationError("url", "must be a database URL or a file path")
    if target.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return await PostgresStore.open(target)
    if target.startswith("sqlite://"):
        path = target.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise ValidationError("url", f"a SQLite URL is sqlite:///path.db, got {target!r}")
        return await SQLiteStore.open(path[1:])
    if "://" in target:
        scheme = target.split("://", 1)[0]
        raise ValidationError(
            "url", f"unsupported database scheme {scheme!r}; use sqlite or postgresql"
        )
    return await SQLiteStore.open(target)


def __getattr__(name: str) -> object:
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)
