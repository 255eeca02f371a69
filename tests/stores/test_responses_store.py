"""The ResponseStore contract: stored responses and conversations' metadata, on both backends."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assistant, user
from workingmem.stores import ResponseStore
from workingmem.stores.responses import Conversation, StoredResponse

pytestmark = pytest.mark.asyncio

BODY: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": 'Grüße 👋 \u0000 \u2028 "quoted" \\'}],
        }
    ],
    "usage": {"input_tokens": 12, "output_tokens": 3, "details": None},
    "metadata": {},
    "nested": [[[{"deep": [1, 2.5, -0.0, True, False, None]}]], []],
    "big": 2**80,
    "float": 0.1,
    "unicode_key_é": "ünïcode",
}


async def _thread(store: wm.Store, tenant: str, thread_id: str = "th") -> wm.Thread:
    await store.append(
        tenant_id=tenant, thread_id=thread_id, messages=[user("hi"), assistant("hello")]
    )
    return await store.get_thread(tenant_id=tenant, thread_id=thread_id)


def _response(
    response_id: str = "resp_1", thread_id: str = "th", body: dict[str, Any] | None = None
) -> StoredResponse:
    return StoredResponse(
        response_id=response_id,
        thread_id=thread_id,
        input_seq=1,
        output_seq=2,
        last_seq=2,
        body=BODY if body is None else body,
    )


async def test_a_response_round_trips_exactly(store: wm.Store, tenant: str) -> None:
    """Its seqs, its thread and its body (unicode, nesting, big ints, floats) come back as
    they went in; created_at is set by the store."""
    await _thread(store, tenant)
    before = datetime.now(UTC)
    await store.put_response(tenant_id=tenant, response=_response())
    got = await store.get_response(tenant_id=tenant, response_id="resp_1")
    assert (got.response_id, got.thread_id, got.input_seq, got.output_seq, got.last_seq) == (
        "resp_1",
        "th",
        1,
        2,
        2,
    )
    assert got.body == BODY
    assert got.body["big"] == 2**80
    assert isinstance(got.body["big"], int)
    assert got.created_at is not None
    assert got.created_at.tzinfo is not None
    assert before - timedelta(seconds=1) <= got.created_at <= datetime.now(UTC)


async def test_carried_instructions_round_trip(store: wm.Store, tenant: str) -> None:
    """Any text (a NUL, a line separator, emoji) or none; not a text is refused, nothing
    stored."""
    await _thread(store, tenant)
    text = 'Be brief.\u0000 \u2028 "Grüße" 👋'
    for response_id, carried in (("with", text), ("without", None)):
        response = dataclasses.replace(_response(response_id), carried_instructions=carried)
        await store.put_response(tenant_id=tenant, response=response)
        got = await store.get_response(tenant_id=tenant, response_id=response_id)
        assert got.carried_instructions == carried
    wrong = dataclasses.replace(_response("wrong"), carried_instructions=3)  # type: ignore[arg-type]
    with pytest.raises(wm.ValidationError):
        await store.put_response(tenant_id=tenant, response=wrong)
    with pytest.raises(wm.NotFoundError):
        await store.get_response(tenant_id=tenant, response_id="wrong")


async def test_carried_tools_round_trip(store: wm.Store, tenant: str) -> None:
    """A list of tools, as given, or none; not a list is refused, nothing stored."""
    await _thread(store, tenant)
    crm = {"type": "namespace", "name": "crm", "description": "Grüße 👋", "tools": []}
    tools: list[dict[str, Any]] = [crm, {"type": "function", "name": "f", "defer_loading": True}]
    for response_id, carried in (("with", tools), ("without", None)):
        response = dataclasses.replace(_response(response_id), carried_tools=carried)
        await store.put_response(tenant_id=tenant, response=response)
        got = await store.get_response(tenant_id=tenant, response_id=response_id)
        assert got.carried_tools == carried
    wrong = dataclasses.replace(_response("wrong"), carried_tools={"tools": []})  # type: ignore[arg-type]
    with pytest.raises(wm.ValidationError):
        await store.put_response(tenant_id=tenant, response=wrong)
    with pytest.raises(wm.NotFoundError):
        await store.get_response(tenant_id=tenant, response_id="wrong")


async def test_a_thread_s_newest_response_is_the_one_whose_output_ends_last(
    store: wm.Store, tenant: str
) -> None:
    assert isinstance(store, ResponseStore)
    await _thread(store, tenant)
    assert await store.newest_response(tenant_id=tenant, thread_id="th") is None
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("on"), assistant("ok")])
    later = dataclasses.replace(_response("later"), input_seq=3, output_seq=4, last_seq=4)
    for response in (later, _response("earlier")):  # stored out of order
        await store.put_response(tenant_id=tenant, response=response)
    newest = await store.newest_response(tenant_id=tenant, thread_id="th")
    assert newest is not None
    assert (newest.response_id, newest.last_seq) == ("later", 4)
    assert await store.newest_response(tenant_id=tenant + "-other", thread_id="th") is None
    assert await store.newest_response(tenant_id=tenant, thread_id="nothing") is None


async def test_created_at_is_the_stores_not_the_callers(store: wm.Store, tenant: str) -> None:
    await _thread(store, tenant)
    given = datetime(2001, 1, 1, tzinfo=UTC)
    response = StoredResponse(
        response_id="r",
        thread_id="th",
        input_seq=1,
        output_seq=2,
        last_seq=2,
        body={},
        created_at=given,
    )
    await store.put_response(tenant_id=tenant, response=response)
    got = await store.get_response(tenant_id=tenant, response_id="r")
    assert got.created_at is not None
    assert got.created_at > given
    assert got.body == {}


async def test_a_response_needs_its_thread(store: wm.Store, tenant: str) -> None:
    with pytest.raises(wm.NotFoundError) as caught:
        await store.put_response(tenant_id=tenant, response=_response(thread_id="nope"))
    assert (caught.value.kind, caught.value.key) == ("thread", "nope")
    with pytest.raises(wm.NotFoundError):
        await store.get_response(tenant_id=tenant, response_id="resp_1")


async def test_a_taken_id_is_a_conflict_and_the_first_record_stays(
    store: wm.Store, tenant: str
) -> None:
    await _thread(store, tenant)
    await _thread(store, tenant, "other")
    await store.put_response(tenant_id=tenant, response=_response())
    with pytest.raises(wm.ConflictError):
        await store.put_response(
            tenant_id=tenant, response=_response(thread_id="other", body={"x": 1})
        )
    got = await store.get_response(tenant_id=tenant, response_id="resp_1")
    assert (got.thread_id, got.body) == ("th", BODY)


async def test_a_missing_response_is_not_found(store: wm.Store, tenant: str) -> None:
    with pytest.raises(wm.NotFoundError) as read:
        await store.get_response(tenant_id=tenant, response_id="resp_x")
    assert (read.value.kind, read.value.key) == ("response", "resp_x")
    with pytest.raises(wm.NotFoundError) as deleted:
        await store.delete_response(tenant_id=tenant, response_id="resp_x")
    assert (deleted.value.kind, deleted.value.key) == ("response", "resp_x")


async def test_deleting_a_response_keeps_its_turns(store: wm.Store, tenant: str) -> None:
    await _thread(store, tenant)
    await store.put_response(tenant_id=tenant, response=_response())
    await store.delete_response(tenant_id=tenant, response_id="resp_1")
    with pytest.raises(wm.NotFoundError):
        await store.get_response(tenant_id=tenant, response_id="resp_1")
    with pytest.raises(wm.NotFoundError):
        await store.delete_response(tenant_id=tenant, response_id="resp_1")
    assert len(await store.list_turns(tenant_id=tenant, thread_id="th")) == 2
    await store.put_response(tenant_id=tenant, response=_response())  # the id is free again
    assert (await store.get_response(tenant_id=tenant, response_id="resp_1")).body == BODY


async def test_a_response_is_found_by_its_answer_key(store: wm.Store, tenant: str) -> None:
    """`find_answered`: the thread of the tenant's newest record kept under the key; none for
    a key no record keeps, for another tenant, and once the record's thread is deleted."""
    assert isinstance(store, ResponseStore)
    await _thread(store, tenant, "first")
    await _thread(store, tenant, "second")
    await store.put_response(
        tenant_id=tenant,
        response=dataclasses.replace(_response("resp_1", "first"), answer_key="k1"),
    )
    assert await store.find_answered(tenant_id=tenant, key="k1") == "first"
    got = await store.get_response(tenant_id=tenant, response_id="resp_1")
    assert got.answer_key == "k1"
    await store.put_response(tenant_id=tenant, response=_response("resp_2", "second"))
    assert (await store.get_response(tenant_id=tenant, response_id="resp_2")).answer_key is None
    await store.put_response(
        tenant_id=tenant,
        response=dataclasses.replace(_response("resp_3", "second"), answer_key="k1"),
    )
    assert await store.find_answered(tenant_id=tenant, key="k1") == "second"  # the newest
    assert await store.find_answered(tenant_id=tenant, key="k2") is None
    assert await store.find_answered(tenant_id=f"{tenant}-b", key="k1") is None
    await store.delete_thread(tenant_id=tenant, thread_id="second")
    assert await store.find_answered(tenant_id=tenant, key="k1") == "first"


