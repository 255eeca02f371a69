"""One `facts` field: a fact is its text (a `str`) with the turn range it came from, so a
reader uses `state.facts` as strings or as facts without a second field to choose from."""

from __future__ import annotations

import copy
import pickle

import pytest

import workingmem as wm


def test_a_fact_is_its_text_with_the_turns_it_came_from() -> None:
    fact = wm.Fact("likes tea", first_turn=3, last_turn=5)
    assert fact == "likes tea"
    assert f"- {fact}" == "- likes tea"
    assert fact.text == "likes tea"
    assert type(fact.text) is str
    assert (fact.first_turn, fact.last_turn) == (3, 5)
    with pytest.raises(AttributeError):
        fact.first_turn = 1
    assert pickle.loads(pickle.dumps(fact)).last_turn == 5
    assert copy.deepcopy(fact).first_turn == 3


def test_a_state_has_one_facts_field_that_plain_strings_fill() -> None:
    state = wm.WorkingMemoryState(summary="s", facts=["plain"])  # type: ignore[list-item]
    assert state.facts == ["plain"]
    assert isinstance(state.facts[0], wm.Fact)
    assert state.facts[0].first_turn is None
    assert state.fact_details == tuple(state.facts)
