"""Turns kept verbatim: each format's original item comes back unchanged, beside its chat view.

Each item carries what OpenAI's chat format cannot: a Responses reasoning item's
``encrypted_content``, an Anthropic thinking block's ``signature``, a chat message's
``refusal`` and ``annotations`` (which the chat view drops). Windows count the chat view.
"""

from __future__ import annotations

from typing import Any

import pytest

import workingmem as wm
from tests.helpers import user
from workingmem.formats.chat_answer import own_fields, with_chat_original
from workingmem.stores.sql import SQLStore

pytestmark = pytest.mark.asyncio

ITEMS: dict[str, tuple[dict[str, Any], wm.Message]] = {
    "openai.chat": (
        {
            "role": "assistant",
            "content": "I can't share that, but here is a summary.",
            "refusal": None,
            "annotations": [{"type": "url_citation", "url_citation": {"url": "https://x.test"}}],
            "audio": {"id": "audio_1", "expires_at": 1_700_000_000, "transcript": "hi"},
        },
        {"role": "assistant", "content": "I can't share that, but here is a summary."},
    ),
    "openai.responses": (
        {
            "type": "reasoning",
            "id": "rs_123",
            "summary": [{"type": "summary_text", "text": "Thinking about Lyon."}],
            "encrypted_content": "gAAAAABo...opaque...==",
            "status": None,
        },
        {"role": "assistant", "content": "(reasoning: Thinking about Lyon.)"},
    ),
    "anthropic.messages": (
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "The user wants Lyon.", "signature": "EqQBCkgI"},
                {"type": "text", "text": "Lyon is lovely in May."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"c": "Lyon"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Lyon is lovely in May.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"c": "Lyon"}'},
                }
            ],
        },
    ),
}


@pytest.mark.parametrize("format", sorted(ITEMS))
async def test_a_native_item_reads_back_unchanged_in_its_format(
    store: wm.Store, tenant: str, format: str
) -> None:
    item, view = ITEMS[format]
    stored = await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[user("hello"), wm.NativeItem(format=format, item=item, message=view)],
    )
    assert stored[1].in_format(format) == item
    first, second = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert (first.format, first.item) == (wm.CHAT_FORMAT, None)
    assert first.in_format(wm.CHAT_FORMAT) == user("hello")
    assert second.format == format
    assert second.in_format(format) == item  # every field, the chat view's lacks included
    assert second.in_format("another.format") is None
    assert second.to_message() == view
    tokenizer = wm.tokens.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))
    tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    assert tail.turns[1].message == view
    assert tail.turns[1].tokens == tokenizer.count_message(view)


async def test_a_stored_turn_appended_again_keeps_its_original(
    store: wm.Store, tenant: str
) -> None:
    item, view = ITEMS["openai.responses"]
    (turn,) = await store.append(
        tenant_id=tenant,
        thread_id="a",
        messages=[wm.NativeItem(format="openai.responses", item=item, message=view)],
    )
    await store.append(tenant_id=tenant, thread_id="b", messages=[user("x"), turn])
    copied = (await store.list_turns(tenant_id=tenant, thread_id="b"))[1]
    assert copied.in_format("openai.responses") == item


async def test_replace_tells_apart_turns_whose_originals_differ(
    store: wm.Store, tenant: str
) -> None:
    """Same chat view, another original (a new signature): not the same turn."""
    item, view = ITEMS["anthropic.messages"]
    resigned = {
        **item,
        "content": [{**item["content"][0], "signature": "other"}, *item["content"][1:]],
    }
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[user("q"), wm.NativeItem(format="anthropic.messages", item=item, message=view)],
    )
    turns = await store.replace_turns(
        tenant_id=tenant,
        thread_id="th",
        messages=[
            user("q"),
            wm.NativeItem(format="anthropic.messages", item=resigned, message=view),
        ],
    )
    assert turns[1].in_format("anthropic.messages") == resigned


@pytest.mark.parametrize(
    ("native", "field"),
    [
        (wm.NativeItem(format="Open AI", item={}, message=user("x")), "messages[0].format"),
        (wm.NativeItem(format="x", item=[], message=user("x")), "messages[0].item"),  # type: ignore[arg-type]
        (
            wm.NativeItem(format="x", item={"n": float("nan")}, message=user("x")),
            "messages[0].item",
        ),
        (wm.NativeItem(format="x", item={}, message={"role": "robot"}), "messages[0].message.role"),
    ],
)
async def test_a_bad_native_item_is_refused_and_nothing_is_stored(
    store: wm.Store, tenant: str, native: wm.NativeItem, field: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("kept")])
    with pytest.raises(wm.ValidationError) as caught:
        await store.append(tenant_id=tenant, thread_id="th", messages=[native])
    assert caught.value.field == field
    assert len(await store.list_turns(tenant_id=tenant, thread_id="th")) == 1


