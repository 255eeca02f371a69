"""The store contract with several writers: appends at once, two store instances on one
database, writers that read the thread (or found it missing) before another wrote. SQLite and
PostgreSQL must agree: nothing lost, no seq given twice, a thread created once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import workingmem as wm
from tests.conftest import two_stores
from tests.helpers import assistant, never_counting, tool, user
from workingmem.stores.base import Tail

pytestmark = pytest.mark.asyncio


async def test_concurrent_appends_to_one_thread_lose_nothing(
    store: wm.ThreadStore, tenant: str
) -> None:
    """Many writers at once: every turn stored once, seqs dense and unique."""
    await asyncio.gather(
        *(
            store.append(tenant_id=tenant, thread_id="th", messages=[user(f"m{i}")])
            for i in range(20)
        )
    )
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.seq for t in turns] == list(range(1, 21))
    assert sorted(str(t.content) for t in turns) == sorted(f"m{i}" for i in range(20))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_store_instances_share_the_database(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    """Two stores on one database (two workers) see each other's turns; reopening migrates
    nothing twice."""
    async with two_stores(backend, tmp_path) as (first, second):
        await asyncio.gather(
            *(
                (first if i % 2 else second).append(
                    tenant_id=tenant, thread_id="th", messages=[user(f"m{i}")]
                )
                for i in range(10)
            )
        )
        turns = await second.list_turns(tenant_id=tenant, thread_id="th")
        assert [t.seq for t in turns] == list(range(1, 11))


GPT_4O = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))
GPT_4 = wm.tokenizer_for(wm.ModelInfo(id="gpt-4", context_window=1000))


async def _read(store: wm.ThreadStore, tenant: str, tok: wm.Tokenizer) -> Tail:
    return await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tok, limit=100)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_writers_that_read_the_thread_number_every_turn_once(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    """Writers that know the thread (they read it) append at once: every turn once, seqs
    dense, each turn counted at append; a tool call's result sent through the other writer
    joins the call's unit."""
    async with two_stores(backend, tmp_path) as (first, second):
        await first.append(tenant_id=tenant, thread_id="th", messages=[user("start")])
        for store in (first, second):
            await _read(store, tenant, GPT_4O)
        await asyncio.gather(
            *(
                (first if i % 2 else second).append(
                    tenant_id=tenant,
                    thread_id="th",
                    messages=[user(f"q{i}"), assistant(f"a{i}")],
                )
                for i in range(8)
            )
        )
        await first.append(
            tenant_id=tenant, thread_id="th", messages=[user("look"), assistant(None, "c1")]
        )
        await second.append(tenant_id=tenant, thread_id="th", messages=[tool("c1")])
        turns = (await _read(first, tenant, never_counting(GPT_4O))).turns
        assert [t.seq for t in turns] == list(range(1, 21))
        assert [t.unit_seq for t in turns[-3:]] == [18, 19, 19]
        for i in range(8):
            (question,) = [t for t in turns if t.message["content"] == f"q{i}"]
            assert turns[question.seq].message["content"] == f"a{i}"
        stored = await second.list_turns(tenant_id=tenant, thread_id="th")
        assert [t.tokens for t in turns] == [GPT_4O.count_message(t.to_message()) for t in stored]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_writers_that_found_no_thread_create_it_once(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    """Two writers that read a thread before it existed (a first request) append at once:
    one thread, every turn once, numbered from 1; a first append the store refuses (a tool
    result answering nothing) still creates nothing."""
    async with two_stores(backend, tmp_path) as (first, second):
        for store in (first, second):
            for thread in ("th", "refused"):
                with pytest.raises(wm.NotFoundError):
                    await store.read_tail(
                        tenant_id=tenant, thread_id=thread, tokenizer=GPT_4O, limit=10
                    )
        with pytest.raises(wm.ValidationError):
            await first.append(tenant_id=tenant, thread_id="refused", messages=[tool("nope")])
        with pytest.raises(wm.NotFoundError):
            await second.get_thread(tenant_id=tenant, thread_id="refused")
        await asyncio.gather(
            *(
                (first if i % 2 else second).append(
                    tenant_id=tenant, thread_id="th", messages=[user(f"m{i}")], user_id="u1"
                )
                for i in range(6)
            )
        )
        turns = await first.list_turns(tenant_id=tenant, thread_id="th")
        assert [t.seq for t in turns] == list(range(1, 7))
        assert sorted(str(t.content) for t in turns) == [f"m{i}" for i in range(6)]
        threads = await second.list_threads(tenant_id=tenant)
        assert [(t.thread_id, t.user_id, t.turn_count) for t in threads] == [("th", "u1", 6)]


async def test_a_thread_a_read_found_missing_is_created_counted_for_that_reads_model(
    store: wm.Store, tenant: str
) -> None:
    """A first request reads the thread (missing), then appends to it: the turns are counted
    as they are written, so the read after them counts nothing and stores nothing."""
    with pytest.raises(wm.NotFoundError):
        await _read(store, tenant, GPT_4O)
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("hi"), assistant("yo")])
    tail = await _read(store, tenant, never_counting(GPT_4O))
    assert [t.tokens for t in tail.turns] == [
        GPT_4O.count_message(user("hi")),
        GPT_4O.count_message(assistant("yo")),
    ]


