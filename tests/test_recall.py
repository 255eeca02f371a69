"""Recall (`recall_ratio`): turns from before the window that share words with the current
user turn, in the notes with their numbers and dates, within their share of the budget; off by
default; on both stores, with the built-in retriever and a host's own."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

import workingmem as wm
from tests.helpers import DEFAULT_PROFILE, GPT4O, assistant, user
from workingmem import recall
from workingmem.recall import DATES_HEADING, RECALL_HEADING, Retriever
from workingmem.tokens import Tokenizer
from workingmem.transcript import render_turns

START = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
RECALLING = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW, recall_ratio=0.5)


def chatter(count: int) -> list[wm.Message]:
    return [
        message
        for i in range(count)
        for message in (user(f"Small talk number {i} about nothing"), assistant(f"Reply {i}"))
    ]


async def long_thread(store: wm.ThreadStore, tenant: str, question: str) -> list[wm.Message]:
    """A puppy named Biscuit, 200 turns back, then small talk, then `question`."""
    messages = [
        user("We adopted a beagle puppy and named him Biscuit."),
        assistant("Biscuit is a great name for a beagle."),
        *chatter(100),
        user(question),
    ]
    times = [START + timedelta(minutes=i) for i in range(len(messages))]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages, created_at=times)
    return messages


async def load(
    memory: wm.WorkingMemory, tenant: str, budget: int = 2_000, profile: wm.Profile | None = None
) -> wm.WorkingMemoryLoad:
    return await memory.load(
        tenant_id=tenant,
        thread_id="th",
        model=GPT4O,
        profile=profile or DEFAULT_PROFILE,
        budget_tokens=budget,
    )


async def test_recall_is_off_by_default(store: wm.ThreadStore, tenant: str) -> None:
    await long_thread(store, tenant, "What is my beagle called?")
    config = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
    loaded = await load(wm.WorkingMemory(store=store, config=config), tenant)
    assert loaded.notes == ""
    assert loaded.recalled_seqs == ()
    assert loaded.recalled_tokens == 0


async def test_an_old_turn_is_recalled_with_its_number_and_date(
    store: wm.ThreadStore, tenant: str
) -> None:
    await long_thread(store, tenant, "What is my beagle called?")
    budget = 2_000
    loaded = await load(wm.WorkingMemory(store=store, config=RECALLING), tenant, budget)
    assert loaded.notes.startswith(RECALL_HEADING)
    assert "[1] (8 May 2023, 13:56) user: We adopted a beagle puppy and named him Biscuit." in (
        loaded.notes
    )
    assert "[2] (8 May 2023, 13:57) assistant: Biscuit is a great name" in loaded.notes
    assert loaded.recalled_seqs[:2] == (1, 2)
    assert not set(loaded.recalled_seqs) & set(loaded.seqs)  # never a turn of the window
    assert loaded.recalled_tokens == wm.tokenizer_for(GPT4O).count_text(loaded.notes)
    history = int(RECALLING.chat_history_ratio * budget)
    assert loaded.tokens <= history - int(RECALLING.recall_ratio * history)
    assert loaded.tokens + loaded.recalled_tokens <= history
    assert loaded.messages[-1] == user("What is my beagle called?")  # the window as sent


async def test_recall_shows_units_in_the_threads_order_within_its_share(
    store: wm.ThreadStore, tenant: str
) -> None:
    messages = [
        *chatter(20),
        user("My sister Ana lives in Porto."),
        assistant("Porto is lovely."),
        *chatter(20),
        user("Ana is coming to visit in June."),
        assistant("Enjoy the visit!"),
        *chatter(60),
        user("When does Ana come, and where does she live?"),
    ]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    config = RECALLING.model_copy(update={"recall_ratio": 0.3})
    budget = 1_500
    loaded = await load(wm.WorkingMemory(store=store, config=config), tenant, budget)
    seqs = loaded.recalled_seqs
    assert {41, 83} <= set(seqs)  # both of Ana's turns
    assert list(seqs) == sorted(seqs)
    assert loaded.notes.index("[41]") < loaded.notes.index("[83]")
    assert "\n...\n" in loaded.notes  # a gap between turns that are not next to each other
    history = int(config.chat_history_ratio * budget)
    assert loaded.tokens + loaded.recalled_tokens <= history


async def test_summary_buffer_notes_keep_the_summary_then_the_recall(
    store: wm.ThreadStore, tenant: str
) -> None:
    await long_thread(store, tenant, "What is my beagle called?")
    await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=wm.stores.StateWrite(
            expected_version=0,
            summary="The user chats a lot.",
            facts=(),
            turn_count=190,
            reason="update",
        ),
    )
    config = wm.WorkingMemoryConfig(recall_ratio=0.25)  # SUMMARY_BUFFER
    loaded = await load(wm.WorkingMemory(store=store, config=config), tenant)
    summary, recall = loaded.notes.split("\n\n", 1)
    assert summary == "The user chats a lot."
    assert recall.startswith(RECALL_HEADING)
    assert "Biscuit" in recall
    assert loaded.seqs[0] >= 203 - config.recent_turns  # the tail stays recent_turns long


async def test_a_current_turn_that_needs_recalls_share_still_fits(
    store: wm.ThreadStore, tenant: str
) -> None:
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[*chatter(3), user("Biscuit " + "word " * 300)],
    )
    loaded = await load(wm.WorkingMemory(store=store, config=RECALLING), tenant, budget=1_000)
    assert loaded.messages[-1]["role"] == "user"
    assert loaded.recalled_seqs == ()  # the window took the whole history share
    with pytest.raises(wm.ContextOverflowError):
        await load(wm.WorkingMemory(store=store, config=RECALLING), tenant, budget=400)


async def test_a_hosts_retriever_is_asked_for_what_is_before_the_window(
    store: wm.ThreadStore, tenant: str
) -> None:
    await long_thread(store, tenant, "What is my beagle called?")
    asked: list[dict[str, Any]] = []

    class Fixed:
        async def retrieve(
            self, *, tenant_id: str, thread_id: str, query: str, before_seq: int, limit: int
        ) -> Sequence[Sequence[wm.Turn]]:
            asked.append({"tenant": tenant_id, "query": query, "before": before_seq})
            return [await store.list_turns(tenant_id=tenant_id, thread_id=thread_id, limit=1)]

    retriever = Fixed()
    assert isinstance(retriever, Retriever)
    memory = wm.WorkingMemory(store=store, config=RECALLING, retriever=retriever)
    loaded = await load(memory, tenant)
    assert asked == [
        {"tenant": tenant, "query": "What is my beagle called?", "before": loaded.seqs[0]}
    ]
    assert loaded.recalled_seqs == (1,)


async def test_a_profile_switches_recall_on_for_its_calls(
    store: wm.ThreadStore, tenant: str
) -> None:
    await long_thread(store, tenant, "What is my beagle called?")
    memory = wm.WorkingMemory(store=store, config=wm.WorkingMemoryConfig())
    profile = wm.Profile(id="recall", working_memory=RECALLING)
    assert (await load(memory, tenant)).recalled_seqs == ()
    assert (await load(memory, tenant, profile=profile)).recalled_seqs[:2] == (1, 2)


async def test_the_gateway_puts_the_recalled_turns_in_the_system_prompt(
    store: wm.Store, tenant: str
) -> None:
    """Over real HTTP to a scripted upstream: the request the model gets has the recalled turn
    in its system message, dated, and the window as the client sent it."""
    from workingmem.gateway import Gateway
    from workingmem.gateway_config import GatewayConfig
    from workingmem.llm import OpenAIClient
    from workingmem.llm.testing import Reply, ScriptedUpstream

    model = wm.ModelInfo(id="answer-model", context_window=4_000, max_output_tokens=500)
    config = GatewayConfig(
        default_model="answer-model",
        cheap_model="answer-model",
        models={"answer-model": model},
        working_memory=RECALLING,
    )
    await long_thread(store, tenant, "Hello again!")
    await store.pop_turns(tenant_id=tenant, thread_id="th")
    async with (
        ScriptedUpstream(responder=lambda request: Reply("Biscuit.")) as upstream,
        OpenAIClient(base_url=upstream.base_url, timeout=5, max_retries=0) as client,
        Gateway(store=store, llm=client, config=config) as gateway,
    ):
        result = await gateway.ask(
            tenant_id=tenant, thread_id="th", user_id="u", message="What is my beagle called?"
        )
    assert result.answer == "Biscuit."
    sent = upstream.requests[-1]["messages"]
    assert sent[0]["role"] == "system"
    assert "From earlier in this conversation" in sent[0]["content"]
    assert "[1] (8 May 2023, 13:56) user: We adopted a beagle puppy" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "What is my beagle called?"}
    assert "beagle puppy" not in json.dumps(sent[1:])  # recalled, not in the window


async def test_the_notes_say_when_the_windows_messages_were_written(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The window's messages stay as sent; the notes give the day each stretch of them began,
    so that "when did I ..." can be answered of a turn in the window too."""
    days = [START, START + timedelta(days=17), START + timedelta(days=17, hours=2)]
    messages = [
        user("We adopted a beagle puppy and named him Biscuit."),
        assistant("Biscuit is a great name for a beagle."),
        user("I ran my first 10k today!"),
        assistant("Congratulations!"),
        user("When did I run the 10k?"),
    ]
    times = [days[0], days[0], days[1], days[1], days[2]]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages, created_at=times)
    loaded = await load(wm.WorkingMemory(store=store, config=RECALLING), tenant)
    assert loaded.seqs == (1, 2, 3, 4, 5)  # the whole thread fits: nothing to recall
    assert loaded.recalled_seqs == ()
    assert loaded.notes == (
        f"{DATES_HEADING}\n"
        '- 8 May 2023, 13:56: from "We adopted a beagle puppy and named him Biscuit."\n'
        '- 25 May 2023, 13:56: from "I ran my first 10k today!"'
    )
    assert loaded.recalled_tokens == wm.tokenizer_for(GPT4O).count_text(loaded.notes)


