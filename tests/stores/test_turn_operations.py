"""The contract of the turn operations frameworks call: pop, replace, delete, on both stores.

The summary never describes turns that no longer exist: a pop or a replace that removes turns
the state covers rolls it back, in the same transaction, to the newest version that covers
only surviving turns (or to empty); after a forget, what was forgotten stays forgotten.
"""

from __future__ import annotations

import pytest

import workingmem as wm
from tests.helpers import assistant, tool, user
from workingmem.stores.base import StateWrite
from workingmem.stores.documents import Scope

pytestmark = pytest.mark.asyncio


async def _summarize(store: wm.Store, tenant: str, covered: int, summary: str) -> None:
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=StateWrite(
            expected_version=state.version,
            summary=summary,
            facts=[wm.Fact(f"fact of {summary}", 1, covered)],
            turn_count=covered,
            reason="update",
        ),
    )


async def _four_turns_summarized_twice(
    store: wm.Store, tenant: str, user_id: str | None = None
) -> None:
    """Thread "th": four turns, a summary through the second, then one through the fourth."""
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[user("1"), assistant("2"), user("3"), assistant("4")],
        user_id=user_id,
    )
    await _summarize(store, tenant, 2, "first two")
    await _summarize(store, tenant, 4, "all four")


def _roles(turns: list[wm.Turn]) -> list[str]:
    return [t.role for t in turns]


async def test_pop_removes_the_newest_turn(store: wm.Store, tenant: str) -> None:
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("a"), assistant("b"), user("c")]
    )
    popped = await store.pop_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in popped] == ["c"]
    assert popped[0].seq == 3
    left = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in left] == ["a", "b"]
    assert (await store.get_thread(tenant_id=tenant, thread_id="th")).turn_count == 2
    again = await store.append(tenant_id=tenant, thread_id="th", messages=[user("d")])
    assert again[0].seq == 3  # the next turn takes the freed place


async def test_pop_of_a_tool_result_removes_the_whole_unit(store: wm.Store, tenant: str) -> None:
    """Never an orphan: the assistant turn that called and every result go together."""
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[user("weather?"), assistant(None, "c1", "c2"), tool("c1"), tool("c2")],
    )
    popped = await store.pop_turns(tenant_id=tenant, thread_id="th")
    assert _roles(popped) == ["assistant", "tool", "tool"]
    left = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert _roles(left) == ["user"]
    # The thread goes on as if the unit never was: a result for c1 now answers nothing.
    with pytest.raises(wm.ValidationError):
        await store.append(tenant_id=tenant, thread_id="th", messages=[tool("c1")])
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[assistant(None, "c3"), tool("c3")]
    )
    assert _roles(await store.list_turns(tenant_id=tenant, thread_id="th")) == [
        "user",
        "assistant",
        "tool",
    ]


async def test_pop_of_an_empty_thread_removes_nothing(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[])
    assert await store.pop_turns(tenant_id=tenant, thread_id="th") == []


async def test_popped_turns_are_counted_afresh(store: wm.Store, tenant: str) -> None:
    """A new turn in a popped turn's place gets its own token count, not the removed one's."""
    tokenizer = wm.tokens.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("a " * 200)])
    long = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    await store.pop_turns(tenant_id=tenant, thread_id="th")
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("short")])
    tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    assert tail.turns[0].tokens < long.turns[0].tokens
    assert tail.turns[0].tokens == tokenizer.count_message(user("short"))


async def test_pop_rolls_the_summary_back_to_what_survives(store: wm.Store, tenant: str) -> None:
    await _four_turns_summarized_twice(store, tenant)
    await store.pop_turns(tenant_id=tenant, thread_id="th")
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.turn_count) == ("first two", 2)
    assert state.facts == ["fact of first two"]
    history = await store.list_memory_states(tenant_id=tenant, thread_id="th")
    assert all(version.turn_count <= 3 for version in history)
    assert "all four" not in {version.summary for version in history}


async def test_pop_below_every_summary_empties_it(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("1"), assistant("2")])
    await _summarize(store, tenant, 2, "both")
    await store.pop_turns(tenant_id=tenant, thread_id="th")
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.facts, state.turn_count) == ("", [], 0)


async def test_a_forgotten_summary_stays_forgotten_after_a_pop(
    store: wm.Store, tenant: str
) -> None:
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("1"), assistant("2"), user("3")]
    )
    await _summarize(store, tenant, 3, "secret")
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=StateWrite(
            expected_version=state.version, summary="", facts=[], turn_count=3, reason="reset"
        ),
    )
    await store.pop_turns(tenant_id=tenant, thread_id="th")
    after = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert (after.summary, after.turn_count) == ("", 2)  # turns 1-2 are not summarized again
    history = await store.list_memory_states(tenant_id=tenant, thread_id="th")
    assert "secret" not in {version.summary for version in history}


async def test_replace_keeps_the_common_start_and_replaces_the_rest(
    store: wm.Store, tenant: str
) -> None:
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[user("1"), assistant("2"), user("3"), assistant("4")],
    )
    before = await store.list_turns(tenant_id=tenant, thread_id="th")
    await _summarize(store, tenant, 2, "first two")
    await _summarize(store, tenant, 4, "all four")
    turns = await store.replace_turns(
        tenant_id=tenant,
        thread_id="th",
        messages=[user("1"), assistant("2"), user("3, edited")],
    )
    assert [t.content for t in turns] == ["1", "2", "3, edited"]
    assert [t.created_at for t in turns[:2]] == [t.created_at for t in before[:2]]  # kept
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.turn_count) == ("first two", 2)
    assert (await store.get_thread(tenant_id=tenant, thread_id="th")).turn_count == 3