@pytest.mark.parametrize("key", ["", "k" * 129, 7])
async def test_an_answer_key_must_be_a_short_text(
    store: wm.Store, tenant: str, key: object
) -> None:
    assert isinstance(store, ResponseStore)
    await _thread(store, tenant)
    bad = dataclasses.replace(_response(), answer_key=key)  # type: ignore[arg-type]
    with pytest.raises(wm.ValidationError):
        await store.put_response(tenant_id=tenant, response=bad)
    with pytest.raises(wm.ValidationError):
        await store.find_answered(tenant_id=tenant, key=key)  # type: ignore[arg-type]
    with pytest.raises(wm.NotFoundError):
        await store.get_response(tenant_id=tenant, response_id="resp_1")


async def test_the_same_id_in_two_tenants_is_two_records(store: wm.Store, tenant: str) -> None:
    """And neither tenant can read, delete or overwrite the other's."""
    other = f"{tenant}-b"
    await _thread(store, tenant)
    await _thread(store, other)
    await store.put_response(tenant_id=tenant, response=_response(body={"who": "a"}))
    await store.put_response(tenant_id=other, response=_response(body={"who": "b"}))
    assert (await store.get_response(tenant_id=tenant, response_id="resp_1")).body == {"who": "a"}
    assert (await store.get_response(tenant_id=other, response_id="resp_1")).body == {"who": "b"}
    await store.delete_response(tenant_id=other, response_id="resp_1")
    assert (await store.get_response(tenant_id=tenant, response_id="resp_1")).body == {"who": "a"}