async def test_a_turn_an_older_version_stored_too_deep_still_reads(tmp_path: Any) -> None:
    """Written before the nesting limit (straight into the table, as an old version could):
    it reads back with the excess replaced, instead of failing every page that holds it."""
    import json
    import sqlite3

    from workingmem.messages import TOO_DEEP

    path = tmp_path / "old.db"
    async with await wm.open_store(str(path)) as store:
        await store.append(tenant_id="t", thread_id="th", messages=[user("hi")])
    nested: dict[str, Any] = {"k": 1}
    for _ in range(300):
        nested = {"k": nested}
    old = {"role": "user", "content": [{"type": "input_audio", "input_audio": nested}]}
    with sqlite3.connect(path) as db:
        db.execute("UPDATE turns SET message = ? WHERE seq = 1", (json.dumps(old),))
    async with await wm.open_store(str(path)) as store:
        (turn,) = await store.list_turns(tenant_id="t", thread_id="th")
    assert isinstance(turn.content, list)
    assert TOO_DEEP in json.dumps(turn.content)
    json.dumps(turn.to_message())  # serializes now


ODD = 'Grüße 👋 \u0000 \u2028 "quoted" \\ back'
"""Text JSON must escape, and characters a database may treat apart."""


async def test_turns_appended_in_one_trip_read_back_unchanged(
    store: wm.Store, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread this store has seen is appended to in one trip (`Dialect.append_known`, its
    rows sent as one JSON document on PostgreSQL): odd text, a native item and the counts
    come back exactly as the ordinary append keeps them."""
    assert isinstance(store, SQLStore)
    trips: list[int | None] = []
    append_known = store._dialect.append_known

    async def counted(write: Any) -> int | None:
        trips.append(await append_known(write))
        return trips[-1]

    monkeypatch.setattr(store._dialect, "append_known", counted)
    tokenizer = wm.tokens.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("hello")])
    await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    item, view = ITEMS["anthropic.messages"]
    odd_item = {**item, "content": [{**item["content"][0], "thinking": ODD}, *item["content"][1:]]}
    messages: list[wm.MessageIn | wm.NativeItem] = [
        {"role": "user", "content": ODD, "name": "ada"},
        wm.NativeItem(format="anthropic.messages", item=odd_item, message=view),
    ]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)

    assert trips == [1], "the second append took one trip, after the thread's first turn"
    _, first, second = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert first.to_message() == messages[0]
    assert (second.format, second.in_format("anthropic.messages")) == (
        "anthropic.messages",
        odd_item,
    )
    tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    assert [t.tokens for t in tail.turns] == [
        tokenizer.count_message(m) for m in (user("hello"), messages[0], view)
    ]


async def test_a_carried_chat_answer_goes_upstream_and_its_item_reads_back_unchanged(
    store: SQLStore, tenant: str
) -> None:
    """R25 for an item that carries a chat upstream's answer (`formats.chat_answer`): read in
    its own format it is as its client was shown; the tail gives the window the view with the
    upstream's own fields, and nothing a request does not take (a response's annotations)."""
    blocks = wm.NativeItem(
        "anthropic.messages",
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]},
        {"role": "assistant", "content": "Sunny."},
    )
    said: wm.Message = {"role": "assistant", "content": "Sunny."}
    answer = {**said, "annotations": [], "reasoning_content": "Because."}
    carried = with_chat_original(blocks, said, own_fields(answer))
    plain = wm.NativeItem("openai.chat", {**said, "annotations": [{"type": "url_citation"}]}, said)
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("Weather?"), carried, plain]
    )
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert turns[1].in_format("anthropic.messages") == blocks.item
    tokenizer = wm.tokens.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))
    tail = await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=8)
    assert [t.original for t in tail.turns] == [
        None,
        {**said, "reasoning_content": "Because."},
        None,
    ]
    assert [t.sent for t in tail.turns][2] == said  # the annotations stay out