@pytest.mark.parametrize("rewrite", [True, False])
async def test_the_rewriters_query_finds_what_the_question_alone_does_not(
    store: wm.Store, tenant: str, rewrite: bool
) -> None:
    """`recall_rewrite`: "Is it vegetarian?" names nothing; with the facts, the rewriter's
    query does, and recall searches for it too (one cheap-model call, before the answer)."""
    from workingmem.gateway import Gateway
    from workingmem.gateway_config import GatewayConfig
    from workingmem.llm import OpenAIClient
    from workingmem.llm.testing import Reply, ScriptedUpstream

    messages = [
        user("I booked a table at Chez Paul, a bistro in Lyon."),
        assistant("Lovely choice."),
        *chatter(100),
    ]
    await store.append(tenant_id=tenant, thread_id="th", messages=messages)
    await store.write_memory_state(
        tenant_id=tenant,
        thread_id="th",
        write=wm.stores.StateWrite(
            expected_version=0,
            summary="Ada plans a dinner in Lyon.",
            facts=(wm.Fact("Has a table booked at Chez Paul in Lyon."),),
            turn_count=len(messages),
            reason="update",
        ),
    )

    def respond(request: dict[str, Any]) -> Reply:
        prompt = str(request["messages"][-1]["content"])
        if "standalone search query" in prompt:
            return Reply("vegetarian dishes at the Chez Paul bistro")
        return Reply("Yes, they have vegetarian dishes.")

    memory = wm.WorkingMemoryConfig(recall_ratio=0.5, recall_rewrite=rewrite)
    model = wm.ModelInfo(id="answer-model", context_window=4_000, max_output_tokens=500)
    config = GatewayConfig(
        default_model="answer-model",
        cheap_model="answer-model",
        models={"answer-model": model},
        working_memory=memory,
    )
    async with (
        ScriptedUpstream(responder=respond) as upstream,
        OpenAIClient(base_url=upstream.base_url, timeout=5, max_retries=0) as client,
        Gateway(store=store, llm=client, config=config) as gateway,
    ):
        await gateway.ask(
            tenant_id=tenant, thread_id="th", user_id="u", message="Is it vegetarian?"
        )
        await gateway.when_idle()
    prompts = [str(r["messages"][-1]["content"]) for r in upstream.requests]
    rewrites = [p for p in prompts if "standalone search query" in p]
    answer = next(
        r for r in upstream.requests if r["messages"][-1]["content"] == "Is it vegetarian?"
    )
    system = answer["messages"][0]["content"]
    assert len(rewrites) == (1 if rewrite else 0)
    assert ("[1] " in system and "I booked a table at Chez Paul" in system) is rewrite