async def test_another_tenants_response_and_thread_are_not_found(
    store: wm.Store, tenant: str
) -> None:
    other = f"{tenant}-b"
    await _thread(store, tenant)
    await store.put_response(tenant_id=tenant, response=_response())
    with pytest.raises(wm.NotFoundError) as foreign:
        await store.get_response(tenant_id=other, response_id="resp_1")
    with pytest.raises(wm.NotFoundError) as missing:
        await store.get_response(tenant_id=other, response_id="resp_none")
    assert str(foreign.value).replace("resp_1", "X") == str(missing.value).replace("resp_none", "X")
    with pytest.raises(wm.NotFoundError):
        await store.delete_response(tenant_id=other, response_id="resp_1")
    with pytest.raises(wm.NotFoundError) as thread:  # another tenant's thread: not theirs
        await store.put_response(tenant_id=other, response=_response(body={"x": 1}))
    assert thread.value.kind == "thread"
    with pytest.raises(wm.NotFoundError):
        await store.get_conversation(tenant_id=other, conversation_id="th")
    with pytest.raises(wm.NotFoundError):
        await store.set_conversation_metadata(
            tenant_id=other, conversation_id="th", metadata={"k": "v"}
        )
    assert (await store.get_response(tenant_id=tenant, response_id="resp_1")).body == BODY
    assert (await store.get_conversation(tenant_id=tenant, conversation_id="th")).metadata == {}


