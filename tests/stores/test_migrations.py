"""A database written by an earlier version opens, migrates and keeps what it stored: here the
token counts that moved from ``turn_tokens`` into the turns' own rows (migration 8), so a thread's
first load after an upgrade counts nothing again, and the turns stored before the search index
(migration 10), which recall finds all the same, also once it indexes on demand (migration 11)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from tests.conftest import postgres_url
from workingmem.stores import ItemIndex, ItemPlace, ResponseStore
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


async def _stored_counts(url: str) -> tuple[list[int], list[int]]:
    """Thread "th"'s counts with the first tokenizer and with the other, as the store reads
    them after migrating (none counted again: `_Stored` would fail); its turns are found by
    their words."""
    async with await wm.open_store(url) as store:
        found = await store.search_turns(tenant_id="t", thread_id="th", query="turn")
        assert sorted(unit[0].seq or 0 for unit in found) == [1, 2]
        tails = [
            await store.read_tail(
                tenant_id="t", thread_id="th", tokenizer=_Stored(key), limit=10, tokens=1_000
            )
            for key in (OWN, OTHER)
        ]
    own, other = ([t.tokens for t in tail.turns] for tail in tails)
    return own, other


async def test_counts_stored_before_they_moved_into_the_turns_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    _database_at(path, 7)
    _counts_written_by_version_7(path)
    assert await _stored_counts(f"sqlite:///{path}") == ([101, 102], [201, 202])
    with sqlite3.connect(path) as db:
        moved = db.execute("SELECT seq, tokens FROM turns ORDER BY seq").fetchall()
        left = db.execute("SELECT DISTINCT tokenizer FROM turn_tokens").fetchall()
    assert moved == [(1, 101), (2, 102)]
    assert left == [(OTHER,)]  # the first tokenizer's rows moved, not copied


@contextlib.asynccontextmanager
async def _postgres_at(tenant: str, version: int) -> AsyncIterator[str]:
    """The URL of a PostgreSQL schema of its own, laid out as migrations 1..`version` left it;
    dropped after."""
    import psycopg

    schema = f"m{version}_{tenant.replace('-', '_')}"
    base = postgres_url()
    url = f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"
    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as admin:
        await admin.execute(f"CREATE SCHEMA {schema}")
    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
            await db.execute(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            for migration in load_migrations("postgres"):
                if migration.version > version:
                    break
                for statement in migration.statements:
                    await db.execute(statement)
                await db.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
        yield url
    finally:
        async with await psycopg.AsyncConnection.connect(base, autocommit=True) as admin:
            await admin.execute(f"DROP SCHEMA {schema} CASCADE")


async def test_postgres_counts_stored_before_they_moved_are_kept(tenant: str) -> None:
    """The same on PostgreSQL, in a schema of its own laid out as migration 7 left it."""
    import psycopg

    stamp = "2026-01-01T00:00:00+00:00"
    async with _postgres_at(tenant, 7) as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
            await db.execute(
                "INSERT INTO threads (tenant_id, thread_id, turn_count, last_unit_seq, "
                "tokenizers, created_at, updated_at) VALUES ('t', 'th', 2, 2, %s, %s, %s)",
                (json.dumps([OWN, OTHER]), stamp, stamp),
            )
            for seq, role in ((1, "user"), (2, "assistant")):
                message = json.dumps({"role": role, "content": f"turn {seq}"})
                await db.execute(
                    "INSERT INTO turns (thread_pk, seq, unit_seq, role, message, created_at) "
                    "SELECT id, %s, %s, %s, %s, %s FROM threads",
                    (seq, seq, role, message, stamp),
                )
                for key, tokens in ((OWN, 100 + seq), (OTHER, 200 + seq)):
                    await db.execute(
                        "INSERT INTO turn_tokens SELECT id, %s, %s, %s FROM threads",
                        (key, seq, tokens),
                    )
        assert await _stored_counts(url) == ([101, 102], [201, 202])
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
            moved = await (
                await db.execute("SELECT seq, tokens, tokens_through FROM turns ORDER BY seq")
            ).fetchall()
            summed = await (await db.execute("SELECT tokens_through FROM threads")).fetchall()
            left = await (await db.execute("SELECT DISTINCT tokenizer FROM turn_tokens")).fetchall()
        assert moved == [(1, 101, 101), (2, 102, 203)]  # and summed (migration 13)
        assert summed == [(203,)]
        assert left == [(OTHER,)]


async def test_turns_indexed_when_they_were_appended_stay_found(tmp_path: Path) -> None:
    """Turns a version-10 database indexed as it appended them are in the index already after
    the upgrade (migration 11 indexes on demand): found, and nothing left waiting."""
    path = tmp_path / "memory.db"
    _database_at(path, 10)
    _counts_written_by_version_7(path)  # v10's trigger indexes them as they are written
    async with await wm.open_store(f"sqlite:///{path}") as store:
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM unindexed_turns").fetchone() == (0,)
        found = await store.search_turns(tenant_id="t", thread_id="th", query="turn")
        assert sorted(unit[0].seq or 0 for unit in found) == [1, 2]
        await store.pop_turns(tenant_id="t", thread_id="th")  # out of the index
        again = {"role": "assistant", "content": "something else"}
        await store.append(tenant_id="t", thread_id="th", messages=[again])
        found = await store.search_turns(tenant_id="t", thread_id="th", query="turn")
        assert [[turn.content for turn in unit] for unit in found] == [["turn 1"]]


@pytest.mark.parametrize(
    ("version", "column", "value", "carried"),
    [
        (13, "", "", (None, None)),  # before migration 14 (carried instructions)
        (16, ", carried_instructions", ", '\"Be brief.\"'", ("Be brief.", None)),  # and 17
        (17, ", carried_tools", ", '[]'", (None, [])),  # before migration 18 (answer keys)
    ],
)
async def test_a_response_stored_before_a_column_it_carries_carries_none(
    version: int,
    column: str,
    value: str,
    carried: tuple[str | None, list[Any] | None],
    tmp_path: Path,
) -> None:
    """Migrations 14, 17 and 18 add the columns a response's carried instructions, tools and
    answer key live in: a response of an earlier version is read, and has none of them."""
    path = tmp_path / "memory.db"
    _database_at(path, version)
    stamp = "2026-01-01T00:00:00+00:00"
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute(
            "INSERT INTO threads (id, tenant_id, thread_id, turn_count, last_unit_seq, "
            "tokenizers, created_at, updated_at) VALUES (1, 't', 'th', 0, 0, '[]', ?, ?)",
            (stamp, stamp),
        )
        db.execute(
            "INSERT INTO responses (tenant_id, response_id, thread_pk, input_seq, output_seq, "
            f"last_seq, body{column}, created_at) "
            f"VALUES ('t', 'resp_1', 1, 1, 2, 2, '{{\"id\": \"resp_1\"}}'{value}, ?)",
            (stamp,),
        )
    async with await wm.open_store(f"sqlite:///{path}") as store:
        assert isinstance(store, ResponseStore)
        got = await store.get_response(tenant_id="t", response_id="resp_1")
    assert got.body == {"id": "resp_1"}
    assert (got.carried_instructions, got.carried_tools) == carried
    assert got.answer_key is None


def test_each_dialects_migrations_are_numbered_one_by_one() -> None:
    """A store records a migration by its number: two files of one number would leave the
    second unapplied on every database that has the first."""
    for dialect in ("sqlite", "postgres"):
        versions = [migration.version for migration in load_migrations(dialect)]
        assert versions == list(range(1, len(versions) + 1)), dialect


async def test_items_stored_before_their_index_are_found(tmp_path: Path) -> None:
    """Migration 15 indexes the items of the turns stored before it."""
    path = tmp_path / "memory.db"
    _database_at(path, 14)
    stamp = "2026-01-01T00:00:00+00:00"
    item = {"items": [{"id": "msg_old", "type": "message", "role": "assistant", "content": []}]}
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute(
            "INSERT INTO threads (id, tenant_id, thread_id, turn_count, last_unit_seq, "
            "tokenizers, created_at, updated_at) VALUES (1, 't', 'th', 1, 1, '[]', ?, ?)",
            (stamp, stamp),
        )
        db.execute(
            "INSERT INTO turns (thread_pk, seq, unit_seq, role, message, created_at, format, "
            "item) VALUES (1, 1, 1, 'assistant', ?, ?, 'openai.responses', ?)",
            (json.dumps({"role": "assistant", "content": ""}), stamp, json.dumps(item)),
        )
    async with await wm.open_store(f"sqlite:///{path}") as store:
        assert isinstance(store, ItemIndex)
        found = await store.find_item(tenant_id="t", item_id="msg_old")
    assert found == ItemPlace("th", 1)


async def test_postgres_items_stored_before_their_index_are_found(tenant: str) -> None:
    """Migration 16 indexes the items of the turns stored before it, on PostgreSQL."""
    import psycopg

    item = {"items": [{"id": "msg_old", "type": "message"}, {"type": "message"}]}
    async with _postgres_at(tenant, 15) as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
            await db.execute(
                "INSERT INTO threads (tenant_id, thread_id, turn_count, last_unit_seq, "
                "tokenizers, created_at, updated_at) VALUES ('t', 'th', 1, 1, '[]', now(), now())"
            )
            await db.execute(
                "INSERT INTO turns (thread_pk, seq, unit_seq, role, message, created_at, format, "
                "item) SELECT id, 1, 1, 'assistant', %s, now(), 'openai.responses', %s "
                "FROM threads",
                (json.dumps({"role": "assistant", "content": ""}), json.dumps(item)),
            )
        async with await wm.open_store(url) as store:
            assert isinstance(store, ItemIndex)
            found = await store.find_item(tenant_id="t", item_id="msg_old")
    assert found == ItemPlace("th", 1)
