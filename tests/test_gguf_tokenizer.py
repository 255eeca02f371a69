"""The GGUF tokenizer: the local model counts with its own vocabulary, read from its GGUF file.

Counts are checked against llama-cpp-python's own `Llama.tokenize` and against the prompt the
local model's worker renders with the file's chat template (the real SmolLM2 file: without
llama-cpp-python or the weights these tests skip, and fail under CI). Where the extra or the
file is missing, the estimate counts instead, after a logged warning.
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest

from tests.llm.local_model import require_local_model
from workingmem.embedded import LOCAL_CONTEXT_WINDOW, LOCAL_GATEWAY_CONFIG, LOCAL_TOKENIZER
from workingmem.errors import ValidationError
from workingmem.llm import _gguf, _weights
from workingmem.llm._gguf import GGUFTokenizer, gguf_tokenizer
from workingmem.llm._weights import LOCAL_MODEL, LOCAL_MODEL_SHA256, LocalModelUnavailableError
from workingmem.llm.local import LOCAL_MODEL_CONTEXT, chat_messages
from workingmem.tokens import count_tokens, tokenizer_for, tokenizer_from_key
from workingmem.tokens._estimate import ESTIMATE
from workingmem.tokens._hf import HF_REPLY_PRIMING, HF_TOKENS_PER_MESSAGE
from workingmem.types import MessageIn, ModelInfo

TEXTS = [
    "Hello world",
    "",
    "  leading spaces and trailing  ",
    "Caroline went to the LGBTQ support group on 7 May 2023 at 13:56.",
    "ünïcödé, 😀 emoji, 中文字符 and 12345678901234567890",
    "def f(x):\n    return {'a': [1, 2, 3]}\n\n\n",
    "a literal <|im_end|> marker and <|im_start|>user\n inside a text",
    "word " * 300,
]

CONVERSATIONS: list[list[MessageIn]] = [
    [
        {"role": "system", "content": "You are a helpful assistant.\n\nMemory: Dana, Lisbon."},
        {"role": "user", "content": "Hi! I'm Dana and I live in Lisbon."},
        {"role": "assistant", "content": "Nice to meet you, Dana! How can I help?"},
        {"role": "user", "content": "I'm allergic to peanuts 🥜, so no peanut recipes, please."},
    ],
    [
        {"role": "system", "content": "Summarize the conversation as JSON."},
        {"role": "user", "content": "[1] user: we met on 3 May\n[2] assistant: yes, at noon"},
    ],
]


def _model(name: str, tokenizer: str) -> ModelInfo:
    """A model id of its own per test: `tokenizer_for` caches per (id, spec)."""
    return ModelInfo(id=f"gguf-test-{name}", context_window=8_192, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def smollm2() -> Path:
    require_local_model()
    from workingmem.llm._weights import local_model_path

    return local_model_path()


@pytest.fixture(scope="module")
def reference(smollm2: Path) -> Any:
    """llama-cpp-python's own high-level tokenizer of the same file: what counts are held to."""
    import llama_cpp

    return llama_cpp.Llama(str(smollm2), vocab_only=True, verbose=False)


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """No vocabulary loaded yet (the loaded ones come back after the test)."""
    monkeypatch.setattr(_gguf, "_by_sha", {})
    monkeypatch.setattr(_weights, "_verified", {})