@pytest.mark.parametrize("registered", [False, True], ids=["new-tokenizer", "registered"])
async def test_counts_of_a_read_whose_thread_was_deleted_meanwhile_are_dropped(
    store: wm.Store, tenant: str, registered: bool
) -> None:
    """A read counts turns and stores the counts after it, without reading the thread again:
    a thread deleted in between takes nothing and fails nothing (in the turns' rows and
    beside them)."""
    assert isinstance(store, wm.SQLStore)
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("hi")])
    await _read(store, tenant, GPT_4O)  # the thread's own tokenizer
    if registered:
        await _read(store, tenant, GPT_4)  # a second model's, counted beside the turns
    pk, seen = 0, ""
    async with store._dialect.read() as session:
        found = await session.row(
            "SELECT id, tokenizers FROM threads WHERE tenant_id = ? AND thread_id = ?",
            (tenant, "th"),
        )
        assert found is not None
        pk, seen = found
    await store.delete_thread(tenant_id=tenant, thread_id="th")
    await store._remember_counts(pk, GPT_4.key, {1: 5}, seen=seen)
    with pytest.raises(wm.NotFoundError):
        await store.get_thread(tenant_id=tenant, thread_id="th")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_an_append_counts_with_a_tokenizer_another_writer_registered(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    """A writer that last saw the thread with one tokenizer, after another writer read it
    for a second model: its append is counted with both."""
    async with two_stores(backend, tmp_path) as (first, second):
        await first.append(tenant_id=tenant, thread_id="th", messages=[user("hi")])
        await _read(first, tenant, GPT_4O)
        await _read(second, tenant, GPT_4)
        await first.append(tenant_id=tenant, thread_id="th", messages=[assistant("hello")])
        for tok in (GPT_4O, GPT_4):
            tail = await _read(second, tenant, never_counting(tok))
            assert tail.turns[-1].tokens == tok.count_message(assistant("hello"))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_an_append_after_another_writer_recreated_the_thread_goes_to_the_new_one(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    async with two_stores(backend, tmp_path) as (first, second):
        await first.append(tenant_id=tenant, thread_id="th", messages=[user("old")] * 3)
        await _read(first, tenant, GPT_4O)
        await second.delete_thread(tenant_id=tenant, thread_id="th")
        await second.append(tenant_id=tenant, thread_id="th", messages=[user("new")])
        await _read(second, tenant, GPT_4O)
        appended = await first.append(
            tenant_id=tenant, thread_id="th", messages=[assistant("answer")]
        )
        assert [t.seq for t in appended] == [2]
        turns = await second.list_turns(tenant_id=tenant, thread_id="th")
        assert [(t.seq, t.content) for t in turns] == [(1, "new"), (2, "answer")]
        thread = await second.get_thread(tenant_id=tenant, thread_id="th")
        assert thread.turn_count == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_writers_that_saw_the_thread_missing_make_it_once(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    """Two writers that read the thread missing append its first turns at once: one makes
    it, the other's turns follow them. One that saw a thread missing appends to it after
    another writer made it and emptied it."""
    async with two_stores(backend, tmp_path) as (first, second):
        for store in (first, second):
            with pytest.raises(wm.NotFoundError):
                await _read(store, tenant, GPT_4O)
        await asyncio.gather(
            first.append(tenant_id=tenant, thread_id="th", messages=[user("a"), assistant("b")]),
            second.append(tenant_id=tenant, thread_id="th", messages=[user("c")]),
        )
        turns = await second.list_turns(tenant_id=tenant, thread_id="th")
        assert [t.seq for t in turns] == [1, 2, 3]
        assert sorted(str(t.content) for t in turns) == ["a", "b", "c"]
        assert (await _read(first, tenant, GPT_4O)).thread.turn_count == 3

        with pytest.raises(wm.NotFoundError):
            await first.read_tail(tenant_id=tenant, thread_id="other", tokenizer=GPT_4O, limit=9)
        await second.append(tenant_id=tenant, thread_id="other", messages=[user("gone")])
        await second.read_tail(tenant_id=tenant, thread_id="other", tokenizer=GPT_4O, limit=9)
        await second.replace_turns(tenant_id=tenant, thread_id="other", messages=[])
        appended = await first.append(tenant_id=tenant, thread_id="other", messages=[user("x")])
        assert [t.seq for t in appended] == [1]
        thread = await second.get_thread(tenant_id=tenant, thread_id="other")
        assert thread.turn_count == 1
