"""A window whose start moves in steps (`window_step_ratio`), to keep a provider's prompt cache:
it is the plain window less some of its oldest units, never more than the step left unused,
still provider-valid and opening on a user turn; and as a thread grows its start holds for
many requests where the plain window's moves at each."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workingmem as wm
from tests.helpers import DEFAULT_PROFILE, GPT4O, assistant, user
from tests.test_window_properties import REPLY, assert_provider_valid, counted, threads
from workingmem.strategies import select_window


@given(threads(), st.integers(20, 2_000), st.integers(1, 1_000))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_a_stepped_window_is_the_plain_one_less_at_most_a_step(
    messages: list[wm.Message], limit: int, step: int
) -> None:
    tail = counted(messages)
    try:
        plain = select_window(tail, limit_tokens=limit, reply_overhead=REPLY, at_thread_start=True)
    except wm.ContextOverflowError:
        return
    stepped = select_window(
        tail, limit_tokens=limit, reply_overhead=REPLY, at_thread_start=True, step_tokens=step
    )
    assert plain.turns[len(plain.turns) - len(stepped.turns) :] == stepped.turns  # a suffix
    assert stepped.tokens == REPLY + sum(t.tokens for t in stepped.turns)
    assert plain.tokens - stepped.tokens <= step
    assert stepped.turns[0].message["role"] == "user"
    assert stepped.turns[-1] == plain.turns[-1]
    assert_provider_valid([t.message for t in stepped.turns])


def grown(exchanges: int) -> list[wm.Message]:
    return [
        message
        for i in range(exchanges)
        for message in (user(f"question {i} " + "word " * (i % 7)), assistant(f"answer {i}"))
    ]


def test_as_a_thread_grows_the_stepped_start_holds() -> None:
    limit, step = 1_000, 250
    starts: dict[int, list[int]] = {0: [], step: []}
    unused: list[int] = []
    for exchanges in range(40, 240):
        tail = counted([*grown(exchanges), user("now")])
        for tokens in (0, step):
            chosen = select_window(
                tail,
                limit_tokens=limit,
                reply_overhead=REPLY,
                at_thread_start=True,
                step_tokens=tokens,
            )
            starts[tokens].append(chosen.turns[0].seq)
            if tokens:
                unused.append(limit - chosen.tokens)

    def moves(seqs: list[int]) -> int:
        return sum(1 for a, b in pairwise(seqs) if a != b)

    assert moves(starts[0]) > 150  # the plain window moves at almost every request
    assert moves(starts[step]) * 5 < moves(starts[0])
    assert max(unused) <= step + 40  # the step, and the unit that did not fit
    assert all(b >= a for a, b in pairwise(starts[step]))


async def test_the_memory_steps_sliding_window_only(store: wm.ThreadStore, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[*grown(200), user("now")])
    plain = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
    stepped = plain.model_copy(update={"window_step_ratio": 0.3})

    async def first_seq(config: wm.WorkingMemoryConfig) -> int:
        loaded = await wm.WorkingMemory(store=store, config=config).load(
            tenant_id=tenant,
            thread_id="th",
            model=GPT4O,
            profile=DEFAULT_PROFILE,
            budget_tokens=2_000,
        )
        return loaded.seqs[0]

    assert await first_seq(stepped) >= await first_seq(plain)
    assert (await first_seq(stepped) - 1) % 8 == 0  # a steady start
    summary = wm.WorkingMemoryConfig(window_step_ratio=0.3)  # SUMMARY_BUFFER: its tail as is
    assert await first_seq(summary) == await first_seq(wm.WorkingMemoryConfig()) == 391