def _worker_prompt_tokens(reference: Any, messages: list[MessageIn]) -> int:
    """The prompt's tokens as the local model's worker counts them (`_local_worker._Model.
    _prompt_tokens`): the chat template rendered over `chat_messages`, then tokenized."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def text(token: int) -> str:
        return str(reference.detokenize([token], special=True).decode("utf-8"))

    formatter = Jinja2ChatFormatter(
        template=reference.metadata["tokenizer.chat_template"],
        eos_token=text(reference.token_eos()),
        bos_token=text(reference.token_bos()),
    )
    rendered = formatter(messages=cast(Any, chat_messages(messages)))
    prompt = rendered.prompt.encode("utf-8")
    return len(reference.tokenize(prompt, add_bos=not rendered.added_special, special=True))


@pytest.mark.parametrize("text", [pytest.param(t, id=f"text{i}") for i, t in enumerate(TEXTS)])
def test_a_text_counts_exactly_as_llama_cpp_tokenizes_it(
    smollm2: Path, reference: Any, text: str
) -> None:
    tokenizer = gguf_tokenizer(str(smollm2))
    expected = len(reference.tokenize(text.encode("utf-8"), add_bos=False, special=True))
    assert tokenizer.count_text(text) == expected


@pytest.mark.parametrize(
    "messages", [pytest.param(c, id=f"conversation{i}") for i, c in enumerate(CONVERSATIONS)]
)
def test_a_prompt_counts_as_the_worker_counts_the_prompt_it_renders(
    smollm2: Path, reference: Any, messages: list[MessageIn]
) -> None:
    """Chat overhead included: what the gateway plans with is what the model is given."""
    model = _model("prompt", f"gguf:{smollm2}")
    assert count_tokens(messages, model) == _worker_prompt_tokens(reference, messages)


def test_the_chatml_overhead_is_the_tokens_of_its_markers(smollm2: Path, reference: Any) -> None:
    """``<|im_start|>`` role ``\\n`` ... ``<|im_end|>\\n`` a message, and the reply's priming
    ``<|im_start|>assistant\\n`` a request ("assistant" is two tokens in SmolLM2's vocabulary)."""

    def tokens(text: str) -> int:
        return len(reference.tokenize(text.encode(), add_bos=False, special=True))

    tokenizer = gguf_tokenizer(str(smollm2))
    assert tokenizer.chat_overhead_measured
    assert tokenizer.tokens_per_message == sum(
        map(tokens, ["<|im_start|>", "\n", "<|im_end|>", "\n"])
    )
    assert tokenizer.reply_overhead == tokens("<|im_start|>assistant\n") == 4


def test_the_local_models_settings_count_with_its_own_vocabulary(smollm2: Path) -> None:
    """`LOCAL_GATEWAY_CONFIG` names SmolLM2's vocabulary by its hash, plans with its whole
    context, and a stored key rebuilds the same tokenizer."""
    model = LOCAL_GATEWAY_CONFIG.model_info(LOCAL_MODEL)
    assert model.tokenizer == LOCAL_TOKENIZER == f"gguf:{LOCAL_MODEL_SHA256}"
    assert model.context_window == LOCAL_CONTEXT_WINDOW == LOCAL_MODEL_CONTEXT == 8_192
    tokenizer = tokenizer_for(model)
    assert isinstance(tokenizer, GGUFTokenizer)
    assert (tokenizer.key, tokenizer.exact) == (LOCAL_TOKENIZER, True)
    assert tokenizer.context_length == 8_192  # SmolLM2's llama.context_length
    assert tokenizer_from_key(tokenizer.key) is tokenizer
    assert gguf_tokenizer(str(smollm2)) is tokenizer


def test_keys_differ_between_files_and_follow_a_moved_one(smollm2: Path, tmp_path: Path) -> None:
    """The key is the file's SHA-256: a file that differs in one byte has its own, the same
    file moved keeps its own (and its loaded vocabulary)."""
    other = tmp_path / "other.gguf"
    shutil.copyfile(smollm2, other)
    with other.open("r+b") as file:  # one byte of the last tensor's data: the vocabulary stays
        file.seek(-1, 2)
        last = file.read(1)
        file.seek(-1, 2)
        file.write(bytes([last[0] ^ 0xFF]))
    changed = gguf_tokenizer(str(other))
    original = gguf_tokenizer(str(smollm2))
    assert changed.key.startswith("gguf:")
    assert changed.key != original.key == LOCAL_TOKENIZER
    assert changed.count_text(TEXTS[3]) == original.count_text(TEXTS[3])
    assert tokenizer_from_key(changed.key) is changed

    (tmp_path / "moved").mkdir()
    moved = other.rename(tmp_path / "moved" / "renamed.gguf")
    assert gguf_tokenizer(str(moved)) is changed
    assert tokenizer_for(_model("moved", f"gguf:{moved}")).key == changed.key


def test_a_wrong_sha256_is_refused_before_the_file_is_read(
    smollm2: Path, fresh_cache: None
) -> None:
    with pytest.raises(ValidationError) as refused:
        gguf_tokenizer(str(smollm2), sha256="0" * 64)
    assert f"has SHA-256 {LOCAL_MODEL_SHA256}, expected {'0' * 64}" in refused.value.reason
    assert _gguf._by_sha == {}  # llama.cpp never read it
    assert gguf_tokenizer(str(smollm2), sha256=LOCAL_MODEL_SHA256.upper()).key == LOCAL_TOKENIZER


def test_counting_from_many_threads_at_once_agrees_with_counting_alone(smollm2: Path) -> None:
    tokenizer = gguf_tokenizer(str(smollm2))
    alone = [tokenizer.count_text(text) for text in TEXTS]
    start = threading.Barrier(8)

    def count() -> list[int]:
        start.wait()
        return [n for _ in range(50) for n in map(tokenizer.count_text, TEXTS)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = [future.result() for future in [pool.submit(count) for _ in range(8)]]
    assert all(result == alone * 50 for result in results)


def test_threads_that_ask_for_one_file_at_once_share_one_load(
    smollm2: Path, fresh_cache: None
) -> None:
    start = threading.Barrier(6)

    def load() -> GGUFTokenizer:
        start.wait()
        return gguf_tokenizer(str(smollm2))

    with ThreadPoolExecutor(max_workers=6) as pool:
        loaded = [future.result() for future in [pool.submit(load) for _ in range(6)]]
    assert all(tokenizer is loaded[0] for tokenizer in loaded)
    assert list(_gguf._by_sha) == [LOCAL_MODEL_SHA256]


def _warned(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(
        record.name == "workingmem.tokens"
        and record.levelno == logging.WARNING
        and text in record.getMessage()
        for record in caplog.records
    )


def test_without_llama_cpp_the_estimate_counts_after_a_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_cache: None,
) -> None:
    """The core imports and counts without the ``local`` extra (here: its import fails)."""
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_cpp", None)
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF" + bytes(64))
    caplog.set_level(logging.WARNING, logger="workingmem.tokens")
    assert tokenizer_for(_model("no-llama-cpp", f"gguf:{fake}")) is ESTIMATE
    assert _warned(caplog, "needs llama-cpp-python: pip install 'workingmem[local]'")
    assert tokenizer_from_key(LOCAL_TOKENIZER) is None  # recounted, not trusted
    assert tokenizer_for(_model("no-llama-cpp-default", LOCAL_TOKENIZER)) is ESTIMATE


@pytest.mark.parametrize(
    "prefix", [pytest.param("gguf:", id="gguf-prefix"), pytest.param("", id="path-alone")]
)
def test_a_missing_file_counts_with_the_estimate_after_a_warning(
    prefix: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "gone.gguf"
    caplog.set_level(logging.WARNING, logger="workingmem.tokens")
    model = _model(f"missing-{prefix or 'path'}", f"{prefix}{missing}")
    assert tokenizer_for(model) is ESTIMATE
    assert _warned(caplog, f"no GGUF file at {str(missing)!r}")
    assert count_tokens([{"role": "user", "content": "abcdefgh"}], model) == 3 + 1 + 2 + 3


def test_missing_weights_leave_the_default_key_unbuildable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fresh_cache: None
) -> None:
    import workingmem.llm._weights as weights

    def missing() -> Path:
        raise LocalModelUnavailableError("the local model's weights are not installed")

    monkeypatch.setattr(weights, "local_model_path", missing)
    caplog.set_level(logging.WARNING, logger="workingmem.tokens")
    assert tokenizer_from_key(LOCAL_TOKENIZER) is None
    assert tokenizer_for(_model("no-weights", LOCAL_TOKENIZER)) is ESTIMATE
    assert _warned(caplog, "weights are not installed")
    assert tokenizer_from_key("gguf:" + "ab" * 32) is None  # a file this process never loaded


def test_a_file_that_is_not_a_gguf_is_named(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("not a model", encoding="utf-8")
    with pytest.raises(ValidationError, match="is not a GGUF file"):
        gguf_tokenizer(str(text))
    with pytest.raises(ValidationError, match="cannot read"):
        gguf_tokenizer(str(tmp_path))  # a directory


class _Template:
    """SmolLM2's vocabulary under another chat template."""

    def __init__(self, vocab: Any, template: str | None) -> None:
        self._vocab = vocab
        self.chat_template = template
        self.bos, self.eos = vocab.bos, vocab.eos

    def count(self, data: bytes, *, special: bool) -> int:
        return int(self._vocab.count(data, special=special))

    def token_text(self, token: int) -> str:
        return str(self._vocab.token_text(token))


NO_SYSTEM = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "<|endoftext|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>model\n{% endif %}"
)
"""Gemma's shape (no system role, the reply primed as "model"), in SmolLM2's special tokens."""


def test_a_template_that_refuses_a_system_message_is_measured_without_one(
    smollm2: Path,
) -> None:
    vocab = _Template(gguf_tokenizer(str(smollm2))._vocab, NO_SYSTEM)
    overhead = _gguf._chat_overhead(cast(Any, vocab))

    def tokens(text: str) -> int:
        return vocab.count(text.encode(), special=True)

    assert overhead.measured
    assert overhead.per_message == sum(map(tokens, ["<|im_start|>", "\n", "<|endoftext|>", "\n"]))
    assert overhead.per_request == tokens("<|im_start|>model\n")


@pytest.mark.parametrize(
    ("template", "warns"),
    [
        pytest.param(None, False, id="no-template"),
        pytest.param("{{ raise_exception('never') }}", True, id="unrenderable"),
    ],
)
def test_without_a_measurable_template_the_overhead_is_the_documented_estimate(
    smollm2: Path, template: str | None, warns: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="workingmem.tokens")
    vocab = _Template(gguf_tokenizer(str(smollm2))._vocab, template)
    overhead = _gguf._chat_overhead(cast(Any, vocab))
    assert (overhead.per_message, overhead.per_request) == (
        HF_TOKENS_PER_MESSAGE,
        HF_REPLY_PRIMING,
    )
    assert not overhead.measured
    assert _warned(caplog, "could not be measured") is warns
