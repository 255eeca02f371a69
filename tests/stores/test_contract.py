"""One contract for every ThreadStore: SQLite and PostgreSQL must agree on all of it."""

from __future__ import annotations

from pathlib import Path

import pytest

import workingmem as wm
from tests.helpers import assistant, never_counting, tool, user

pytestmark = pytest.mark.asyncio


async def test_append_creates_the_thread_and_numbers_turns_from_one(
    store: wm.ThreadStore, tenant: str
) -> None:
    """A new thread id creates the thread; turns get seq 1, 2, ... in order."""
    stored = await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("hi"), assistant("hello")], user_id="u1"
    )
    assert [t.seq for t in stored] == [1, 2]
    thread = await store.get_thread(tenant_id=tenant, thread_id="th")
    assert (thread.tenant_id, thread.thread_id, thread.user_id, thread.turn_count) == (
        tenant,
        "th",
        "u1",
        2,
    )
    more = await store.append(tenant_id=tenant, thread_id="th", messages=[user("again")])
    assert [t.seq for t in more] == [3]


async def test_turns_round_trip_exactly(store: wm.ThreadStore, tenant: str) -> None:
    """What goes in comes out: content strings, parts, tool calls, tool results, names."""
    messages: list[wm.Message] = [
        {"role": "user", "content": "Grüße 👋 \u0000 ok", "name": "ada"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x": 1}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ],
        },
        tool("c2", "two"),
        tool("c1", "one"),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:x"}},
            ],
        },
    ]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.to_message() for t in turns] == messages
    assert all(t.created_at is not None and t.created_at.tzinfo is not None for t in turns)


async def test_turn_objects_are_accepted(store: wm.ThreadStore, tenant: str) -> None:
    turn = wm.Turn(role="user", content="typed")
    await store.append(tenant_id=tenant, thread_id="th", messages=[turn])
    (stored,) = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert stored.content == "typed"
    assert stored.seq == 1


async def test_an_append_is_all_or_nothing(store: wm.ThreadStore, tenant: str) -> None:
    """One bad message rejects the whole call; what was stored before is untouched."""
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("first")])
    with pytest.raises(wm.ValidationError) as caught:
        await store.append(
            tenant_id=tenant,
            thread_id="th",
            messages=[user("ok"), {"role": "robot", "content": "x"}],
        )
    assert caught.value.field == "messages[1].role"
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns] == ["first"]
    assert (await store.get_thread(tenant_id=tenant, thread_id="th")).turn_count == 1


async def test_a_rejected_first_append_creates_no_thread(
    store: wm.ThreadStore, tenant: str
) -> None:
    with pytest.raises(wm.ValidationError):
        await store.append(tenant_id=tenant, thread_id="th", messages=[tool("nope")])
    with pytest.raises(wm.NotFoundError):
        await store.get_thread(tenant_id=tenant, thread_id="th")


async def test_tool_result_must_answer_a_call_of_the_turn_before(
    store: wm.ThreadStore, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("q"), assistant(None, "a")])
    with pytest.raises(wm.ValidationError, match="matches no call"):
        await store.append(tenant_id=tenant, thread_id="th", messages=[tool("zzz")])
    await store.append(tenant_id=tenant, thread_id="th", messages=[tool("a")])
    with pytest.raises(wm.ValidationError, match="already has a result"):
        await store.append(tenant_id=tenant, thread_id="th", messages=[tool("a")])


async def test_tool_results_across_appends_join_their_unit(
    store: wm.ThreadStore, tenant: str
) -> None:
    """Parallel calls answered in separate appends still form one unit with their call."""
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("q"), assistant(None, "a", "b")]
    )
    await store.append(tenant_id=tenant, thread_id="th", messages=[tool("b")])
    await store.append(tenant_id=tenant, thread_id="th", messages=[tool("a"), assistant("done")])
    tail = await store.read_tail(
        tenant_id=tenant,
        thread_id="th",
        tokenizer=wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000)),
        limit=10,
    )
    assert [(t.seq, t.unit_seq) for t in tail.turns] == [(1, 1), (2, 2), (3, 2), (4, 2), (5, 5)]


