"""The CompletionStore contract: stored chat completions, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assistant, user
from workingmem.stores import KeptRecords, RecordStore
from workingmem.stores.completions import StoredCompletion

from .test_responses_store import _response

pytestmark = pytest.mark.asyncio

BODY: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": 'Grüße 👋 \u0000 "quoted" \\'},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    "big": 2**80,
}
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "hi ✓"}]},
]


async def _thread(store: wm.Store, tenant: str, thread_id: str = "th") -> None:
    await store.append(
        tenant_id=tenant, thread_id=thread_id, messages=[user("hi"), assistant("hello")]
    )


def _completion(
    completion_id: str = "chatcmpl-1",
    *,
    thread_id: str = "th",
    model: str = "gpt-4o-mini",
    metadata: dict[str, str] | None = None,
) -> StoredCompletion:
    return StoredCompletion(
        completion_id=completion_id,
        thread_id=thread_id,
        model=model,
        body={**BODY, "id": completion_id},
        metadata=metadata or {},
    )


async def _put(store: wm.Store, tenant: str, *completions: StoredCompletion) -> None:
    for completion in completions:
        await store.put_completion(tenant_id=tenant, completion=completion, messages=MESSAGES)


async def _listed(store: wm.Store, tenant: str, **query: Any) -> list[str]:
    page = await store.list_completions(tenant_id=tenant, **query)
    return [c.completion_id for c in page.completions]


async def test_a_completion_round_trips_exactly(store: wm.Store, tenant: str) -> None:
    """Its body, its messages as sent, its model, metadata and thread come back as they went
    in; created_at is set by the store."""
    await _thread(store, tenant)
    before = datetime.now(UTC) - timedelta(seconds=1)
    await _put(store, tenant, _completion(metadata={"topic": "démo"}))
    got = await store.get_completion(tenant_id=tenant, completion_id="chatcmpl-1")
    assert (got.completion_id, got.thread_id, got.model) == ("chatcmpl-1", "th", "gpt-4o-mini")
    assert got.body == BODY
    assert got.metadata == {"topic": "démo"}
    assert got.created_at is not None
    assert got.created_at >= before
    messages = await store.completion_messages(tenant_id=tenant, completion_id="chatcmpl-1")
    assert messages == MESSAGES


async def test_another_tenants_completion_is_missing(store: wm.Store, tenant: str) -> None:
    """Every operation on another tenant's id is the NotFoundError of a missing one, and
    changes nothing; its list shows none of them."""
    await _thread(store, tenant)
    await _put(store, tenant, _completion(metadata={"k": "v"}))
    other = f"{tenant}-other"
    operations = [
        store.get_completion(tenant_id=other, completion_id="chatcmpl-1"),
        store.completion_messages(tenant_id=other, completion_id="chatcmpl-1"),
        store.set_completion_metadata(tenant_id=other, completion_id="chatcmpl-1", metadata={}),
        store.delete_completion(tenant_id=other, completion_id="chatcmpl-1"),
        store.list_completions(tenant_id=other, after="chatcmpl-1"),
        store.get_completion(tenant_id=tenant, completion_id="chatcmpl-missing"),
    ]
    messages = []
    for operation in operations:
        with pytest.raises(wm.NotFoundError) as missing:
            await operation
        messages.append(str(missing.value))
    assert messages[0] == messages[-1].replace("chatcmpl-missing", "chatcmpl-1")
    assert await _listed(store, other) == []
    got = await store.get_completion(tenant_id=tenant, completion_id="chatcmpl-1")
    assert got.metadata == {"k": "v"}


async def test_a_completion_needs_its_tenants_thread_and_a_free_id(
    store: wm.Store, tenant: str
) -> None:
    with pytest.raises(wm.NotFoundError):
        await _put(store, tenant, _completion())
    await _thread(store, tenant)
    await _put(store, tenant, _completion())
    with pytest.raises(wm.ConflictError):
        await _put(store, tenant, _completion(model="other"))
    assert (await store.get_completion(tenant_id=tenant, completion_id="chatcmpl-1")).model == (
        "gpt-4o-mini"
    )
    with pytest.raises(wm.NotFoundError):
        await _put(store, f"{tenant}-other", _completion("chatcmpl-2"))


async def test_bad_input_is_refused_and_stores_nothing(store: wm.Store, tenant: str) -> None:
    await _thread(store, tenant)
    bad: list[tuple[StoredCompletion, Any, str]] = [
        (_completion(metadata={"k": "v" * 513}), MESSAGES, "metadata['k']"),
        (_completion(metadata={f"k{i}": "v" for i in range(17)}), MESSAGES, "metadata"),
        (_completion(model=""), MESSAGES, "model"),
        (_completion("a/../b"), MESSAGES, "completion_id"),
        (_completion(), ["not a message"], "messages"),
        (_completion(), [{"content": float("nan")}], "messages"),
    ]
    for completion, messages, field in bad:
        with pytest.raises(wm.ValidationError) as refused:
            await store.put_completion(tenant_id=tenant, completion=completion, messages=messages)
        assert refused.value.field == field
    assert await _listed(store, tenant) == []
    with pytest.raises(wm.ValidationError) as limit:
        await store.list_completions(tenant_id=tenant, limit=101)
    assert limit.value.field == "limit"


async def test_a_list_pages_in_the_order_stored(store: wm.Store, tenant: str) -> None:
    await _thread(store, tenant)
    ids = [f"chatcmpl-{i}" for i in range(5)]
    await _put(store, tenant, *(_completion(i) for i in ids))
    assert await _listed(store, tenant) == ids
    assert await _listed(store, tenant, order="desc") == ids[::-1]
    page = await store.list_completions(tenant_id=tenant, limit=2)
    assert ([c.completion_id for c in page.completions], page.has_more) == (ids[:2], True)
    page = await store.list_completions(tenant_id=tenant, limit=2, after=ids[3])
    assert ([c.completion_id for c in page.completions], page.has_more) == ([ids[4]], False)
    assert await _listed(store, tenant, order="desc", after=ids[3], limit=2) == [ids[2], ids[1]]


async def test_a_list_filters_by_model_and_every_metadata_pair(
    store: wm.Store, tenant: str
) -> None:
    await _thread(store, tenant)
    await _put(
        store,
        tenant,
        _completion("a", metadata={"topic": "x", "team": "1"}),
        _completion("b", model="gpt-4o", metadata={"topic": "x"}),
        _completion("c", metadata={"topic": "y", "team": "1"}),
    )
    assert await _listed(store, tenant, model="gpt-4o-mini") == ["a", "c"]
    assert await _listed(store, tenant, metadata={"topic": "x"}) == ["a", "b"]
    assert await _listed(store, tenant, metadata={"topic": "x", "team": "1"}) == ["a"]
    assert await _listed(store, tenant, metadata={"topic": "x"}, model="gpt-4o") == ["b"]
    assert await _listed(store, tenant, metadata={"team": "2"}) == []


async def test_metadata_is_replaced_and_lists_by_the_new_pairs(
    store: wm.Store, tenant: str
) -> None:
    await _thread(store, tenant)
    await _put(store, tenant, _completion(metadata={"topic": "x"}))
    updated = await store.set_completion_metadata(
        tenant_id=tenant, completion_id="chatcmpl-1", metadata={"topic": "y", "k": "v"}
    )
    assert updated.metadata == {"topic": "y", "k": "v"}
    assert updated.body == BODY
    assert await _listed(store, tenant, metadata={"topic": "x"}) == []
    assert await _listed(store, tenant, metadata={"topic": "y"}) == ["chatcmpl-1"]
    with pytest.raises(wm.ValidationError):
        await store.set_completion_metadata(
            tenant_id=tenant,
            completion_id="chatcmpl-1",
            metadata={"k": 1},  # type: ignore[dict-item]
        )
    got = await store.get_completion(tenant_id=tenant, completion_id="chatcmpl-1")
    assert got.metadata == {"topic": "y", "k": "v"}


async def test_deleting_a_completion_or_its_thread_forgets_it(store: wm.Store, tenant: str) -> None:
    """A completion goes alone, or with its thread (cascade), its metadata's pairs with it;
    a fork copies none; the thread's turns stay when only the completion goes."""
    await _thread(store, tenant)
    await _thread(store, tenant, "kept")
    await _put(
        store,
        tenant,
        _completion("a", metadata={"k": "v"}),
        _completion("b", metadata={"k": "v"}),
        _completion("c", thread_id="kept", metadata={"k": "v"}),
    )
    await store.delete_completion(tenant_id=tenant, completion_id="a")
    with pytest.raises(wm.NotFoundError):
        await store.delete_completion(tenant_id=tenant, completion_id="a")
    assert (await store.get_thread(tenant_id=tenant, thread_id="th")).turn_count == 2
    await store.fork_thread(tenant_id=tenant, source_id="th", thread_id="fork", through_seq=2)
    await store.delete_thread(tenant_id=tenant, thread_id="th")
    assert await _listed(store, tenant, metadata={"k": "v"}) == ["c"]
    await _thread(store, tenant)
    await _put(store, tenant, _completion("b"))  # the id is free again
    assert await _listed(store, tenant) == ["c", "b"]


