"""A tokenizer counts a text it counted lately once, for the same tenant: the repeated system
prompt, tool definitions, notes and question of a tenant's requests cost a look-up, the counts
stay exact, and no tenant's count is found by another (how long a count takes would tell)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import workingmem as wm
from workingmem.gateway import Gateway
from workingmem.gateway_config import GatewayConfig
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.tokens import tokenizer_for
from workingmem.tokens._recent import RecentCounts, counting_for
from workingmem.tokens._tiktoken import TiktokenTokenizer, encoding
from workingmem.types import ModelInfo


class _Counter:
    """Counts words, and what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, text: str) -> int:
        self.asked.append(text)
        return len(text.split())


PROMPT = "You are a careful assistant who answers in one short paragraph. " * 4


def test_a_text_counted_again_for_the_same_tenant_is_not_counted_again() -> None:
    counter = _Counter()
    counts = RecentCounts(counter)
    copy = "".join(list(PROMPT))  # equal text, another object: as each request parses it
    with counting_for("acme"):
        assert counts(PROMPT) == counts(copy) == len(PROMPT.split())
    assert counter.asked == [PROMPT]


def test_another_tenant_s_count_is_not_found_and_none_is_kept_outside_a_tenant() -> None:
    counter = _Counter()
    counts = RecentCounts(counter)
    with counting_for("acme"):
        counts(PROMPT)
    with counting_for("beta"):
        counts(PROMPT)  # acme's count would answer quicker: beta counts it itself
    counts(PROMPT)
    counts(PROMPT)  # no tenant said: nothing kept
    with counting_for("acme"):
        counts(PROMPT)
    assert counter.asked == [PROMPT] * 4


def test_short_texts_and_texts_over_the_limit_are_counted_every_time() -> None:
    counter = _Counter()
    counts = RecentCounts(counter, max_chars=1_000, min_chars=8)
    long = "word " * 300
    with counting_for("acme"):
        for text in ("hi there", "hi", long, long):
            counts(text)
    assert counter.asked == ["hi there", "hi", long, long]


def test_the_oldest_texts_are_forgotten_first_within_the_limit() -> None:
    counter = _Counter()
    counts = RecentCounts(counter, max_chars=100, min_chars=1)
    texts = [f"{i:02d} " + "x" * 37 for i in range(3)]  # 40 characters each
    with counting_for("acme"):
        for text in texts:
            counts(text)
        counts(texts[2])
        counts(texts[0])  # the third text pushed the first out
    assert counter.asked == [*texts, texts[0]]


def test_the_shared_tokenizer_counts_exactly_through_its_memory() -> None:
    tokenizer = tokenizer_for(ModelInfo(id="gpt-4o-mini", context_window=128_000))
    text = f"{PROMPT} (counted once, {id(object())})"
    assert tokenizer.count_text(text) == len(encoding("o200k_base").encode_ordinary(text))
    message = {"role": "system", "content": text}
    assert tokenizer.count_message(message) == tokenizer.count_message(dict(message))


@settings(deadline=None)  # the first example loads the encoding
@given(st.lists(st.text(min_size=0, max_size=80), max_size=30))
def test_counts_with_the_memory_equal_the_tokenizer_s_own(texts: list[str]) -> None:
    encode = encoding("o200k_base").encode_ordinary
    counts = RecentCounts(lambda text: len(encode(text)), max_chars=200, min_chars=4)
    with counting_for("acme"):
        for text in texts + texts[::-1]:
            assert counts(text) == len(encode(text))


def test_threads_counting_at_once_get_the_right_counts_within_the_limit() -> None:
    counts = RecentCounts(lambda text: len(text.split()), max_chars=2_000, min_chars=1)
    texts = [" ".join(["w"] * (i % 50 + 1)) + f" {i}" for i in range(400)]
    start = threading.Barrier(4)
    wrong: list[str] = []

    def work(offset: int) -> None:
        start.wait()
        with counting_for(f"tenant-{offset % 2}"):
            for i in range(2_000):
                text = texts[(i * 7 + offset) % len(texts)]
                if counts(text) != len(text.split()):
                    wrong.append(text)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert sum(len(text) for _, text in counts._counts) == counts._chars <= 2_000


async def test_an_ask_a_stream_and_their_updates_count_for_their_tenant_alone(
    tmp_path: Path,
) -> None:
    """The gateway says whose counting each call is: an ask's texts are kept for its tenant,
    a stream's too, whatever task reads it; another tenant finds none of them."""
    question = f"Where did we leave the plans for Lyon, {uuid.uuid4().hex}?"

    def answering(request: dict[str, Any]) -> Reply:
        return Reply("In the blue folder.", prompt_tokens=10, completion_tokens=5)

    config = GatewayConfig(default_model="gpt-4o-mini", cheap_model="gpt-4o-mini")
    async with (
        ScriptedUpstream(responder=answering) as upstream,
        OpenAIClient(base_url=upstream.base_url, timeout=2, max_retries=0) as llm,
        await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store,
        Gateway(store=store, llm=llm, config=config) as gateway,
    ):
        tokenizer = tokenizer_for(gateway.plan(None).model)
        assert isinstance(tokenizer, TiktokenTokenizer)
        await gateway.ask(tenant_id="acme", thread_id="plans", message=question)
        stream = gateway.ask_stream(tenant_id="beta", thread_id="plans", message=question + "!")
        async for _ in stream:
            pass
        await gateway.when_idle()
    kept = {key for key in tokenizer._count._counts if question in key[1]}
    assert kept == {("acme", question), ("beta", question + "!")}