class _CountingTokenizer:
    """The model's tokenizer, counting the texts it is asked to count."""

    def __init__(self) -> None:
        self.inner = wm.tokenizer_for(GPT4O)
        self.key = self.inner.key
        self.counted: list[str] = []

    def count_text(self, text: str) -> int:
        self.counted.append(text)
        return self.inner.count_text(text)


def test_a_unit_ranked_again_is_not_counted_again_and_the_share_holds() -> None:
    """Choosing what fits counts each candidate's rendering once per process: a thread's next
    ask ranks mostly the same units. The whole is still counted exactly at the end, so a count
    remembered wrong (a collision of hashes) cannot overfill the share."""
    units = [
        [
            wm.Turn.from_message(
                user(f"Unit {i}: we talked about the trip to Lyon in May, number {i}."),
                seq=i + 1,
                created_at=START + timedelta(minutes=i),
            )
        ]
        for i in range(40)
    ]
    first, again = _CountingTokenizer(), _CountingTokenizer()
    chosen = recall.select_recalled(units, tokenizer=cast(Tokenizer, first), limit_tokens=300)
    assert chosen.seqs
    assert chosen.tokens <= 300
    assert recall.select_recalled(units, tokenizer=cast(Tokenizer, again), limit_tokens=300) == (
        chosen
    )
    assert len(first.counted) > 3
    assert len(again.counted) <= 3  # the heading and the whole: no unit again
    wrong = render_turns(units[0])
    key = (first.key, len(wrong), hash(wrong))
    recall._BLOCK_COUNTS[key] = 0  # remembered wrong
    try:
        squeezed = recall.select_recalled(units, tokenizer=cast(Tokenizer, first), limit_tokens=300)
    finally:
        del recall._BLOCK_COUNTS[key]
    assert squeezed.tokens <= 300
    assert squeezed.tokens == first.inner.count_text(squeezed.text)