async def test_a_threads_records_are_counted_and_go_with_it(store: wm.Store, tenant: str) -> None:
    """`RecordStore`: its stored responses and completions, not another thread's; another
    tenant's thread is the missing one's error; a deleted thread has none left."""
    assert isinstance(store, RecordStore)
    await _thread(store, tenant)
    await _thread(store, tenant, "other")
    assert await store.count_records(tenant_id=tenant, thread_id="th") == KeptRecords(0, 0)
    await _put(store, tenant, _completion(), _completion("chatcmpl-2"))
    await _put(store, tenant, _completion("chatcmpl-3", thread_id="other"))
    await store.put_response(tenant_id=tenant, response=_response())
    assert await store.count_records(tenant_id=tenant, thread_id="th") == KeptRecords(1, 2)
    assert await store.count_records(tenant_id=tenant, thread_id="other") == KeptRecords(0, 1)
    for missing in (("th", f"{tenant}-x"), ("gone", tenant)):
        with pytest.raises(wm.NotFoundError):
            await store.count_records(tenant_id=missing[1], thread_id=missing[0])
    await store.delete_thread(tenant_id=tenant, thread_id="th")
    with pytest.raises(wm.NotFoundError):
        await store.count_records(tenant_id=tenant, thread_id="th")
    assert await store.count_records(tenant_id=tenant, thread_id="other") == KeptRecords(0, 1)