async def test_tenants_never_see_each_other(store: wm.ThreadStore, tenant: str) -> None:
    """Two tenants may use the same thread id; each sees only its own turns."""
    other = tenant + "-other"
    await store.append(tenant_id=tenant, thread_id="shared", messages=[user("mine")])
    await store.append(tenant_id=other, thread_id="shared", messages=[user("theirs")])
    mine = await store.list_turns(tenant_id=tenant, thread_id="shared")
    theirs = await store.list_turns(tenant_id=other, thread_id="shared")
    assert [t.content for t in mine] == ["mine"]
    assert [t.content for t in theirs] == ["theirs"]
    assert [t.thread_id for t in await store.list_threads(tenant_id=tenant)] == ["shared"]


async def test_another_tenants_thread_is_not_found_like_a_missing_one(
    store: wm.ThreadStore, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("x")])
    with pytest.raises(wm.NotFoundError) as foreign:
        await store.get_thread(tenant_id=tenant + "-x", thread_id="th")
    with pytest.raises(wm.NotFoundError) as missing:
        await store.get_thread(tenant_id=tenant + "-x", thread_id="th")
    assert str(foreign.value) == str(missing.value)
    for call in (store.get_memory_state, store.list_memory_states):
        with pytest.raises(wm.NotFoundError):
            await call(tenant_id=tenant + "-x", thread_id="th")


async def test_threads_are_listed_newest_first_and_paged(
    store: wm.ThreadStore, tenant: str
) -> None:
    for name in ("a", "b", "c"):
        await store.append(tenant_id=tenant, thread_id=name, messages=[user(name)])
    await store.append(tenant_id=tenant, thread_id="a", messages=[assistant("again")])
    listed = [t.thread_id for t in await store.list_threads(tenant_id=tenant)]
    assert listed == ["a", "c", "b"]
    page = await store.list_threads(tenant_id=tenant, limit=2, offset=1)
    assert [t.thread_id for t in page] == ["c", "b"]


async def test_turns_are_paged_by_seq(store: wm.ThreadStore, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user(str(i)) for i in range(5)])
    page = await store.list_turns(tenant_id=tenant, thread_id="th", after_seq=2, limit=2)
    assert [t.seq for t in page] == [3, 4]


async def test_paging_walks_every_turn_once_after_pops_and_rewinds(
    store: wm.Store, tenant: str
) -> None:
    """A page is bounded by seq: every operation keeps a thread's seqs running from 1
    without a gap, so pages walk every turn once, and a page past the end is empty."""
    th = "th"
    await store.append(tenant_id=tenant, thread_id=th, messages=[user(str(i)) for i in range(7)])
    rewound = [user("r1"), user("r2"), user("r3")]
    await store.append(tenant_id=tenant, thread_id=th, messages=rewound, after_seq=4)
    await store.pop_turns(tenant_id=tenant, thread_id=th)
    await store.append(tenant_id=tenant, thread_id=th, messages=[user("last")])
    paged: list[wm.Turn] = []
    after = 0
    while page := await store.list_turns(tenant_id=tenant, thread_id=th, after_seq=after, limit=2):
        paged.extend(page)
        after = page[-1].seq or 0
    assert [t.content for t in paged] == ["0", "1", "2", "3", "r1", "r2", "last"]
    assert [t.seq for t in paged] == list(range(1, 8))
    assert await store.list_turns(tenant_id=tenant, thread_id=th, after_seq=7) == []
    with pytest.raises(wm.NotFoundError):
        await store.list_turns(tenant_id=tenant, thread_id="missing")


async def test_read_tail_counts_once_and_remembers(store: wm.ThreadStore, tenant: str) -> None:
    """A turn is counted with a tokenizer once; later reads and appends use stored counts."""
    tok = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("hello there")])
    first = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tok, limit=10)
    assert first.turns[0].tokens == tok.count_message(user("hello there"))

    class Exploding:
        key = tok.key
        exact = True
        reply_overhead = 3

        def count_text(self, text: str) -> int:
            raise AssertionError("re-tokenized a stored turn")

        def count_message(self, message: wm.MessageIn) -> int:
            raise AssertionError("re-tokenized a stored turn")

    again = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=Exploding(), limit=10)
    assert again.turns[0].tokens == first.turns[0].tokens
    # the tokenizer is now registered: an append counts the new turn at write time
    await store.append(tenant_id=tenant, thread_id="th", messages=[assistant("fine")])
    tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=Exploding(), limit=10)
    assert tail.turns[-1].tokens == tok.count_message(assistant("fine"))


