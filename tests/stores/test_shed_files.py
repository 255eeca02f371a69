"""Large files kept out of a window's read: a turn whose message carries 64 KiB or more of
base64 is stored whole and with a copy that names its files, which a tail read gives instead
(`CountedTurn.held`: the bytes left in the store); a load reads the turn whole again for the
files its request sends, the newest first, and leaves the older ones named. Both stores."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assistant
from workingmem._inline_files import SHED_BYTES
from workingmem.memory import KnownThread
from workingmem.placement import NewestRead, place
from workingmem.stores.base import read_turns_at
from workingmem.tokens import tokenizer_for

pytestmark = pytest.mark.asyncio

MODEL = wm.ModelInfo(id="gpt-4o", context_window=128_000)
OTHER_MODEL = wm.ModelInfo(id="claude-sonnet-4-5", context_window=200_000)


def photo(name: str, size: int) -> Any:
    """A user message with an image of `size` bytes of base64 (a data URL)."""
    data = base64.b64encode(name.encode() * (size // len(name) * 3 // 4)).decode()[:size]
    url = f"data:image/png;base64,{data}"
    return {
        "role": "user",
        "content": [{"type": "text", "text": f"Look at {name}."}, image(url)],
    }


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


NAMED = {"type": "text", "text": "[image, attached earlier]"}


async def test_a_tail_read_names_large_files_and_the_turn_stays_whole(
    store: wm.Store, tenant: str
) -> None:
    big, small = photo("big", 3 * 2**20), photo("small", SHED_BYTES - 1_000)
    await store.append(tenant_id=tenant, thread_id="th", messages=[big, assistant("A cat."), small])
    tokenizer = tokenizer_for(MODEL)
    counting = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    assert counting.turns[0].message == big  # a turn not counted yet is counted as stored
    tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    first, _, last = tail.turns
    assert first.message == {**big, "content": [big["content"][0], NAMED]}
    assert first.held == len(big["content"][1]["image_url"]["url"])
    assert first.tokens == tokenizer.count_message(big)  # its file included
    assert (last.message, last.held) == (small, 0)  # under the size: read whole
    listed = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert listed[0].to_message() == big
    read = await read_turns_at(store, tenant_id=tenant, thread_id="th", seqs=[3, 1])
    assert [turn.to_message() for turn in read] == [big, small]


async def test_a_tokenizer_new_to_the_thread_counts_the_files_it_was_not_given(
    store: wm.Store, tenant: str
) -> None:
    big = photo("big", 200_000)
    await store.append(tenant_id=tenant, thread_id="th", messages=[big])
    other = tokenizer_for(OTHER_MODEL)
    (turn,) = (
        await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=other, limit=8)
    ).turns
    assert turn.tokens == other.count_message(big)
    again = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=other, limit=8)
    assert again.turns[0].tokens == turn.tokens  # as the count was remembered


async def test_a_fork_keeps_the_named_copy(store: wm.Store, tenant: str) -> None:
    big = photo("big", 200_000)
    await store.append(tenant_id=tenant, thread_id="th", messages=[big, assistant("A cat.")])
    await store.fork_thread(tenant_id=tenant, source_id="th", thread_id="fork", through_seq=2)
    tokenizer = tokenizer_for(MODEL)
    await store.read_tail(tenant_id=tenant, thread_id="fork", tokenizer=tokenizer, limit=8)
    tail = await store.read_tail(tenant_id=tenant, thread_id="fork", tokenizer=tokenizer, limit=8)
    assert tail.turns[0].held == len(big["content"][1]["image_url"]["url"])
    assert (await store.list_turns(tenant_id=tenant, thread_id="fork"))[0].to_message() == big


@pytest.mark.parametrize("file_bytes", [None, 500_000], ids=["all", "limited"])
async def test_a_load_reads_back_the_files_its_request_sends(
    store: wm.Store, tenant: str, file_bytes: int | None
) -> None:
    """Three photos of 200,000 bytes of base64: a load reads them all back by default; with
    room for two, the newest two, and the oldest stays named (`named_files`)."""
    photos = [photo(name, 200_000) for name in ("one", "two", "three")]
    for shown in photos:
        await store.append(tenant_id=tenant, thread_id="th", messages=[shown, assistant("Seen.")])
    memory = wm.WorkingMemory(store=store)
    tokenizer = tokenizer_for(MODEL)
    await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    loaded = await memory.load(
        tenant_id=tenant,
        thread_id="th",
        model=MODEL,
        profile=wm.Profile(id="p", working_memory=wm.Strategy.SLIDING_WINDOW),
        budget_tokens=100_000,
        file_bytes=file_bytes,
    )
    users = [m for m in loaded.messages if m["role"] == "user"]
    if file_bytes is None:
        assert users == photos
        assert loaded.named_files == ()
    else:
        one = photos[0]
        assert users == [{**one, "content": [one["content"][0], NAMED]}, *photos[1:]]
        assert loaded.named_files == (1,)


class ListingOnly:
    """A store of a host's that lists turns and reads none by seq (no `turns_at`)."""

    def __init__(self, store: wm.Store) -> None:
        self._store = store

    async def list_turns(self, **page: Any) -> list[wm.Turn]:
        return await self._store.list_turns(**page)


