"""Compaction's parts: the gateway's compaction item (what it carries, how a thread reads it,
what a Responses upstream is sent in its place), where a compaction starts, and
`Gateway.compact` folding a long conversation in chunks with the real summarizer."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import summarizing_responder
from workingmem.compaction import Start, starting_point
from workingmem.formats import carrying
from workingmem.formats.compaction import Notes, compaction_item, notes_of, text_of_notes
from workingmem.formats.responses import turns_of
from workingmem.llm import CallKind, CallMeta, OpenAIClient
from workingmem.llm.openai_responses import request_body
from workingmem.llm.testing import ScriptedUpstream
from workingmem.messages import MAX_MESSAGES_PER_APPEND

ITEM = compaction_item(item_id="cmp_1", summary="Ada plans a trip.", facts=["budget: 4,000 €"])
OPENAI_OWN = {"id": "cmp_2", "type": "compaction", "encrypted_content": "gAAAAABpM0Yj-sealed="}


def test_the_item_carries_its_summary_and_facts() -> None:
    assert ITEM["type"] == "compaction"
    assert ITEM["encrypted_content"].startswith("wmc1.")
    assert notes_of(ITEM) == Notes("Ada plans a trip.", ("budget: 4,000 €",))


@pytest.mark.parametrize(
    "item",
    [
        OPENAI_OWN,
        {"type": "compaction", "encrypted_content": "wmc1.not base64!"},
        {"type": "compaction", "encrypted_content": "wmc1.WzFd"},  # [1]: no object
        {"type": "compaction", "encrypted_content": "wmc1.eyJzdW1tYXJ5IjogMX0="},  # no text
        {"type": "compaction"},
        {"type": "message", "role": "user", "content": "wmc1."},
    ],
)
def test_an_item_the_gateway_did_not_write_has_no_notes(item: dict[str, Any]) -> None:
    assert notes_of(item) is None


def test_the_thread_reads_the_gateways_item_as_the_users_words() -> None:
    ours, theirs, question = turns_of(
        [ITEM, OPENAI_OWN, {"role": "user", "content": "What is my budget?"}]
    )
    assert ours.item == {"items": [ITEM]}  # kept as sent
    assert ours.message == {"role": "user", "content": text_of_notes(notes_of(ITEM))}  # type: ignore[arg-type]
    assert ours.message["content"] == (
        "The conversation before this point, compacted:\n\n"
        "Ada plans a trip.\n\nFacts:\n- budget: 4,000 €"
    )
    assert theirs.message["role"] == "assistant"  # OpenAI's own: part of an answer's run
    assert question.message["role"] == "user"


def test_a_responses_upstream_is_sent_the_text_in_place_of_the_gateways_item() -> None:
    ours, theirs, question = turns_of(
        [ITEM, OPENAI_OWN, {"role": "user", "content": "What is my budget?"}]
    )
    messages = [carrying(t.message, t.item) for t in (ours, theirs, question)]
    body = request_body("gpt-4o-mini", messages, None, None, None, None, None)
    assert body["input"] == [
        {"role": "user", "content": ours.message["content"]},
        OPENAI_OWN,  # the upstream's own, as it was
        {"role": "user", "content": "What is my budget?"},
    ]


def turn(seq: int, item: dict[str, Any]) -> wm.Turn:
    (native,) = turns_of([item])
    return wm.Turn.from_message(native.message, seq=seq, format=native.format, item=native.item)


def said(seq: int) -> wm.Turn:
    return turn(seq, {"role": "user", "content": f"turn {seq}"})


def version(covered: int, summary: str = "s") -> wm.WorkingMemoryState:
    return wm.WorkingMemoryState(summary=summary, facts=[], turn_count=covered)


def test_a_compaction_starts_from_the_newest_summary_of_the_conversations_turns() -> None:
    turns = [said(n) for n in range(1, 11)]
    versions = [version(9, "too far"), version(6, "six"), version(3, "three")]
    assert starting_point(versions, turns, stored=7) == Start("six", (), 6)
    assert starting_point(versions, turns, stored=2) == Start()  # none covers only turn 1-2
    reset = [version(7, ""), version(4, "four")]  # a reset (no summary) is no start
    assert starting_point(reset, turns, stored=10) == Start("four", (), 4)


def test_a_compaction_item_after_the_summary_is_the_start() -> None:
    turns = [said(1), said(2), turn(3, ITEM), said(4)]
    start = starting_point([version(2)], turns, stored=4)
    assert (start.summary, start.facts, start.covered) == (
        "Ada plans a trip.",
        ("budget: 4,000 €",),
        3,
    )
    assert starting_point([version(4, "four")], turns, stored=4) == Start("four", (), 4)


@pytest.mark.asyncio
async def test_a_long_conversation_is_folded_in_chunks_each_from_the_last(
    tmp_path: Path,
) -> None:
    config = wm.GatewayConfig(
        cheap_model="cheap-model",
        working_memory=wm.WorkingMemoryConfig(helper_input_max_tokens=200),
    )
    long = "This is a turn with enough words to fill a chunk of the helper's input quickly. " * 5
    history: list[wm.MessageIn] = []
    for n in range(6):
        history += [
            {"role": "user", "content": f"{n}: {long}"},
            {"role": "assistant", "content": "Fine."},
        ]
    async with (
        await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store,
        ScriptedUpstream(responder=summarizing_responder) as upstream,
        wm.Gateway(store=store, llm=OpenAIClient(base_url=upstream.base_url), config=config) as gw,
    ):
        compaction = await gw.compact(tenant_id="t", messages=history)
        with pytest.raises(wm.ValidationError):
            await gw.compact(tenant_id="t", messages=[])
        with pytest.raises(wm.NotFoundError):
            await gw.compact(tenant_id="t", thread_id="missing")

    calls = compaction.compacted.calls
    assert calls >= 3
    assert len(upstream.requests) == calls
    prompts = [r["messages"][-1]["content"] for r in upstream.requests]
    none = "<summary>\n(none yet)\n</summary>"
    assert none in prompts[0]
    assert none not in prompts[1]
    assert "through turn" in prompts[1].split("</summary>")[0]  # each from the last
    assert compaction.compacted.summary.startswith("The conversation so far, through turn 12 ")
    assert compaction.compacted.usage.prompt_tokens == sum(len(p) // 4 for p in prompts)
    assert [t.seq for t in compaction.turns] == list(range(1, 13))
    assert compaction.stored == 0
    assert json.dumps(prompts).count("[12] ") == 1  # every turn read once


@pytest.mark.asyncio
async def test_a_conversation_longer_than_an_append_compacts(tmp_path: Path) -> None:
    config = wm.GatewayConfig(cheap_model="cheap-model")
    messages: list[wm.MessageIn] = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n}"}
        for n in range(MAX_MESSAGES_PER_APPEND + 1)
    ]
    async with (
        await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store,
        ScriptedUpstream(responder=summarizing_responder) as upstream,
        wm.Gateway(store=store, llm=OpenAIClient(base_url=upstream.base_url), config=config) as gw,
    ):
        compaction = await gw.compact(tenant_id="t", messages=messages)
    assert len(compaction.turns) == MAX_MESSAGES_PER_APPEND + 1
    assert compaction.compacted.summary.startswith("The conversation so far, through turn 1001 ")


@pytest.mark.parametrize(
    ("thread", "through", "kept"),
    [("th-1", 4, ("th-1", 4)), ("th-1", 0, None), ("th-1", True, None), (7, 4, None)],
)
def test_an_item_names_a_thread_only_by_a_name_and_a_turn(
    thread: Any, through: Any, kept: tuple[str, int] | None
) -> None:
    content = ITEM["encrypted_content"][len("wmc1.") :]
    payload = {
        **json.loads(base64.urlsafe_b64decode(content)),
        "thread": thread,
        "through": through,
    }
    item = {
        **ITEM,
        "encrypted_content": "wmc1."
        + base64.urlsafe_b64encode(json.dumps(payload).encode()).decode(),
    }
    notes = notes_of(item)
    assert notes is not None
    assert (None if notes.thread is None else (notes.thread, notes.through)) == kept
    made = compaction_item(item_id="cmp_3", summary="s", facts=[], thread="th-1", through=4)
    assert notes_of(made) == Notes("s", (), "th-1", 4)


class Recording:
    """A usage guard (R10) that sees every call's meta and refuses compactions once told to."""

    def __init__(self) -> None:
        self.metas: list[CallMeta] = []
        self.refuse = False

    async def check(self, meta: CallMeta) -> str | None:
        self.metas.append(meta)
        return "over budget" if self.refuse and meta.kind is CallKind.COMPACTION else None

    async def record(self, meta: CallMeta, usage: wm.Usage) -> None:
        return None


