"""A database written by an earlier version opens, migrates and keeps what it stored: here the
token counts that moved from ``turn_tokens`` into the turns' own rows (migration 8), so a thread's
first load after an upgrade counts nothing again."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import workingmem as wm
from workingmem.stores.migrations import load_migrations

OWN = "tiktoken:o200k_base"
OTHER = "tiktoken:cl100k_base"


def _database_at(path: Path, version: int) -> None:
    """A SQLite file with the schema as migrations 1..`version` left it."""
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute(
            "CREATE TABLE schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        for migration in load_migrations("sqlite"):
            if migration.version > version:
                break
            for statement in migration.statements:
                db.execute(statement)
            db.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01T00:00:00+00:00')",
                (migration.version, migration.name),
            )


def _counts_written_by_version_7(path: Path) -> None:
    stamp = "2026-01-01T00:00:00+00:00"
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute(
            "INSERT INTO threads (id, tenant_id, thread_id, turn_count, last_unit_seq, tokenizers, "
            "created_at, updated_at) VALUES (1, 't', 'th', 2, 2, ?, ?, ?)",
            (json.dumps([OWN, OTHER]), stamp, stamp),
        )
        for seq, role in ((1, "user"), (2, "assistant")):
            message = json.dumps({"role": role, "content": f"turn {seq}"})
            db.execute(
                "INSERT INTO turns (thread_pk, seq, unit_seq, role, message, created_at) "
                "VALUES (1, ?, ?, ?, ?, ?)",
                (seq, seq, role, message, stamp),
            )
            db.execute("INSERT INTO turn_tokens VALUES (1, ?, ?, ?)", (OWN, seq, 100 + seq))
            db.execute("INSERT INTO turn_tokens VALUES (1, ?, ?, ?)", (OTHER, seq, 200 + seq))


class _Stored:
    """A tokenizer that must never count: every count has to come from the database."""

    exact = True
    reply_overhead = 3

    def __init__(self, key: str) -> None:
        self.key = key

    def count_text(self, text: str) -> int:
        raise AssertionError("re-counted a turn whose count was stored")

    def count_message(self, message: wm.MessageIn) -> int:
        raise AssertionError("re-counted a turn whose count was stored")


async def test_counts_stored_before_they_moved_into_the_turns_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    _database_at(path, 7)
    _counts_written_by_version_7(path)
    async with await wm.open_store(f"sqlite:///{path}") as store:
        own = await store.read_tail(
            tenant_id="t", thread_id="th", tokenizer=_Stored(OWN), limit=10, tokens=1_000
        )
        other = await store.read_tail(
            tenant_id="t", thread_id="th", tokenizer=_Stored(OTHER), limit=10, tokens=1_000
        )
    assert [t.tokens for t in own.turns] == [101, 102]
    assert [t.tokens for t in other.turns] == [201, 202]
    with sqlite3.connect(path) as db:
        moved = db.execute("SELECT seq, tokens FROM turns ORDER BY seq").fetchall()
        left = db.execute("SELECT DISTINCT tokenizer FROM turn_tokens").fetchall()
    assert moved == [(1, 101), (2, 102)]
    assert left == [(OTHER,)]  # the first tokenizer's rows moved, not copied