async def test_turns_by_seq_from_a_store_that_only_lists_them(store: wm.Store, tenant: str) -> None:
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[photo("one", 100_000), assistant("A."), photo("two", 100_000)],
    )
    listing: Any = ListingOnly(store)
    read = await read_turns_at(listing, tenant_id=tenant, thread_id="th", seqs=[3, 1, 9])
    direct = await read_turns_at(store, tenant_id=tenant, thread_id="th", seqs=[3, 1, 9])
    assert [turn.seq for turn in read] == [turn.seq for turn in direct] == [1, 3]
    assert [turn.to_message() for turn in read] == [turn.to_message() for turn in direct]


class CountingReads:
    """The store, telling which turns were read whole by seq (`turns_at`)."""

    def __init__(self, store: wm.Store) -> None:
        self._store = store
        self.read: list[int] = []

    async def turns_at(self, **given: Any) -> list[wm.Turn]:
        self.read += list(given["seqs"])
        return await self._store.turns_at(**given)  # type: ignore[attr-defined,no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_resent_file_is_the_stored_turn_and_another_of_its_size_an_edit(
    store: wm.Store, tenant: str
) -> None:
    """R26 and R27 with files the tail read leaves in the store: a history resent with its
    photo is the stored thread (the turn read whole to tell), the same words with another photo
    of the same size are an edit, and a new question reads no photo."""
    big = photo("big", 200_000)
    url = big["content"][1]["image_url"]["url"]
    other = {**big, "content": [big["content"][0], image(url[:-1] + "x")]}
    await store.append(tenant_id=tenant, thread_id="th", messages=[big, assistant("A cat.")])
    tokenizer = tokenizer_for(MODEL)
    for _ in range(2):  # counted, then read as a window reads it
        tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    assert tail.turns[0].held
    question = {"role": "user", "content": "And now?"}

    async def placed(request: list[Any]) -> tuple[int, list[int]]:
        counting: Any = CountingReads(store)
        found = await place(
            counting, tenant_id=tenant, thread_id="th", request=request, tokenizer=tokenizer
        )
        return found.start, counting.read

    assert await placed([big, assistant("A cat."), question]) == (2, [1])
    assert (await placed([other, assistant("A cat."), question]))[0] == 0
    assert await placed([question]) == (0, [])


async def test_a_native_item_with_large_files_reads_back_unchanged(
    store: wm.Store, tenant: str
) -> None:
    """R25 for a turn the tail read names: its item comes back unchanged in its format."""
    data = base64.b64encode(b"png" * 100_000).decode()
    source = {"type": "base64", "media_type": "image/png", "data": data}
    item = {"role": "user", "content": [{"type": "image", "source": source}]}
    view = {"role": "user", "content": [image(f"data:image/png;base64,{data}")]}
    turn = wm.NativeItem(format="anthropic.messages", item=item, message=view)
    await store.append(tenant_id=tenant, thread_id="th", messages=[turn])
    tokenizer = tokenizer_for(MODEL)
    for _ in range(2):
        tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    assert tail.turns[0].held  # the window reads the named copy
    (listed,) = await store.list_turns(tenant_id=tenant, thread_id="th")
    (read,) = await read_turns_at(store, tenant_id=tenant, thread_id="th", seqs=[1])
    assert listed.in_format("anthropic.messages") == read.in_format("anthropic.messages") == item


async def test_a_file_placement_read_whole_is_not_read_again_for_the_window(
    store: wm.Store, tenant: str
) -> None:
    """A client that resends its history with its files (Claude Code): placement reads the
    stored turn whole to compare it, and the window the ask loads after it, from the same
    read, sends it without reading it again."""
    big = photo("big", 200_000)
    await store.append(tenant_id=tenant, thread_id="th", messages=[big, assistant("A cat.")])
    tokenizer = tokenizer_for(MODEL)
    for _ in range(2):  # counted, then read as the ask lock reads it
        tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    assert tail is not None
    assert tail.turns[0].held
    counting: Any = CountingReads(store)
    read = NewestRead(tail)
    request = [big, assistant("A cat."), {"role": "user", "content": "And now?"}]
    found = await place(
        counting, tenant_id=tenant, thread_id="th", request=request, tokenizer=tokenizer, read=read
    )
    assert found.start == 2
    await store.append(tenant_id=tenant, thread_id="th", messages=request[2:])
    appended = await store.list_turns(tenant_id=tenant, thread_id="th", after_seq=2)
    loaded = await wm.WorkingMemory(store=counting).load(
        tenant_id=tenant,
        thread_id="th",
        model=MODEL,
        profile=wm.Profile(id="p", working_memory=wm.Strategy.SLIDING_WINDOW),
        budget_tokens=100_000,
        file_bytes=10 * 2**20,
        known=KnownThread.after(read.tail, appended, tokenizer),
    )
    assert counting.read == [1]  # once, by placement
    assert next(m for m in loaded.messages if m["role"] == "user") == big
