"""SQLite window reads on the store's own loop thread: never waiting on a writer, and handed to
the reader's thread when SQLite says to wait, or on another thread."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assistant, user
from workingmem.stores import sqlite as sqlite_store
from workingmem.stores._dialect import TailRead

GPT_4O = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))


async def _tail(store: wm.ThreadStore) -> list[str]:
    tail = await store.read_tail(tenant_id="t", thread_id="th", tokenizer=GPT_4O, limit=10)
    return [str(t.message["content"]) for t in tail.turns]


async def test_a_window_read_while_another_process_writes_sees_what_was_committed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    async with await wm.open_store(str(path)) as store:
        await store.append(tenant_id="t", thread_id="th", messages=[user("q"), assistant("a")])
        assert await _tail(store) == ["q", "a"]  # counted and remembered: reads only from here
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process's write, not committed yet
            other.execute('UPDATE turns SET message = \'{"role":"user","content":"x"}\'')
            assert await _tail(store) == ["q", "a"]
            other.execute("COMMIT")
            assert await _tail(store) == ["x", "x"]
        finally:
            other.close()


async def test_a_read_sqlite_tells_to_wait_is_handed_to_the_readers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await wm.open_store(str(tmp_path / "memory.db")) as store:
        await store.append(tenant_id="t", thread_id="th", messages=[user("q")])
        loop_thread = threading.get_ident()
        read = sqlite_store._read_tail
        threads: list[int] = []

        def busy_on_the_loop(db: sqlite3.Connection, request: TailRead) -> Any:
            threads.append(threading.get_ident())
            if threading.get_ident() == loop_thread:
                busy = sqlite3.OperationalError("database is locked")
                busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
                raise busy
            return read(db, request)

        monkeypatch.setattr(sqlite_store, "_read_tail", busy_on_the_loop)
        assert await _tail(store) == ["q"]
        assert threads[0] == loop_thread
        assert threads[1] != loop_thread


async def test_another_thread_reads_through_the_readers_thread(tmp_path: Path) -> None:
    """The loop's connection stays on the loop's thread: a read from another thread (another
    event loop) goes through the reader's thread and sees the same."""
    async with await wm.open_store(str(tmp_path / "memory.db")) as store:
        await store.append(tenant_id="t", thread_id="th", messages=[user("q")])
        assert await _tail(store) == ["q"]
        elsewhere = await asyncio.to_thread(asyncio.run, _tail(store))
        assert elsewhere == ["q"]


async def test_a_tails_turns_are_ordinary_frozen_counted_turns(tmp_path: Path) -> None:
    """The tail's turns are built without the dataclass's constructor (a long window builds
    thousands): they compare, print and refuse changes like any `CountedTurn`."""
    question: wm.ChatMessage = {"role": "user", "content": "q"}
    answer: wm.ChatMessage = {"role": "assistant", "content": "a"}
    async with await wm.open_store(str(tmp_path / "memory.db")) as store:
        await store.append(tenant_id="t", thread_id="th", messages=[question, answer])
        tail = await store.read_tail(tenant_id="t", thread_id="th", tokenizer=GPT_4O, limit=10)
    expected = [
        wm.CountedTurn(seq=1, unit_seq=1, message=question, tokens=GPT_4O.count_message(question)),
        wm.CountedTurn(seq=2, unit_seq=2, message=answer, tokens=GPT_4O.count_message(answer)),
    ]
    assert tail.turns == expected
    assert [repr(t) for t in tail.turns] == [repr(t) for t in expected]
    assert type(tail.turns[0]) is wm.CountedTurn
    with pytest.raises(dataclasses.FrozenInstanceError):
        tail.turns[0].tokens = 0  # type: ignore[misc]
