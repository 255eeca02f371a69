"""Summaries a small model cannot spoil: the helper proposes, the library applies. An old fact
stays unless an update removes it by name; repeats are one fact; the cap never drops an old
fact; a summary that merely repeats a fact or the last turn is invalid output; one that stops
taking in new turns is a stalled update. Pure rules first, then through a real helper call."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from difflib import SequenceMatcher
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import workingmem as wm
from tests.helpers import DEFAULT_PROFILE, assistant, user
from workingmem.curation import NEAR, Removal, merge_facts, near_same, normalized, repeats
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream

LYON = wm.Fact("Lives in Lyon.", first_turn=1, last_turn=1)
CAR = wm.Fact("Drives a red Fiat 500.", first_turn=3, last_turn=3)


def test_a_fact_not_given_again_is_kept() -> None:
    facts, notes = merge_facts([LYON, CAR], [], [], max_facts=10)
    assert facts == (LYON, CAR)
    assert notes == []


def test_repeats_are_one_fact_whose_turns_grow() -> None:
    again = [
        wm.Fact("lives in lyon", first_turn=9, last_turn=9),
        wm.Fact("Lives in Lyon!!", first_turn=12, last_turn=12),
        wm.Fact("Drives a red Fiat 500", first_turn=14, last_turn=15),
        wm.Fact("Has a cat named Miso.", first_turn=16, last_turn=16),
        wm.Fact("Has a cat named Misso.", first_turn=17, last_turn=17),  # a typo: near-exact
    ]
    facts, _ = merge_facts([LYON, CAR], again, [], max_facts=10)
    assert [f.text for f in facts] == ["Lives in Lyon.", "Drives a red Fiat 500.", again[3].text]
    assert [(f.first_turn, f.last_turn) for f in facts] == [(1, 12), (3, 15), (16, 17)]


def test_one_sentence_eight_times_is_one_fact() -> None:
    eight = [wm.Fact("The user likes hiking.", first_turn=n, last_turn=n) for n in range(1, 9)]
    facts, _ = merge_facts([], eight, [], max_facts=50)
    assert facts == (wm.Fact("The user likes hiking.", first_turn=1, last_turn=8),)


def test_only_a_named_fact_is_removed() -> None:
    moved = wm.Fact("Lives in Porto.", first_turn=20, last_turn=20)
    facts, notes = merge_facts(
        [LYON, CAR],
        [moved],
        [Removal("lives in Lyon", "contradicted"), Removal("Owns a boat.", "obsolete")],
        max_facts=10,
    )
    assert facts == (CAR, moved)
    assert notes == ["1 removals named no fact (e.g. 'Owns a boat.')"]


def test_the_cap_leaves_new_facts_out_never_an_old_one() -> None:
    new = [wm.Fact(f"Fact number {n}.", first_turn=n, last_turn=n) for n in range(10, 14)]
    facts, notes = merge_facts([LYON, CAR], new, [], max_facts=4)
    assert facts == (LYON, CAR, new[0], new[1])
    assert notes == ["2 new facts over the cap of 4 left out"]


def test_what_counts_as_the_same() -> None:
    assert normalized("  The Café, in LYON! ") == "cafe in lyon"
    assert near_same(normalized("Has a cat named Miso"), normalized("has a cat named misso"))
    assert not near_same(normalized("Has a cat"), normalized("Has a dog"))
    assert not near_same(normalized("Locker number 13"), normalized("Locker number 18"))
    assert repeats("I love my new bike!", ["Lives in Lyon.", "i love my new bike"])
    assert not repeats("Ada lives in Lyon and loves her new bike.", ["i love my new bike"])


def difflib_near(a: str, b: str) -> bool:
    """What counts as the same, said plainly: the lengths within `NEAR` of each other, the same
    numbers, and difflib's ratio at least `NEAR`."""
    if a == b:
        return True
    if not a or not b or min(len(a), len(b)) < NEAR * max(len(a), len(b)):
        return False
    if re.findall(r"\d+", a) != re.findall(r"\d+", b):
        return False
    return SequenceMatcher(None, a, b, autojunk=False).ratio() >= NEAR