def test_the_dates_cut_a_long_opening_at_a_word_and_skip_turns_without_a_time() -> None:
    """A day's line quotes at most the opening's first 60 characters, cut after a whole word
    and marked; a turn with no time (a host's own turn) gives no line."""
    opening = "We adopted a beagle puppy and named him Biscuit, after the dog next door."
    days = [
        wm.Turn.from_message(user(opening), seq=1, created_at=START),
        wm.Turn.from_message(user("No time on this one."), seq=2),
    ]
    assert recall.render_days(days) == (
        f"{DATES_HEADING}\n"
        '- 8 May 2023, 13:56: from "We adopted a beagle puppy and named him Biscuit, after the ..."'
    )
    assert recall.render_days(days[1:]) == ""


def test_dates_larger_than_the_share_give_way_to_the_recalled_turns() -> None:
    """When the dates alone would not fit recall's share they are left out, and the recalled
    turns take the whole share; what is chosen never passes it."""
    units = [
        [wm.Turn.from_message(user(f"Unit {i} about the trip to Lyon."), seq=i + 1)]
        for i in range(5)
    ]
    tokenizer = wm.tokenizer_for(GPT4O)
    dates = DATES_HEADING + "\n" + '- 8 May 2023, 13:56: from "a long day"\n' * 40
    chosen = recall.select_recalled(units, tokenizer=tokenizer, limit_tokens=80, after=dates)
    assert DATES_HEADING not in chosen.text
    assert chosen.text.startswith(RECALL_HEADING)
    assert chosen.seqs
    assert 0 < chosen.tokens <= 80
    assert chosen.tokens == tokenizer.count_text(chosen.text)