async def test_replace_that_only_extends_keeps_the_summary(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("1"), assistant("2")])
    await _summarize(store, tenant, 2, "both")
    await store.replace_turns(
        tenant_id=tenant, thread_id="th", messages=[user("1"), assistant("2"), user("3")]
    )
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.version) == ("both", 1)


async def test_replace_is_all_or_nothing(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("1"), assistant("2")])
    with pytest.raises(wm.ValidationError):
        await store.replace_turns(
            tenant_id=tenant, thread_id="th", messages=[user("x"), tool("nobody-called")]
        )
    assert [t.content for t in await store.list_turns(tenant_id=tenant, thread_id="th")] == [
        "1",
        "2",
    ]


async def test_replace_with_nothing_clears_and_creates(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("1")])
    assert await store.replace_turns(tenant_id=tenant, thread_id="th", messages=[]) == []
    created = await store.replace_turns(tenant_id=tenant, thread_id="new", messages=[user("hi")])
    assert [t.seq for t in created] == [1]


async def test_delete_removes_every_trace(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("1"), assistant("2")])
    await _summarize(store, tenant, 2, "both")
    owners: list[tuple[Scope, str]] = [("conversation", "th"), ("user", "u1")]
    for scope, owner in owners:
        await store.put_document(
            tenant_id=tenant, scope=scope, owner_id=owner, content="notes", expected_version=0
        )
    await store.delete_thread(tenant_id=tenant, thread_id="th")
    with pytest.raises(wm.NotFoundError):
        await store.get_thread(tenant_id=tenant, thread_id="th")
    with pytest.raises(wm.NotFoundError):
        await store.list_memory_states(tenant_id=tenant, thread_id="th")
    gone = await store.get_document(tenant_id=tenant, scope="conversation", owner_id="th")
    assert (gone.content, gone.version) == (None, 0)
    kept = await store.get_document(tenant_id=tenant, scope="user", owner_id="u1")
    assert kept.content == "notes"  # the user's memory is not the conversation's
    fresh = await store.append(tenant_id=tenant, thread_id="th", messages=[user("again")])
    assert fresh[0].seq == 1
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.version) == ("", 0)


@pytest.mark.parametrize("operation", ["pop", "delete"])
async def test_another_tenants_thread_is_not_found(
    store: wm.Store, tenant: str, operation: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("mine")])
    other = f"{tenant}-other"
    call = store.pop_turns if operation == "pop" else store.delete_thread
    with pytest.raises(wm.NotFoundError) as caught:
        await call(tenant_id=other, thread_id="th")
    assert str(caught.value) == str(wm.NotFoundError("thread", "th"))
    assert [t.content for t in await store.list_turns(tenant_id=tenant, thread_id="th")] == ["mine"]


async def test_a_replace_by_another_tenant_is_its_own_thread(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("mine")])
    other = f"{tenant}-other"
    await store.replace_turns(tenant_id=other, thread_id="th", messages=[user("theirs")])
    assert [t.content for t in await store.list_turns(tenant_id=tenant, thread_id="th")] == ["mine"]


async def test_append_after_a_seq_replaces_what_follows_and_rolls_the_summary_back(
    store: wm.Store, tenant: str
) -> None:
    """An edit or a regenerate (R27): the turns after the seq go, the summary moves back to a
    version covering only survivors, and the new turns follow, in one transaction."""
    await _four_turns_summarized_twice(store, tenant)
    added = await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("3, edited")], after_seq=2
    )
    assert [t.seq for t in added] == [3]
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns] == ["1", "2", "3, edited"]
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert (state.summary, state.turn_count) == ("first two", 2)
    regenerated = await store.append(tenant_id=tenant, thread_id="th", messages=[], after_seq=1)
    assert regenerated == []
    assert _roles(await store.list_turns(tenant_id=tenant, thread_id="th")) == ["user"]


async def test_append_after_a_seq_is_all_or_nothing(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("1"), assistant("2")])
    with pytest.raises(wm.ValidationError):  # a tool result that answers no call
        await store.append(
            tenant_id=tenant, thread_id="th", messages=[tool("c9", "x")], after_seq=1
        )
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns] == ["1", "2"]  # the cut rolled back with the append


async def test_a_fork_starts_as_the_common_turns_with_the_summary_covering_them(
    store: wm.Store, tenant: str
) -> None:
    """A conversation found by its opening forks where two chats part (R27): the new thread
    has the source's turns up to the seq, verbatim, and the newest summary covering only
    them; the source is untouched."""
    await _four_turns_summarized_twice(store, tenant, user_id="u1")
    fork = await store.fork_thread(
        tenant_id=tenant, source_id="th", thread_id="th-1", through_seq=3
    )
    assert (fork.thread_id, fork.user_id, fork.turn_count) == ("th-1", "u1", 3)
    turns = await store.list_turns(tenant_id=tenant, thread_id="th-1")
    assert [t.content for t in turns] == ["1", "2", "3"]
    state = await store.get_memory_state(tenant_id=tenant, thread_id="th-1")
    assert (state.summary, state.turn_count) == ("first two", 2)
    source = await store.get_memory_state(tenant_id=tenant, thread_id="th")
    assert source.summary == "all four"
    appended = await store.append(tenant_id=tenant, thread_id="th-1", messages=[assistant("b")])
    assert appended[0].seq == 4  # it goes on from the copied turns
    with pytest.raises(wm.ConflictError):
        await store.fork_thread(tenant_id=tenant, source_id="th", thread_id="th-1", through_seq=1)
    with pytest.raises(wm.NotFoundError):  # another tenant's thread is a missing one
        await store.fork_thread(
            tenant_id=f"{tenant}-other", source_id="th", thread_id="x", through_seq=1
        )
