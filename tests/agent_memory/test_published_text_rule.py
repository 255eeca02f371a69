"""The OpenAPI document states a text-mode document as `TEXT_PATTERN` with `max_chars` as its
``maxLength``: a value matches it if and only if the mode stores it."""

from __future__ import annotations

import re

import jsonschema_rs
from hypothesis import given, settings
from hypothesis import strategies as st

import workingmem as wm
from workingmem.agent_memory.modes import TEXT_PATTERN, TextMode

MAX_CHARS = 12
MODE = TextMode(template=None, max_chars=MAX_CHARS)
PUBLISHED = jsonschema_rs.validator_for(
    {"type": "string", "minLength": 1, "maxLength": MAX_CHARS, "pattern": TEXT_PATTERN}
)
EDGES = st.sampled_from(
    [" ", "\t", "\n", "\x00", "\x1c", "\x85", "\u00a0", "\u3000", "\ufeff", "a"]
)


@given(st.one_of(st.text(EDGES, max_size=MAX_CHARS + 2), st.text(max_size=MAX_CHARS + 2)))
@settings(max_examples=500, deadline=None)
def test_the_published_text_rule_is_exactly_what_is_stored(value: str) -> None:
    published = len(value) <= MAX_CHARS and re.fullmatch(TEXT_PATTERN, value) is not None
    assert PUBLISHED.is_valid(value) == published
    try:
        MODE.apply(current=None, content=value)
    except wm.ValidationError:
        assert not published, f"published, but refused: {value!r}"
    else:
        assert published, f"stored, but not published: {value!r}"
