"""The overlap rule: a request's turns are stored once, whatever the client resends.

Hypothesis draws stored threads and requests that resend the whole history, a part of it,
only new turns, or retry; applying a request twice stores nothing the second time, and a
request that starts with the whole thread adds exactly what follows it.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import workingmem as wm
from workingmem.messages import overlap

messages = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["user", "assistant"]),
    st.sampled_from(["hi", "yes", "no", "Lyon?", "ok"]),  # few values: overlaps happen often
)
threads = st.lists(messages, max_size=12)


def apply(stored: list[wm.Message], request: list[wm.Message]) -> list[wm.Message]:
    return [*stored, *request[overlap(stored, request) :]]


@given(threads, threads)
def test_a_request_sent_twice_is_stored_once(
    stored: list[wm.Message], request: list[wm.Message]
) -> None:
    once = apply(stored, request)
    assert apply(once, request) == once


@given(threads, threads)
def test_the_whole_history_resent_adds_only_what_follows_it(
    stored: list[wm.Message], new: list[wm.Message]
) -> None:
    assert apply(stored, [*stored, *new]) == [*stored, *new]


@given(threads, threads)
def test_the_thread_always_ends_with_the_request(
    stored: list[wm.Message], request: list[wm.Message]
) -> None:
    result = apply(stored, request)
    assert result[len(result) - len(request) :] == request
    assert result[: len(stored)] == stored  # nothing stored is changed


@given(threads, st.integers(min_value=0, max_value=12), threads)
def test_the_overlap_is_the_longest_suffix_that_is_a_prefix(
    stored: list[wm.Message], cut: int, new: list[wm.Message]
) -> None:
    request = [*stored[cut:], *new]
    k = overlap(stored, request)
    assert stored[len(stored) - k :] == request[:k]
    longer = [j for j in range(k + 1, min(len(stored), len(request)) + 1)]
    assert all(stored[len(stored) - j :] != request[:j] for j in longer)
    assert k >= len(stored[cut:])  # a resent part of the tail is always recognised


def test_examples() -> None:
    u, a = {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}
    assert overlap([], [u]) == 0
    assert overlap([u], [u]) == 1  # a retry: the unanswered turn is there already
    assert overlap([u, a], [u]) == 0  # the same words again, after an answer: new
    assert overlap([u, a], [u, a, u]) == 2
    assert overlap([u, a], [a, u]) == 1