async def test_every_thread_is_a_conversation(store: wm.Store, tenant: str) -> None:
    thread = await _thread(store, tenant)
    conversation = await store.get_conversation(tenant_id=tenant, conversation_id="th")
    assert conversation == Conversation(
        conversation_id="th", created_at=thread.created_at, metadata={}
    )
    with pytest.raises(wm.NotFoundError) as caught:
        await store.get_conversation(tenant_id=tenant, conversation_id="nope")
    assert (caught.value.kind, caught.value.key) == ("conversation", "nope")


async def test_metadata_is_replaced_not_merged(store: wm.Store, tenant: str) -> None:
    thread = await _thread(store, tenant)
    first = await store.set_conversation_metadata(
        tenant_id=tenant, conversation_id="th", metadata={"topic": "démo 👋", "a": ""}
    )
    assert first == Conversation(
        conversation_id="th", created_at=thread.created_at, metadata={"topic": "démo 👋", "a": ""}
    )
    assert await store.get_conversation(tenant_id=tenant, conversation_id="th") == first
    second = await store.set_conversation_metadata(
        tenant_id=tenant, conversation_id="th", metadata={"b": "2"}
    )
    assert second.metadata == {"b": "2"}
    assert (await store.get_conversation(tenant_id=tenant, conversation_id="th")).metadata == {
        "b": "2"
    }
    cleared = await store.set_conversation_metadata(
        tenant_id=tenant, conversation_id="th", metadata={}
    )
    assert cleared.metadata == {}
    assert (await store.get_conversation(tenant_id=tenant, conversation_id="th")).metadata == {}


async def test_metadata_of_a_missing_conversation_is_not_found(
    store: wm.Store, tenant: str
) -> None:
    with pytest.raises(wm.NotFoundError) as caught:
        await store.set_conversation_metadata(
            tenant_id=tenant, conversation_id="nope", metadata={"k": "v"}
        )
    assert (caught.value.kind, caught.value.key) == ("conversation", "nope")
    with pytest.raises(wm.NotFoundError):  # nor was a thread created
        await store.get_thread(tenant_id=tenant, thread_id="nope")


async def test_metadata_at_the_limits_is_accepted(store: wm.Store, tenant: str) -> None:
    await _thread(store, tenant)
    metadata = {f"{i:02d}".ljust(64, "k"): "v" * 512 for i in range(16)}
    stored = await store.set_conversation_metadata(
        tenant_id=tenant, conversation_id="th", metadata=metadata
    )
    assert stored.metadata == metadata
    assert (await store.get_conversation(tenant_id=tenant, conversation_id="th")).metadata == (
        metadata
    )


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        pytest.param(["k", "v"], "metadata", id="not-a-mapping"),
        pytest.param("k=v", "metadata", id="a-string"),
        pytest.param({f"k{i}": "v" for i in range(17)}, "metadata", id="17-keys"),
        pytest.param({"k" * 65: "v"}, f"metadata[{'k' * 65!r}]", id="key-65-chars"),
        pytest.param({"k": "v" * 513}, "metadata['k']", id="value-513-chars"),
        pytest.param({"k": 1}, "metadata['k']", id="value-not-a-string"),
        pytest.param({"k": None}, "metadata['k']", id="value-none"),
        pytest.param({1: "v"}, "metadata", id="key-not-a-string"),
        pytest.param({"k": "\ud800"}, "metadata['k']", id="lone-surrogate"),
    ],
)
async def test_bad_metadata_is_refused_and_nothing_changes(
    store: wm.Store, tenant: str, metadata: object, field: str
) -> None:
    await _thread(store, tenant)
    await store.set_conversation_metadata(
        tenant_id=tenant, conversation_id="th", metadata={"kept": "yes"}
    )
    bad: Mapping[str, str] = metadata  # type: ignore[assignment]
    with pytest.raises(wm.ValidationError) as caught:
        await store.set_conversation_metadata(tenant_id=tenant, conversation_id="th", metadata=bad)
    assert caught.value.field == field
    assert (await store.get_conversation(tenant_id=tenant, conversation_id="th")).metadata == {
        "kept": "yes"
    }


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"response_id": ""}, "response_id", id="empty-id"),
        pytest.param({"response_id": " r"}, "response_id", id="padded-id"),
        pytest.param({"response_id": "a\u202eb"}, "response_id", id="bidi-override-id"),
        pytest.param({"thread_id": ""}, "thread_id", id="empty-thread"),
        pytest.param({"input_seq": -1}, "response.input_seq", id="negative-seq"),
        pytest.param({"output_seq": True}, "response.output_seq", id="bool-seq"),
        pytest.param({"last_seq": "2"}, "response.last_seq", id="str-seq"),
        pytest.param({"body": {"x": {1, 2}}}, "response.body", id="a-set"),
        pytest.param({"body": {"x": float("nan")}}, "response.body", id="nan"),
        pytest.param({"body": {"x": "\udfff"}}, "response.body", id="lone-surrogate"),
        pytest.param({"body": ["not", "an", "object"]}, "response.body", id="a-list"),
    ],
)
async def test_a_bad_response_is_refused_and_nothing_is_stored(
    store: wm.Store, tenant: str, changes: dict[str, Any], field: str
) -> None:
    await _thread(store, tenant)
    fields: dict[str, Any] = {
        "response_id": "resp_1",
        "thread_id": "th",
        "input_seq": 1,
        "output_seq": 2,
        "last_seq": 2,
        "body": {},
    }
    fields.update(changes)
    with pytest.raises(wm.ValidationError) as caught:
        await store.put_response(tenant_id=tenant, response=StoredResponse(**fields))
    assert caught.value.field == field
    with pytest.raises((wm.NotFoundError, wm.ValidationError)):
        await store.get_response(tenant_id=tenant, response_id=fields["response_id"])