@pytest.mark.asyncio
async def test_a_compactions_calls_pass_the_usage_guard_with_their_meta(tmp_path: Path) -> None:
    """R10: a compaction's cheap-model calls carry tenant, thread, user and their kind to the
    guard, which may refuse them: then the compaction fails, and the model is not called."""
    guard = Recording()
    config = wm.GatewayConfig(cheap_model="cheap-model")
    messages: list[wm.MessageIn] = [
        {"role": "user", "content": "Please remember my budget is 4,000 euros."},
        {"role": "assistant", "content": "Noted."},
    ]
    async with (
        await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store,
        ScriptedUpstream(responder=summarizing_responder) as upstream,
        wm.Gateway(
            store=store, llm=OpenAIClient(base_url=upstream.base_url), config=config, guard=guard
        ) as gw,
    ):
        await store.append(tenant_id="t", thread_id="th", messages=messages)
        await gw.compact(tenant_id="t", thread_id="th", user_id="ada")
        (meta,) = guard.metas
        assert (meta.tenant_id, meta.thread_id, meta.user_id) == ("t", "th", "ada")
        assert (meta.kind, meta.model) == (CallKind.COMPACTION, "cheap-model")
        guard.refuse = True
        with pytest.raises(wm.UsageRefusedError, match="over budget"):
            await gw.compact(tenant_id="t", thread_id="th")
    assert len(upstream.requests) == 1  # the refused call never reached the model