@st.composite
def text_and_edit(draw: st.DrawFn) -> tuple[str, str]:
    """A text over a few letters and a copy of it with a few letters changed, dropped or added:
    pairs on both sides of `NEAR`."""
    text = draw(st.text(alphabet="bcde 12", min_size=1, max_size=60).filter(str.strip))
    edited = list(text)
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(edited)))
        letter = draw(st.sampled_from("bcde 12"))
        how = draw(st.sampled_from(("change", "drop", "add")))
        if how == "add" or at == len(edited):
            edited.insert(at, letter)
        elif how == "change":
            edited[at] = letter
        else:
            del edited[at]
    return text, "".join(edited)


@given(text_and_edit())
def test_the_cheap_bounds_decide_as_difflib_does(pair: tuple[str, str]) -> None:
    """A merge tries cheap bounds before difflib's ratio; they must never change its answer."""
    a, b = (normalized(text) for text in pair)
    assert near_same(a, b) == difflib_near(a, b)
    assert merge_facts([wm.Fact(a)], [wm.Fact(b)], [], max_facts=5)[0] == (
        (wm.Fact(a),) if difflib_near(a, b) else (wm.Fact(a), wm.Fact(b))
    )


def reference_merge(
    old: list[wm.Fact], proposed: list[wm.Fact], removals: list[Removal], max_facts: int
) -> tuple[wm.Fact, ...]:
    """`merge_facts`' rule as its docstring says it, with `difflib_near` pair by pair."""
    gone = [normalized(r.text) for r in removals]
    kept: list[wm.Fact] = []
    for index, fact in enumerate([*old, *proposed]):
        key = normalized(fact.text)
        if any(difflib_near(key, g) for g in gone):
            continue
        hit = next((i for i, k in enumerate(kept) if difflib_near(key, normalized(k.text))), None)
        if hit is not None:
            first = min(t for t in (kept[hit].first_turn, fact.first_turn) if t is not None)
            last = max(t for t in (kept[hit].last_turn, fact.last_turn) if t is not None)
            kept[hit] = wm.Fact(kept[hit].text, first_turn=first, last_turn=last)
        elif index < len(old) or len(kept) < max_facts:
            kept.append(fact)
    return tuple(kept)