async def test_bad_ids_in_reads_are_validation_errors(store: wm.Store, tenant: str) -> None:
    with pytest.raises(wm.ValidationError) as response:
        await store.get_response(tenant_id=tenant, response_id="")
    assert response.value.field == "response_id"
    with pytest.raises(wm.ValidationError) as deleted:
        await store.delete_response(tenant_id="", response_id="r")
    assert deleted.value.field == "tenant_id"
    with pytest.raises(wm.ValidationError) as conversation:
        await store.get_conversation(tenant_id=tenant, conversation_id="a/../b")
    assert conversation.value.field == "conversation_id"


async def test_deleting_the_thread_deletes_its_responses_and_metadata(
    store: wm.Store, tenant: str
) -> None:
    """They go with the thread's row (a cascade: SQLite's foreign keys are on), and a new
    thread of the same id starts with neither."""
    await _thread(store, tenant)
    await _thread(store, tenant, "kept")
    await store.put_response(tenant_id=tenant, response=_response())
    await store.put_response(tenant_id=tenant, response=_response("resp_2"))
    await store.put_response(tenant_id=tenant, response=_response("resp_kept", thread_id="kept"))
    await store.set_conversation_metadata(
        tenant_id=tenant, conversation_id="th", metadata={"k": "v"}
    )
    await store.set_conversation_metadata(
        tenant_id=tenant, conversation_id="kept", metadata={"k": "kept"}
    )
    await store.delete_thread(tenant_id=tenant, thread_id="th")
    for response_id in ("resp_1", "resp_2"):
        with pytest.raises(wm.NotFoundError):
            await store.get_response(tenant_id=tenant, response_id=response_id)
    with pytest.raises(wm.NotFoundError):
        await store.get_conversation(tenant_id=tenant, conversation_id="th")
    await _thread(store, tenant)
    assert (await store.get_conversation(tenant_id=tenant, conversation_id="th")).metadata == {}
    with pytest.raises(wm.NotFoundError):
        await store.get_response(tenant_id=tenant, response_id="resp_1")
    await store.put_response(tenant_id=tenant, response=_response())  # the id is free again
    kept = await store.get_response(tenant_id=tenant, response_id="resp_kept")
    assert kept.thread_id == "kept"
    assert (await store.get_conversation(tenant_id=tenant, conversation_id="kept")).metadata == {
        "k": "kept"
    }


