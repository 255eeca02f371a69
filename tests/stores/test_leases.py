"""The update lease: one updater per thread at a time, renewed while it works, gone with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from tests.conftest import two_stores
from tests.helpers import assistant, user
from workingmem.stores.base import Claim

pytestmark = pytest.mark.asyncio


async def test_a_lease_is_held_renewed_by_its_owner_only_and_released(
    store: wm.Store, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("hi")])
    ids = {"tenant_id": tenant, "thread_id": "th"}
    assert await store.claim_memory_update(**ids, owner="a", ttl_seconds=60)
    assert not await store.claim_memory_update(**ids, owner="b", ttl_seconds=60)
    assert await store.renew_memory_update(**ids, owner="a", ttl_seconds=60)
    assert not await store.renew_memory_update(**ids, owner="b", ttl_seconds=60)
    await store.release_memory_update(**ids, owner="a")
    assert not await store.renew_memory_update(**ids, owner="a", ttl_seconds=60)
    assert await store.claim_memory_update(**ids, owner="b", ttl_seconds=60)


async def test_an_expired_lease_is_taken_and_its_old_owner_cannot_renew_it(
    store: wm.Store, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("hi")])
    ids = {"tenant_id": tenant, "thread_id": "th"}
    assert await store.claim_memory_update(**ids, owner="dead", ttl_seconds=-1)  # expired
    assert await store.claim_memory_update(**ids, owner="alive", ttl_seconds=60)
    assert not await store.renew_memory_update(**ids, owner="dead", ttl_seconds=60)


async def test_a_page_session_lives_while_its_key_does(store: wm.Store, tenant: str) -> None:
    created = await store.create_api_key(tenant_id=tenant)
    token = await store.open_page_session(created.secret, ttl_seconds=60)
    assert token is not None
    assert token.startswith("wms_")
    assert created.secret not in token
    found = await store.find_page_session(token)
    assert found is not None
    assert found.tenant_id == tenant
    assert await store.open_page_session("wm_not-a-key", ttl_seconds=60) is None
    expired = await store.open_page_session(created.secret, ttl_seconds=-1)
    assert expired is not None
    assert await store.find_page_session(expired) is None
    await store.close_page_session(token)
    assert await store.find_page_session(token) is None
    other = await store.open_page_session(created.secret, ttl_seconds=60)
    assert other is not None
    await store.revoke_api_key(key_id=created.key.key_id)
    assert await store.find_page_session(other) is None  # revoking the key ends its sessions
    assert await store.open_page_session(created.secret, ttl_seconds=60) is None


async def test_the_memory_read_is_one_snapshot_under_concurrent_updates(
    store: wm.Store, tenant: str
) -> None:
    """The versions shown never run ahead of the state shown beside them (reads interleaved
    with 40 writes; bounded)."""
    from workingmem.stores.base import StateWrite

    await store.append(tenant_id=tenant, thread_id="th", messages=[user("hi")])

    async def write(n: int) -> None:
        for version in range(n):
            await store.write_memory_state(
                tenant_id=tenant,
                thread_id="th",
                write=StateWrite(
                    expected_version=version,
                    summary=f"v{version + 1}",
                    facts=[],
                    turn_count=1,
                    reason="update",
                ),
            )

    async def read(n: int) -> list[tuple[int, int]]:
        seen = []
        for _ in range(n):
            _, state, versions = await store.read_memory(tenant_id=tenant, thread_id="th")
            seen.append((state.version, versions[0].version if versions else 0))
        return seen

    import asyncio

    _, seen = await asyncio.gather(write(40), read(120))
    assert all(state == newest for state, newest in seen), seen


async def test_the_ask_lock_of_a_thread_needs_no_thread_and_frees_when_it_expires(
    store: wm.Store, tenant: str
) -> None:
    ids = {"tenant_id": tenant, "thread_id": "not-yet-created"}
    assert await store.claim_thread(**ids, owner="a", ttl_seconds=60)
    assert not await store.claim_thread(**ids, owner="b", ttl_seconds=60)
    assert await store.renew_thread(**ids, owner="a", ttl_seconds=60)
    assert not await store.renew_thread(**ids, owner="b", ttl_seconds=60)
    await store.release_thread(**ids, owner="a")
    assert await store.claim_thread(**ids, owner="crashed", ttl_seconds=-1)  # died holding it
    assert await store.claim_thread(**ids, owner="b", ttl_seconds=60)
    other = {"tenant_id": f"{tenant}-other", "thread_id": "not-yet-created"}
    assert await store.claim_thread(**other, owner="c", ttl_seconds=60)  # tenants apart


async def test_the_ask_lock_taken_with_the_tail_reads_the_thread_after_it(
    store: wm.Store, tenant: str
) -> None:
    assert isinstance(store, wm.stores.AskLockStore)
    tokenizer = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    claim: dict[str, Any] = {**ids, "ttl_seconds": 60, "tokenizer": tokenizer, "limit": 2}
    assert await store.claim_and_open(**claim, owner="a") == Claim(True, None)  # no thread yet
    assert await store.claim_and_open(**claim, owner="b") == Claim(False, None)
    await store.append(**ids, messages=[user("one"), assistant("two")])
    await store.append(**ids, messages=[user("three")])
    assert await store.claim_and_open(**claim, owner="b") == Claim(False, None)  # still a's
    await store.release_thread(**ids, owner="a")

    claim_b = await store.claim_and_open(**claim, owner="b")

    assert claim_b.taken
    tail = claim_b.tail
    assert tail is not None
    assert tail == await store.read_tail(**ids, tokenizer=tokenizer, limit=2)
    assert [t.message["content"] for t in tail.turns] == ["two", "three"]
    assert tail.thread.turn_count == 3
    assert not await store.claim_thread(**ids, owner="c", ttl_seconds=60)  # b holds it
    other = {**claim, "tenant_id": f"{tenant}-other"}
    assert await store.claim_and_open(**other, owner="c") == Claim(True, None)  # tenants apart


async def test_the_ask_lock_opens_a_new_thread_with_its_first_turns_in_its_own_trip(
    store: wm.Store, tenant: str
) -> None:
    """`claim_and_open` writes the opening only for the owner that took the lock, only to a
    thread without turns, and only what `append` would write; invalid messages take nothing."""
    assert isinstance(store, wm.stores.AskLockStore)
    tokenizer = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    claim: dict[str, Any] = {**ids, "ttl_seconds": 60, "tokenizer": tokenizer, "limit": 3}
    opening: list[wm.Message] = [{"role": "user", "content": "Lyon in May?", "name": "ada"}]
    opening.append(assistant("Mild."))

    opened = await store.claim_and_open(**claim, owner="a", opening=opening, user_id="ada")

    assert (opened.taken, opened.tail) == (True, None)  # the read came before the opening
    stored = await store.list_turns(**ids)
    assert opened.opened == stored
    assert [(t.seq, t.role, t.content, t.name) for t in stored] == [
        (1, "user", "Lyon in May?", "ada"),
        (2, "assistant", "Mild.", None),
    ]
    thread = (await store.read_tail(**ids, tokenizer=tokenizer, limit=3)).thread
    assert (thread.turn_count, thread.user_id) == (2, "ada")
    refused = await store.claim_and_open(**claim, owner="b", opening=[user("Mine?")])
    assert (refused.taken, refused.opened) == (False, [])  # a holds it: nothing written
    held = {**claim, "thread_id": "held"}
    assert (await store.claim_and_open(**held, owner="h")).taken  # a lock, no thread yet
    refused = await store.claim_and_open(**held, owner="i", opening=[user("Mine?")])
    assert (refused.taken, refused.opened) == (False, [])
    with pytest.raises(wm.NotFoundError):
        await store.list_turns(tenant_id=tenant, thread_id="held")
    await store.append(**ids, messages=[user("And June?")])  # after the opening, in order
    assert [t.seq for t in await store.list_turns(**ids)] == [1, 2, 3]
    await store.release_thread(**ids, owner="a")

    went_on = await store.claim_and_open(**claim, owner="b", opening=[user("Again?")])

    assert went_on.taken
    assert went_on.opened == []  # the thread has turns: the caller places its own
    assert went_on.tail == await store.read_tail(**ids, tokenizer=tokenizer, limit=3)
    assert len(await store.list_turns(**ids)) == 3
    await store.release_thread(**ids, owner="b")
    known = await store.claim_and_open(**claim, owner="b", opening=[{"role": "wizard"}])
    assert (known.taken, known.opened) == (True, [])  # seen with turns: no opening is made
    await store.release_thread(**ids, owner="b")

    emptied = {**claim, "thread_id": "emptied"}
    await store.claim_and_open(**emptied, owner="c", opening=[user("gone")])
    await store.release_thread(tenant_id=tenant, thread_id="emptied", owner="c")
    await store.pop_turns(tenant_id=tenant, thread_id="emptied")
    stale = await store.claim_and_open(**emptied, owner="c", opening=[user("Back?")])
    assert stale.opened == []  # last seen with a turn: the ask appends it the ordinary way
    assert stale.tail is not None  # ... and the read shows it empty now
    await store.release_thread(tenant_id=tenant, thread_id="emptied", owner="c")
    reopened = await store.claim_and_open(**emptied, owner="c", opening=[user("Back?")])
    assert reopened.tail is not None
    assert reopened.tail.thread.turn_count == 0
    assert [(t.seq, t.content) for t in reopened.opened] == [(1, "Back?")]
    other_ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "counted otherwise"}
    other_model = wm.ModelInfo(id="gpt-3.5-turbo", context_window=16_000)
    await store.append(**other_ids, messages=[user("x")])
    await store.read_tail(**other_ids, tokenizer=wm.tokenizer_for(other_model), limit=1)
    await store.pop_turns(**other_ids)
    for owner in ("c", "d"):  # the second ask knows the thread is empty: its counts differ
        kept = await store.claim_and_open(
            **{**claim, **other_ids}, owner=owner, opening=[user("Y?")]
        )
        assert (kept.taken, kept.opened) == (True, [])  # appended the ordinary way
        await store.release_thread(**other_ids, owner=owner)

    fresh = {**claim, "thread_id": "fresh"}
    with pytest.raises(wm.ValidationError):
        await store.claim_and_open(**fresh, owner="d", opening=[{"role": "wizard"}])
    fresh_ids = {**ids, "thread_id": "fresh"}
    assert await store.claim_thread(**fresh_ids, owner="e", ttl_seconds=60)  # d took nothing
    await store.release_thread(**fresh_ids, owner="e")
    result = [{"role": "tool", "tool_call_id": "call_1", "content": "18C"}]
    unopened = await store.claim_and_open(**fresh, owner="f", opening=result)
    assert (unopened.taken, unopened.opened) == (True, [])  # a result cannot open a thread
    with pytest.raises(wm.NotFoundError):
        await store.list_turns(**fresh_ids)
    other = await store.claim_and_open(
        **{**claim, "tenant_id": f"{tenant}-other"}, owner="g", opening=[user("Theirs")]
    )
    assert [t.content for t in other.opened] == ["Theirs"]  # tenants apart
    assert len(await store.list_turns(**ids)) == 3


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_answer_given_with_the_ask_lock_back_is_stored_and_frees_it_in_one_go(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    """Whether the store wrote the thread last (one statement) or another worker did (the
    ordinary append), the lock is given back with the turns, and kept when they are refused."""
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    async with two_stores(backend, tmp_path) as (store, other):
        assert isinstance(store, wm.stores.AskLockStore)
        await store.append(**ids, messages=[user("one")])
        for owner, writer in (("a", store), ("b", other)):
            await writer.append(**ids, messages=[user(f"asked of {owner}")])
            assert await store.claim_thread(**ids, owner=owner, ttl_seconds=60)

            with pytest.raises(wm.ValidationError):
                await store.append_and_release(**ids, messages=[{"role": "bot"}], owner=owner)
            assert not await store.claim_thread(**ids, owner="c", ttl_seconds=60)  # still held

            stored = await store.append_and_release(
                **ids, messages=[assistant(f"answer of {owner}")], owner=owner, user_id="u"
            )
            assert [t.content for t in stored] == [f"answer of {owner}"]
            assert await store.claim_thread(**ids, owner="c", ttl_seconds=60)  # given back
            await store.release_thread(**ids, owner="c")

        turns = await other.list_turns(**ids)
    assert [t.content for t in turns] == [
        "one",
        "asked of a",
        "answer of a",
        "asked of b",
        "answer of b",
    ]


async def test_an_answer_given_with_another_owners_lock_leaves_that_lock(
    store: wm.Store, tenant: str
) -> None:
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    assert isinstance(store, wm.stores.AskLockStore)
    await store.append(**ids, messages=[user("one")])
    assert await store.claim_thread(**ids, owner="holder", ttl_seconds=60)

    await store.append_and_release(**ids, messages=[assistant("late")], owner="expired one")

    assert not await store.claim_thread(**ids, owner="c", ttl_seconds=60)