async def test_a_thread_read_for_two_models_keeps_both_counts(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The first tokenizer's counts live in the turns' rows, a second's beside them: both are
    counted once, both are counted at append from then on, both windows read right."""
    first = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))
    second = wm.tokenizer_for(wm.ModelInfo(id="gpt-4", context_window=1000))
    assert first.key != second.key
    text = "Grüße, how many tokens is this sentence in each vocabulary?"
    await store.append(tenant_id=tenant, thread_id="th", messages=[user(text)])
    for tok in (first, second):
        tail = await store.read_tail(
            tenant_id=tenant, thread_id="th", tokenizer=tok, limit=10, tokens=1_000
        )
        assert [t.tokens for t in tail.turns] == [tok.count_message(user(text))]
    await store.append(tenant_id=tenant, thread_id="th", messages=[assistant(text)])
    for tok in (first, second):
        tail = await store.read_tail(
            tenant_id=tenant, thread_id="th", tokenizer=never_counting(tok), limit=10, tokens=1
        )
        assert [t.tokens for t in tail.turns] == [tok.count_message(assistant(text))]


async def test_read_tail_pages_newest_first(store: wm.ThreadStore, tenant: str) -> None:
    tok = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))
    await store.append(tenant_id=tenant, thread_id="th", messages=[user(str(i)) for i in range(10)])
    newest = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tok, limit=3)
    assert [t.seq for t in newest.turns] == [8, 9, 10]
    older = await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=tok, limit=3, before_seq=8
    )
    assert [t.seq for t in older.turns] == [5, 6, 7]


async def test_read_tail_with_a_token_goal_reads_through_the_first_turn_past_it(
    store: wm.ThreadStore, tenant: str
) -> None:
    """With `tokens`, a read returns the newest turns up to and including the first whose
    counts add up past the goal, and no more: a window's read is sized by its budget."""
    tok = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("seed")])
    await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tok, limit=1)  # registers
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user(f"turn {i}") for i in range(2, 41)]
    )
    each = tok.count_message(user("turn 10"))
    goal = 5 * each + 1  # five turns reach it, the sixth passes it
    tail = await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=tok, limit=1_000, tokens=goal
    )
    assert [t.seq for t in tail.turns] == [35, 36, 37, 38, 39, 40]
    assert tail.thread.turn_count == 40
    older = await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=tok, limit=1_000, tokens=goal, before_seq=4
    )
    assert [t.seq for t in older.turns] == [1, 2, 3]  # the thread's start comes first
    capped = await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=tok, limit=2, tokens=10 * goal
    )
    assert [t.seq for t in capped.turns] == [39, 40]