@given(
    st.lists(text_and_edit(), max_size=8),
    st.lists(st.integers(0, 15), max_size=12),
    st.integers(1, 12),
)
def test_a_merge_of_many_facts_is_the_rule_pair_by_pair(
    pairs: list[tuple[str, str]], picks: list[int], cap: int
) -> None:
    """Texts and their edits, given again word for word or edited, old and proposed: the
    merge (its word-for-word look-up first) keeps what the rule pair by pair keeps."""
    texts = [text for pair in pairs for text in pair]
    if not texts:
        return
    facts = [wm.Fact(texts[p % len(texts)], first_turn=i, last_turn=i) for i, p in enumerate(picks)]
    old, proposed = facts[: len(facts) // 2], facts[len(facts) // 2 :]
    removals = [Removal(texts[0], "obsolete")] if len(texts) > 3 else []
    cap = max(cap, len(old))
    got = merge_facts(old, proposed, removals, max_facts=cap)[0]
    assert got == reference_merge(old, proposed, removals, cap)


# -- through a real helper call ---------------------------------------------------------------

CONFIG = wm.WorkingMemoryConfig(
    strategy=wm.Strategy.SUMMARY_BUFFER, recent_turns=4, update_every_turns=4
)
Answer = Callable[[str], dict[str, Any]]


@pytest.fixture
def answers() -> list[Answer]:
    """What the scripted helper answers, in order (each gets the prompt)."""
    return []


@pytest.fixture
async def memory(store: wm.ThreadStore, answers: list[Answer]) -> AsyncIterator[wm.WorkingMemory]:
    def respond(request: dict[str, Any]) -> Reply:
        return Reply(json.dumps(answers.pop(0)(request["messages"][-1]["content"])))

    async with (
        ScriptedUpstream(responder=respond) as upstream,
        OpenAIClient(base_url=upstream.base_url, timeout=5, max_retries=0) as client,
    ):
        yield wm.WorkingMemory(store=store, config=CONFIG, llm=client)


async def update(memory: wm.WorkingMemory, tenant: str, texts: list[str]) -> wm.UpdateReport:
    messages = [user(t) if i % 2 == 0 else assistant(t) for i, t in enumerate(texts)]
    await memory.store.append(tenant_id=tenant, thread_id="th", messages=messages)
    return await memory.update_summary(
        tenant_id=tenant,
        thread_id="th",
        user_id="u",
        profile=DEFAULT_PROFILE,
        cheap_model_id="cheap",
    )


def fact(text: str, turn: int) -> dict[str, Any]:
    return {"text": text, "first_turn": turn, "last_turn": turn}


async def test_an_update_that_omits_old_facts_keeps_them_and_removes_only_by_name(
    memory: wm.WorkingMemory, tenant: str, answers: list[Answer]
) -> None:
    answers.append(
        lambda _: {
            "summary": "Ada moved to Lyon and bought a car.",
            "facts": [fact("Lives in Lyon.", 1), fact("Drives a red Fiat 500.", 3)],
            "remove": [],
        }
    )
    chat = ["I moved to Lyon.", "Nice!", "I bought a red Fiat 500.", "Great choice."]
    assert (await update(memory, tenant, chat)).outcome is wm.UpdateOutcome.UPDATED
    seen: list[str] = []

    def moved(prompt: str) -> dict[str, Any]:
        seen.append(prompt)
        return {
            "summary": "Ada moved from Lyon to Porto; she drives a red Fiat 500.",
            "facts": [fact("Lives in Porto.", 5)],  # the car is not given again
            "remove": [{"text": "Lives in Lyon.", "why": "contradicted"}],
        }

    answers.append(moved)
    chat = ["Actually we moved again, to Porto.", "Porto is lovely.", "Yes!", "Enjoy."]
    report = await update(memory, tenant, chat)
    assert report.outcome is wm.UpdateOutcome.UPDATED
    state = await memory.get_state(tenant_id=tenant, thread_id="th")
    assert list(state.facts) == ["Drives a red Fiat 500.", "Lives in Porto."]
    assert '"remove"' in seen[0]  # the prompt asks for removals by name


async def test_a_summary_that_repeats_the_last_turn_leaves_the_state_as_it_was(
    memory: wm.WorkingMemory, tenant: str, answers: list[Answer]
) -> None:
    answers.append(lambda _: {"summary": "see you tomorrow", "facts": [], "remove": []})
    chat = ["I will call the bank about my loan.", "Good idea.", "Thanks!", "See you tomorrow!"]
    report = await update(memory, tenant, chat)
    assert report.outcome is wm.UpdateOutcome.INVALID_OUTPUT
    assert "merely repeats" in report.detail
    state = await memory.get_state(tenant_id=tenant, thread_id="th")
    assert (state.version, state.turn_count) == (0, 0)


async def test_a_summary_that_stops_taking_in_turns_is_a_stalled_update(
    memory: wm.WorkingMemory, tenant: str, answers: list[Answer]
) -> None:
    same = {"summary": "Ada plans a trip to Japan.", "facts": [], "remove": []}
    answers.extend([lambda _: same, lambda _: {**same, "facts": [fact("Flies on May 3.", 5)]}])
    chat = ["I am planning a trip to Japan.", "Exciting!", "In spring.", "Cherry blossoms!"]
    assert (await update(memory, tenant, chat)).outcome is wm.UpdateOutcome.UPDATED
    chat = ["My flight is on May 3 from Lisbon.", "Noted.", "And I booked a ryokan.", "Lovely."]
    report = await update(memory, tenant, chat)
    assert report.outcome is wm.UpdateOutcome.STALLED
    assert "did not change over turns 5-8" in report.detail
    state = await memory.get_state(tenant_id=tenant, thread_id="th")
    assert state.turn_count == 8  # read: a stalled model is not asked the same turns forever
    assert list(state.facts) == ["Flies on May 3."]


def test_an_empty_fact_is_dropped_not_fatal() -> None:
    """A small model under a grammar writes them; they say nothing, the rest of the answer
    stands."""
    from workingmem.summarizer import Caps, parse_answer

    answer = json.dumps(
        {"summary": "Ada lives in Lyon.", "facts": [fact("", 1), fact("Lives in Lyon.", 1)]}
    )
    parsed = parse_answer(answer, caps=Caps(400, 5, 100), previous_summary="", last_turn=2)
    assert parsed.facts == (wm.Fact("Lives in Lyon.", first_turn=1, last_turn=1),)
    assert parsed.removals == ()
