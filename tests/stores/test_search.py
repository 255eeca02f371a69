"""Recall's search (`search_turns`): a thread's turns found by their words through each
database's full-text index, ranked, whole units, scoped to the tenant's thread, and in step
with every way turns are written or removed; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

import workingmem as wm
from tests.conftest import BACKENDS, open_backend, postgres_url
from tests.locomo import locomo_exchanges
from workingmem.stores._search import terms as _search_terms

CHAT: list[Any] = [
    {"role": "user", "content": "We adopted a puppy named Rex last spring."},
    {"role": "assistant", "content": "Congratulations! What breed is Rex?"},
    {"role": "user", "content": "A terrier. My sister Ana painted a portrait of him."},
    {"role": "assistant", "content": "A painted portrait sounds lovely."},
    {"role": "user", "content": "Also I started running: a 10k race in June."},
    {"role": "assistant", "content": "Good luck with the race!"},
]


def seqs(units: list[list[wm.Turn]]) -> list[list[int | None]]:
    return [[turn.seq for turn in unit] for unit in units]


async def search(store: wm.Store, tenant: str, query: str, **kw: Any) -> list[list[wm.Turn]]:
    assert isinstance(store, wm.stores.TurnSearchStore)
    return await store.search_turns(tenant_id=tenant, thread_id="th", query=query, **kw)


async def test_turns_are_found_by_their_stemmed_words_best_first(
    store: wm.Store, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=CHAT)
    assert seqs(await search(store, tenant, "When did we adopt the puppy?")) == [[1]]
    assert sorted(seqs(await search(store, tenant, "races"))) == [[5], [6]]
    # "portrait" is in two turns, "sister" in one: the turn with both ranks first
    found = seqs(await search(store, tenant, "my sister's portrait"))
    assert found[0] == [3]
    assert sorted(found) == [[3], [4]]
    assert await search(store, tenant, "what was it about?") == []  # common words only
    assert await search(store, tenant, "") == []
    assert await search(store, tenant, "submarine") == []


async def test_only_turns_before_the_window_and_at_most_the_limit(
    store: wm.Store, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=CHAT)
    assert seqs(await search(store, tenant, "race portrait Rex", before_seq=5)) != []
    assert all(
        turn.seq is not None and turn.seq < 3
        for unit in await search(store, tenant, "race portrait Rex", before_seq=3)
        for turn in unit
    )
    assert await search(store, tenant, "race", before_seq=5) == []
    assert len(await search(store, tenant, "race portrait Rex terrier", limit=2)) == 2
    for bad, field in [({"limit": 0}, "limit"), ({"before_seq": 0}, "before_seq")]:
        with pytest.raises(wm.ValidationError) as refused:
            await search(store, tenant, "race", **bad)
        assert refused.value.field == field


async def test_a_hit_brings_its_whole_unit_with_dates(store: wm.Store, tenant: str) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[
            {"role": "user", "content": "Will it rain in Lyon?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "Drizzle, 14 degrees."},
            {"role": "assistant", "content": "Light drizzle today."},
        ],
    )
    units = await search(store, tenant, "drizzle degrees")
    assert seqs(units) == [[2, 3], [4]]  # the result's unit: the call with it
    assert units[0][0].tool_calls[0].name == "weather"
    assert all(turn.created_at is not None for unit in units for turn in unit)
    assert seqs(await search(store, tenant, "weather")) == [[2, 3]]  # a call's name


async def test_never_another_threads_or_tenants_turns(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=CHAT[:2])
    await store.append(tenant_id=tenant, thread_id="other", messages=CHAT[2:4])
    await store.append(tenant_id=tenant + "-b", thread_id="th", messages=CHAT[2:4])
    assert await search(store, tenant, "portrait") == []
    assert [t.content for u in await search(store, tenant, "puppy") for t in u] == [
        CHAT[0]["content"]
    ]
    assert isinstance(store, wm.stores.TurnSearchStore)
    with pytest.raises(wm.NotFoundError):
        await store.search_turns(tenant_id=tenant + "-c", thread_id="th", query="puppy")


async def test_the_index_follows_every_write(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=CHAT)
    await store.pop_turns(tenant_id=tenant, thread_id="th")  # "Good luck with the race!"
    assert seqs(await search(store, tenant, "race")) == [[5]]
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[{"role": "user", "content": "Actually it was a marathon."}],
        after_seq=4,
    )
    assert await search(store, tenant, "race") == []
    assert seqs(await search(store, tenant, "marathon")) == [[5]]
    await store.replace_turns(
        tenant_id=tenant,
        thread_id="th",
        messages=[*CHAT[:2], {"role": "user", "content": "No sister, a brother."}],
    )
    assert seqs(await search(store, tenant, "sister brother marathon")) == [[3]]
    await store.fork_thread(tenant_id=tenant, source_id="th", thread_id="fork", through_seq=2)
    assert isinstance(store, wm.stores.TurnSearchStore)
    forked = await store.search_turns(tenant_id=tenant, thread_id="fork", query="Rex sister")
    assert sorted(seqs(forked)) == [[1], [2]]
    await store.delete_thread(tenant_id=tenant, thread_id="th")
    await store.append(tenant_id=tenant, thread_id="th", messages=CHAT[4:5])
    assert seqs(await search(store, tenant, "puppy brother race")) == [[1]]
    assert seqs(await store.search_turns(tenant_id=tenant, thread_id="fork", query="Rex")) != []


async def _unindexed(backend: str, tmp_path: Path, tenant: str) -> int:
    """How many of the tenant's turns wait for their words to enter the index."""
    if backend == "sqlite":
        with sqlite3.connect(tmp_path / "memory.db") as db:
            return int(db.execute("SELECT count(*) FROM unindexed_turns").fetchone()[0])
    async with await psycopg.AsyncConnection.connect(postgres_url()) as db:
        cursor = await db.execute(
            "SELECT count(*) FROM turns AS t JOIN threads AS th ON th.id = t.thread_pk "
            "WHERE th.tenant_id = %s AND t.search IS NULL",
            (tenant,),
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_turn_is_indexed_once_a_search_reaches_it(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    """A turn's words enter the index when a search first reaches the turn, not in the append
    (an FTS5 segment, a tsvector and its GIN entries cost more than the rest of an append): a
    search sees every turn of its range as stored now, whatever was appended, removed or
    edited since the last one, and turns it does not reach wait."""
    marathon = {"role": "user", "content": "No race: a marathon."}

    async def unindexed() -> int:
        return await _unindexed(backend, tmp_path, tenant)

    async with await open_backend(backend, tmp_path) as store:
        await store.append(tenant_id=tenant, thread_id="th", messages=CHAT[:4])
        assert await unindexed() == 4
        assert seqs(await search(store, tenant, "puppy", before_seq=2)) == [[1]]
        assert await unindexed() == (0 if backend == "sqlite" else 3)  # PG: its range alone
        await store.append(tenant_id=tenant, thread_id="th", messages=CHAT[4:])
        assert await search(store, tenant, "race", before_seq=5) == []
        assert await unindexed() == 2  # after the range: left for a later search
        await store.pop_turns(tenant_id=tenant, thread_id="th")  # turn 6, never indexed
        await store.append(tenant_id=tenant, thread_id="th", messages=[CHAT[5]])  # 6 again
        # an edit after turn 2: indexed turns 3 and 4 go, and 5 and 6, which were not
        await store.append(tenant_id=tenant, thread_id="th", messages=[marathon], after_seq=2)
        assert await search(store, tenant, "portrait sister terrier") == []
        assert seqs(await search(store, tenant, "race marathon")) == [[3]]
        assert await unindexed() == 0
        await store.append(tenant_id=tenant, thread_id="th", messages=CHAT[1:2])
        await store.delete_thread(tenant_id=tenant, thread_id="th")  # indexed and not
        assert await unindexed() == 0  # no row of a deleted turn stays behind
        await store.append(tenant_id=tenant, thread_id="th", messages=CHAT[4:5])
        assert seqs(await search(store, tenant, "puppy marathon race Rex")) == [[1]]


async def test_a_search_that_waits_for_another_ones_index_sees_its_turns(tenant: str) -> None:
    """PostgreSQL: a search whose turns another search is indexing waits for it, then finds
    them (its statement reads after its index update, in a new snapshot), not a range that
    neither of the two gave a vector."""
    url = postgres_url()
    async with await wm.open_store(url) as store:
        await store.append(tenant_id=tenant, thread_id="th", messages=CHAT[:4])
        async with (
            await psycopg.AsyncConnection.connect(url) as other,
            await psycopg.AsyncConnection.connect(url, autocommit=True) as watch,
        ):
            # another search's index of the same turns, not committed yet: it holds their rows
            await other.execute(
                "UPDATE turns SET search = to_tsvector('english'::regconfig, "
                "workingmem_turn_words(message)) FROM threads AS th "
                "WHERE th.id = turns.thread_pk AND th.tenant_id = %s AND turns.search IS NULL",
                (tenant,),
            )
            searching = asyncio.create_task(search(store, tenant, "portrait"))
            for _ in range(1_000):  # until the database says the search waits for `other`
                if await _waits_for(watch, other.info.backend_pid):
                    break
                await asyncio.sleep(0.01)
            else:
                pytest.fail("the search never waited for the other index's rows")
            await other.commit()
            assert sorted(seqs(await searching)) == [[3], [4]]


async def _waits_for(watch: psycopg.AsyncConnection[Any], pid: int) -> bool:
    """Whether some backend waits for a lock that `pid` holds."""
    cursor = await watch.execute(
        "SELECT 1 FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
    )
    return await cursor.fetchone() is not None


_LEXEME = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")


def _lexemes(vector: str) -> dict[str, int]:
    """A tsvector's text as {lexeme: occurrences} (its positions, or 1 without any)."""
    return {
        match[1].replace("''", "'"): len(match[2].split(",")) if match[2] else 1
        for match in _LEXEME.finditer(vector)
    }


def _bm25(turns: dict[int, dict[str, int]], terms: set[str], before_seq: int) -> dict[int, float]:
    """BM25 (k1 1.2, b 0.75) as the store documents it: a word's rarity among the thread's
    turns before `before_seq`, a turn's length in lexemes against the matched turns' mean."""
    pairs = [(seq, t) for seq, lex in turns.items() if seq < before_seq for t in terms & set(lex)]
    if not pairs:
        return {}
    df = {t: sum(1 for _, u in pairs if u == t) for t in terms}
    mean = max(sum(len(turns[seq]) for seq, _ in pairs) / len(pairs), 1.0)
    scores: dict[int, float] = {}
    for seq, t in pairs:
        tf, words = turns[seq][t], len(turns[seq])
        idf = math.log(1.0 + (before_seq - 1 - df[t] + 0.5) / (df[t] + 0.5))
        scores[seq] = scores.get(seq, 0.0) + idf * tf * 2.2 / (
            tf + 1.2 * (0.25 + 0.75 * words / mean)
        )
    return scores


async def test_postgres_ranks_a_real_conversation_by_bm25(tenant: str) -> None:
    """PostgreSQL's ranking is BM25 over the turns' stored vectors, computed here again from
    them for questions of a real conversation: the same turns found, best first."""
    url = postgres_url()
    exchanges = locomo_exchanges(80)
    messages: list[Any] = [
        {"role": role, "content": text}
        for exchange in exchanges
        for role, text in (("user", exchange.question), ("assistant", exchange.answer))
    ]
    async with await wm.open_store(url) as store:
        await store.append(tenant_id=tenant, thread_id="th", messages=messages)
        await search(store, tenant, "index everything")  # every turn gets its vector
        async with await psycopg.AsyncConnection.connect(url) as db:
            cursor = await db.execute(
                "SELECT t.seq, t.search::text FROM turns AS t JOIN threads AS th "
                "ON th.id = t.thread_pk WHERE th.tenant_id = %s",
                (tenant,),
            )
            turns = {seq: _lexemes(vector) for seq, vector in await cursor.fetchall()}
            for question in [e.question for e in exchanges[-10:]]:
                cursor = await db.execute(
                    "SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', %s))",
                    (" ".join(_search_terms(question)),),
                )
                terms = {row[0] for row in await cursor.fetchall()}
                before = len(messages) - 20
                scores = _bm25(turns, terms, before)
                found = [
                    unit[0].seq
                    for unit in await search(store, tenant, question, before_seq=before, limit=8)
                ]
                best = sorted(scores.values(), reverse=True)
                assert len(found) == min(8, len(scores)), question
                ranked = [scores[seq] for seq in found if seq is not None]
                assert ranked == pytest.approx(best[: len(found)], rel=1e-9), question


async def test_a_turn_whose_text_the_database_cannot_index_is_stored_all_the_same(
    store: wm.Store, tenant: str
) -> None:
    """A NUL character (which PostgreSQL's text cannot hold, and FTS5 would stop at) is not a
    word: the turn is found by its other words; a text whose JSON the database reads no words
    from is stored exactly all the same."""
    nul = "Grüße \x00 from Rex"
    odd = "A \\u0000 backslash, then \x00"
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[{"role": "user", "content": nul}, {"role": "assistant", "content": odd}],
    )
    found = await search(store, tenant, "Rex from")
    assert [[turn.content for turn in unit] for unit in found] == [[nul]]
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert [turn.content for turn in turns] == [nul, odd]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Rex chased the zeppelin", id="plain"),
        pytest.param("Rex chased the zeppelin \x1b[1m loudly", id="escaped-control"),
        pytest.param("Rex chased C:\\users\\zeppelin", id="backslash-u"),
        pytest.param("Rex chased the zeppelin, 1e123456 times", id="long-exponent-word"),
        pytest.param("Rex chased the zeppelin " + "[" * 1_200, id="brackets"),
        pytest.param("Rex chased the zeppelin " + "lorem ipsum " * 1_500, id="long"),
    ],
)
async def test_every_text_is_found_by_its_words_however_its_json_reads(
    store: wm.Store, tenant: str, text: str
) -> None:
    """PostgreSQL reads a turn's words from its JSON directly, or, when the JSON holds what its
    jsonb may refuse (an escape, a long exponent, deep nesting, a long text), with the failure
    caught: the words are the same either way."""
    messages: list[Any] = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": [{"type": "text", "text": f"Noted: {text}"}]},
    ]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    assert sorted(seqs(await search(store, tenant, "zeppelin chase"))) == [[1], [2]]


async def test_the_first_turn_of_each_day_of_a_stretch(store: wm.Store, tenant: str) -> None:
    from datetime import UTC, datetime, timedelta

    start = datetime(2023, 5, 8, 23, 30, tzinfo=UTC)
    may_11 = datetime(2023, 5, 11, 10, 0, tzinfo=UTC)
    times = [start, start + timedelta(minutes=20), start + timedelta(minutes=40)]
    times += [may_11, may_11 + timedelta(hours=1), may_11 + timedelta(hours=2)]
    await store.append(tenant_id=tenant, thread_id="th", messages=CHAT, created_at=times)
    assert isinstance(store, wm.stores.TurnSearchStore)
    days = await store.turn_days(tenant_id=tenant, thread_id="th", first_seq=1, last_seq=6)
    assert [turn.seq for turn in days] == [1, 3, 4]  # 8 May, 9 May (UTC), 11 May
    assert days[0].content == CHAT[0]["content"]
    later = await store.turn_days(tenant_id=tenant, thread_id="th", first_seq=5, last_seq=6)
    assert [turn.seq for turn in later] == [5]
    with pytest.raises(wm.NotFoundError):
        await store.turn_days(tenant_id=tenant + "-b", thread_id="th", first_seq=1, last_seq=6)