async def test_read_tail_with_a_token_goal_reads_the_unit_it_stops_in_whole(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The turn that passes the goal may be a tool result: the read goes back to its call, so
    the window can tell whether the unit is whole without another read."""
    tok = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("q")])
    await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tok, limit=1)
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[assistant(None, "a", "b"), tool("a", "x" * 40), tool("b", "y" * 40), user("n")],
    )
    goal = tok.count_message(user("n")) + 1  # passed by the newest tool result
    tail = await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=tok, limit=1_000, tokens=goal
    )
    assert [(t.seq, t.unit_seq) for t in tail.turns] == [(2, 2), (3, 2), (4, 2), (5, 5)]


async def test_read_tail_with_a_token_goal_counts_turns_never_counted(
    store: wm.ThreadStore, tenant: str
) -> None:
    """Turns stored before a tokenizer was registered have no count with it: the read stops
    trusting the cache there and hands the caller turns to count, all counted right."""
    tok = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user(f"old {i}") for i in range(100)]
    )
    first = await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=tok, limit=1_000, tokens=10**6
    )
    assert first.turns, "a read of a thread never counted still returns turns"
    assert first.turns[-1].seq == 100
    assert all(t.tokens == tok.count_message(t.message) for t in first.turns)
    again = await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=tok, limit=1_000, tokens=10**6
    )
    assert [t.seq for t in again.turns][-len(first.turns) :] == [t.seq for t in first.turns]
    assert all(t.tokens == tok.count_message(t.message) for t in again.turns)


async def test_a_tail_read_brings_the_memory_state_with_it(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The window and the notes come from one read: the state a tail read brings is the
    stored one (none yet: the empty state), on every page, and its thread the stored one to
    the microsecond, whatever their texts hold."""
    tok = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))
    odd = 'Ana "Grüße" 👋 \\'
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("x"), assistant("y")], user_id=odd
    )
    tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tok, limit=10)
    assert tail.state == wm.WorkingMemoryState()
    assert tail.thread == await store.get_thread(tenant_id=tenant, thread_id="th")
    assert tail.thread.user_id == odd
    written = await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=wm.StateWrite(
            expected_version=0,
            summary=f"they talked:\n{odd}\u2028",
            facts=[wm.Fact(f"likes tea {odd}", 1, 2)],
            turn_count=2,
            reason="update",
        ),
    )
    for before_seq in (None, 2):
        tail = await store.read_tail(
            tenant_id=tenant, thread_id="th", tokenizer=tok, limit=1, before_seq=before_seq
        )
        assert tail.state == written
        assert tail.state == await store.get_memory_state(tenant_id=tenant, thread_id="th")
        assert tail.thread == await store.get_thread(tenant_id=tenant, thread_id="th")


async def test_memory_state_is_compare_and_set_with_history(
    store: wm.ThreadStore, tenant: str
) -> None:
    """A write against a stale version fails and changes nothing; every version is kept."""
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("x")])
    assert await store.get_memory_state(tenant_id=tenant, thread_id="th") == wm.WorkingMemoryState()
    first = await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=wm.StateWrite(
            expected_version=0,
            summary="s1",
            facts=[wm.Fact("likes tea", 1, 1)],
            turn_count=1,
            reason="update",
        ),
    )
    assert (first.version, first.facts) == (1, ["likes tea"])
    assert (first.facts[0].first_turn, first.facts[0].last_turn) == (1, 1)
    assert first.fact_details == tuple(first.facts)  # the earlier name, still answered
    with pytest.raises(wm.ConflictError):
        await store.write_memory_state(
            tenant_id=tenant,
            thread_id="th",
            write=wm.StateWrite(
                expected_version=0, summary="lost", facts=[], turn_count=1, reason="update"
            ),
        )
    current = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert (current.summary, current.version) == ("s1", 1)
    await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=wm.StateWrite(
            expected_version=1, summary="s2", facts=[], turn_count=1, reason="update"
        ),
    )
    history = await store.list_memory_states(tenant_id=tenant, thread_id="th")
    assert [(s.version, s.summary) for s in history] == [(2, "s2"), (1, "s1")]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"tenant_id": ""}, "tenant_id", id="empty-tenant"),
        pytest.param({"thread_id": "x" * 257}, "thread_id", id="long-thread-id"),
        pytest.param({"thread_id": "a\nb"}, "thread_id", id="control-char-thread-id"),
        pytest.param({"user_id": ""}, "user_id", id="empty-user"),
        pytest.param({"messages": "hi"}, "messages", id="messages-not-a-list"),
    ],
)
async def test_bad_keys_are_rejected_before_anything_is_stored(
    store: wm.ThreadStore, tenant: str, kwargs: dict[str, object], field: str
) -> None:
    call: dict[str, object] = {"tenant_id": tenant, "thread_id": "th", "messages": [user("x")]}
    call.update(kwargs)
    with pytest.raises(wm.ValidationError) as caught:
        await store.append(**call)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert await store.list_threads(tenant_id=tenant) == []


async def test_schema_is_versioned_and_reopening_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    for _ in range(2):
        store = await wm.open_store(f"sqlite:///{path}")
        await store.aclose()
    import sqlite3

    with sqlite3.connect(path) as db:
        versions = [row[0] for row in db.execute("SELECT version FROM schema_migrations")]
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    assert versions == sorted(set(versions))
    assert versions[0] == 1
    assert mode == "wal"