async def test_a_fork_copies_neither_responses_nor_metadata(store: wm.Store, tenant: str) -> None:
    await _thread(store, tenant)
    await store.put_response(tenant_id=tenant, response=_response())
    await store.set_conversation_metadata(
        tenant_id=tenant, conversation_id="th", metadata={"k": "v"}
    )
    fork = await store.fork_thread(
        tenant_id=tenant, source_id="th", thread_id="fork", through_seq=2
    )
    conversation = await store.get_conversation(tenant_id=tenant, conversation_id="fork")
    assert conversation == Conversation(
        conversation_id="fork", created_at=fork.created_at, metadata={}
    )
    assert (await store.get_response(tenant_id=tenant, response_id="resp_1")).thread_id == "th"
    assert (await store.get_conversation(tenant_id=tenant, conversation_id="th")).metadata == {
        "k": "v"
    }
    await store.delete_thread(tenant_id=tenant, thread_id="fork")  # the source's stay
    assert (await store.get_response(tenant_id=tenant, response_id="resp_1")).body == BODY


async def test_the_store_is_a_response_store(store: wm.Store) -> None:
    assert isinstance(store, wm.stores.ResponseStore)
    assert isinstance(store, wm.Store)


async def test_a_conversation_awaiting_its_answer_is_found_by_its_key(
    store: wm.Store, tenant: str
) -> None:
    """The newest mark of a key wins; another tenant's, a deleted thread's are not found."""
    for thread in ("first", "second"):
        await store.append(tenant_id=tenant, thread_id=thread, messages=[user("hi")])
    assert await store.find_awaiting(tenant_id=tenant, key="k") is None
    await store.mark_awaiting(tenant_id=tenant, conversation_id="first", key="k")
    assert await store.find_awaiting(tenant_id=tenant, key="k") == "first"
    await store.mark_awaiting(tenant_id=tenant, conversation_id="first", key="other")
    assert await store.find_awaiting(tenant_id=tenant, key="k") is None  # replaced
    await store.mark_awaiting(tenant_id=tenant, conversation_id="second", key="other")
    await store.append(tenant_id=tenant, thread_id="first", messages=[user("newer")])
    assert await store.find_awaiting(tenant_id=tenant, key="other") == "first"
    assert await store.find_awaiting(tenant_id=f"{tenant}-x", key="other") is None
    await store.delete_thread(tenant_id=tenant, thread_id="first")
    assert await store.find_awaiting(tenant_id=tenant, key="other") == "second"
    with pytest.raises(wm.NotFoundError):
        await store.mark_awaiting(tenant_id=tenant, conversation_id="gone", key="k")


async def test_a_mark_that_comes_after_a_newer_turn_leaves_the_newer_mark(
    store: wm.Store, tenant: str
) -> None:
    """A mark naming its turn replaces the one noted only while that turn is the thread's
    newest: the mark of an answer written late, after the next answer's, is not the one
    kept (and one written in time is)."""
    first = await store.append(tenant_id=tenant, thread_id="th", messages=[user("one")])
    await store.mark_awaiting(
        tenant_id=tenant, conversation_id="th", key="one", newest_seq=first[-1].seq
    )
    later = await store.append(tenant_id=tenant, thread_id="th", messages=[user("two")])
    await store.mark_awaiting(
        tenant_id=tenant, conversation_id="th", key="two", newest_seq=later[-1].seq
    )
    await store.mark_awaiting(  # the first answer's mark, late
        tenant_id=tenant, conversation_id="th", key="one", newest_seq=first[-1].seq
    )
    assert await store.find_awaiting(tenant_id=tenant, key="two") == "th"
    assert await store.find_awaiting(tenant_id=tenant, key="one") is None
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(wm.ValidationError):
            await store.mark_awaiting(
                tenant_id=tenant,
                conversation_id="th",
                key="bad",
                newest_seq=bad,  # type: ignore[arg-type]
            )
    assert await store.find_awaiting(tenant_id=tenant, key="two") == "th"
