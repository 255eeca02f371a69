"""`workingmem.llm.usage`: an upstream's usage read from each API's shape, and written into
each, valid for the SDKs' own models and read back as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic.types
import openai.types
import openai.types.responses
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workingmem.llm import Usage
from workingmem.llm.usage import (
    from_anthropic,
    from_chat,
    from_responses,
    to_anthropic,
    to_chat,
    to_responses,
)

CACHED = Usage(prompt_tokens=2006, completion_tokens=300, cached_tokens=1920, reasoning_tokens=192)


def test_a_chat_usage_with_its_details() -> None:
    """OpenAI's documented example of a cached prompt and a reasoning model's answer."""
    usage = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 192,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    assert from_chat(usage) == CACHED


def test_a_responses_usage_with_its_details() -> None:
    usage = {
        "input_tokens": 2006,
        "input_tokens_details": {"cached_tokens": 1920, "cache_write_tokens": 0},
        "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 192},
        "total_tokens": 2306,
    }
    assert from_responses(usage) == CACHED


def test_an_anthropic_usage_counts_the_cache_in_the_input() -> None:
    """Anthropic's ``input_tokens`` are those after the last cache mark: the cache's reads and
    writes are added to make the whole input."""
    usage = {
        "input_tokens": 50,
        "cache_creation_input_tokens": 248,
        "cache_read_input_tokens": 1800,
        "output_tokens": 503,
        "output_tokens_details": {"thinking_tokens": 400},
    }
    assert from_anthropic(usage) == Usage(
        prompt_tokens=2098,
        completion_tokens=503,
        cached_tokens=1800,
        cache_write_tokens=248,
        reasoning_tokens=400,
    )


@pytest.mark.parametrize("read", [from_chat, from_responses, from_anthropic])
@pytest.mark.parametrize("usage", [None, {}, {"prompt_tokens_details": None, "input_tokens": None}])
def test_counts_left_out_are_zero(read: Callable[[object], Usage], usage: object) -> None:
    assert read(usage) == Usage()


@pytest.mark.parametrize("read", [from_chat, from_responses, from_anthropic])
@pytest.mark.parametrize(
    "usage",
    [
        [1, 2],
        {"prompt_tokens": "many", "input_tokens": "many", "output_tokens": "many"},
        {"prompt_tokens_details": 3, "input_tokens_details": 3, "output_tokens_details": 3},
    ],
)
def test_a_usage_of_the_wrong_shape_raises(read: Callable[[object], Usage], usage: object) -> None:
    """The clients report it as an answer of the wrong shape (`SHAPE_ERRORS`), never a 0."""
    with pytest.raises((TypeError, ValueError)):
        read(usage)


def test_what_is_written_is_valid_for_the_sdks() -> None:
    usage = Usage(1000, 50, cached_tokens=600, cache_write_tokens=300, reasoning_tokens=20)
    chat = openai.types.CompletionUsage.model_validate(to_chat(usage))
    assert chat.prompt_tokens_details is not None
    assert chat.completion_tokens_details is not None
    assert (chat.prompt_tokens, chat.total_tokens) == (1000, 1050)
    assert chat.prompt_tokens_details.cached_tokens == 600
    assert chat.completion_tokens_details.reasoning_tokens == 20
    response = openai.types.responses.ResponseUsage.model_validate(to_responses(usage))
    assert response.input_tokens_details.cache_write_tokens == 300
    claude = anthropic.types.Usage.model_validate(to_anthropic(usage))
    assert (claude.input_tokens, claude.cache_read_input_tokens) == (100, 600)
    assert claude.cache_creation_input_tokens == 300
    assert claude.output_tokens_details is not None
    assert claude.output_tokens_details.thinking_tokens == 20


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    """Usages an upstream could report: the cache's share within the input, the reasoning's
    within the output."""
    prompt = draw(st.integers(0, 10**7))
    cached = draw(st.integers(0, prompt))
    completion = draw(st.integers(0, 10**6))
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        cache_write_tokens=draw(st.integers(0, prompt - cached)),
        reasoning_tokens=draw(st.integers(0, completion)),
    )


@given(usages())
def test_each_shape_reads_back_what_was_written(usage: Usage) -> None:
    pairs: list[tuple[Callable[[Usage], dict[str, Any]], Callable[[object], Usage]]] = [
        (to_chat, from_chat),
        (to_responses, from_responses),
        (to_anthropic, from_anthropic),
    ]
    for write, read in pairs:
        assert read(write(usage)) == usage


@given(usages(), usages())
def test_a_sum_of_rounds_sums_every_count(first: Usage, second: Usage) -> None:
    total = first + second
    assert total.cached_tokens == first.cached_tokens + second.cached_tokens
    assert total.cache_write_tokens == first.cache_write_tokens + second.cache_write_tokens
    assert total.reasoning_tokens == first.reasoning_tokens + second.reasoning_tokens
    assert total.total_tokens == first.total_tokens + second.total_tokens
