"""GGUF vocabularies: exact counts for a local model, read from the model's own GGUF file.

    tok = gguf_tokenizer("/models/qwen2.5-0.5b-instruct-q4_k_m.gguf")
    tok.key                   # "gguf:<the file's SHA-256>", stored next to each turn's count
    tok.count_text("hello")   # what llama.cpp's tokenizer of that very file says
    tok.context_length        # the GGUF's own <architecture>.context_length, e.g. 32768

llama-cpp-python is the optional extra ``local``; it is imported on first use only, so the
core works without it (`workingmem.tokens.tokenizer_for` then falls back to the estimate).
It lives with the local model, not in `workingmem.tokens` (which imports no SDK): importing
`workingmem.llm` registers it there as the ``gguf:`` scheme (`register_scheme`).

**Only the vocabulary is loaded**, once per file per process (llama.cpp's ``vocab_only``: no
weights, no context; 0.13 s for SmolLM2-135M's 49,152 tokens), through llama-cpp-python's
low-level C API (`llama_cpp.llama_cpp`). ``Llama(vocab_only=True)`` would also build a
512-token context, and print a llama.cpp warning on stderr however quiet it is told to be.

**The key is the file's SHA-256** (``gguf:<64 hex>``), not its path: a stored count is valid
for as long as the tokenizer is the same, and the hash names the file by its content. Two
different files never share a key (a model replaced under the same name gets a new one), and
the same file moved or copied keeps it. Hashing costs one read of the file per process
(0.07 s for SmolLM2's 98 MB), remembered while its size and modification time stay the same.
A key is rebuilt (`gguf_tokenizer` of the bare SHA-256) from the files this process has loaded,
and from the default local model's, which is located by `workingmem.llm._weights`.

**Counting** is llama.cpp's own tokenizer: the count only (llama.cpp is given no buffer, and
answers with the number of tokens it would have written), no BOS, special tokens in the text
parsed as such, as the local model's worker tokenizes the rendered prompt. One lock per file:
llama.cpp keeps a call's state apart from the vocabulary, but nothing here depends on it.

**The chat overhead** is measured once per file, by rendering a probe conversation with the
file's own chat template (``tokenizer.chat_template``, with llama-cpp-python's formatter, as
the worker does) and tokenizing it: for a ChatML template like SmolLM2's, 4 tokens a message
besides its role (``<|im_start|>``, ``\\n``, ``<|im_end|>``, ``\\n``) and 3 a request
(``<|im_start|>assistant\\n``), so a text-only prompt is counted exactly. What a template adds
once (a BOS, Llama 3's date header) counts with the request. Without a template, or with one
the probe cannot render, `HF_TOKENS_PER_MESSAGE` and `HF_REPLY_PRIMING`, an estimate.
"""

from __future__ import annotations

import ctypes
import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from workingmem.errors import ValidationError
from workingmem.tokens import GGUF_KEY_PREFIX, register_scheme
from workingmem.tokens._chat import ChatTokenizer
from workingmem.tokens._hf import HF_REPLY_PRIMING, HF_TOKENS_PER_MESSAGE
from workingmem.tokens._recent import RecentCounts

from ._weights import file_sha256

__all__ = [
    "GGUF_KEY_PREFIX",
    "GGUF_MAGIC",
    "GGUFTokenizer",
    "gguf_tokenizer",
]


GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""

_FIELD = "model.tokenizer"
_INSTALL_HINT = "pip install 'workingmem[local]'"
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_META_BYTES = 256
"""Room for one metadata value we read (an architecture's name, a number)."""

logger = logging.getLogger("workingmem.tokens")

_lock = threading.Lock()
"""Guards the caches below and every load; counting takes its tokenizer's own lock."""
_by_sha: dict[str, GGUFTokenizer] = {}
"""SHA-256 -> the tokenizer of the file that has it, loaded once per process."""
_backend_ready = False


@dataclass(frozen=True, slots=True)
class _ChatOverhead:
    per_message: int
    """Template tokens around each message, besides its role."""
    per_request: int
    """Template tokens once per request: the reply's priming, a BOS, a fixed header."""
    measured: bool
    """False when the constants stand in for a template we could not render."""


class GGUFTokenizer(ChatTokenizer):
    """Counts text with the vocabulary of one GGUF file, as llama.cpp tokenizes it.

    Built by `gguf_tokenizer` (which caches it per file); not meant to be made directly.

    Args:
        path: The file's resolved path, where it was first loaded from.
        sha256: The file's SHA-256 (hex, lower case): the key.
        vocab: The loaded vocabulary.
    """

    def __init__(self, path: Path, sha256: str, vocab: _Vocab) -> None:
        self._vocab = vocab
        self._count_lock = threading.Lock()
        self._count = RecentCounts(self._count_vocab)
        overhead = _chat_overhead(vocab)
        super().__init__(
            key=f"{GGUF_KEY_PREFIX}{sha256}",
            exact=True,
            tokens_per_message=overhead.per_message,
            reply_overhead=overhead.per_request,
        )
        self.path = path
        self.sha256 = sha256
        self.chat_overhead_measured = overhead.measured
        """Whether the chat overhead comes from the file's own template (else constants)."""
        self.context_length = vocab.context_length
        """The context the model was trained for (``<architecture>.context_length``), if the
        file says."""

    def count_text(self, text: str) -> int:
        """The tokens of `text` alone: no BOS, special tokens parsed as the worker parses them."""
        return self._count(text) if text else 0

    def _count_vocab(self, text: str) -> int:
        data = text.encode("utf-8", errors="replace")
        with self._count_lock:
            return self._vocab.count(data, special=True)


def gguf_tokenizer(spec: str, *, sha256: str | None = None) -> GGUFTokenizer:
    """The tokenizer of a GGUF file, loaded once per process.

    Args:
        spec: The file's path, or its SHA-256 (64 hex digits: a key without its prefix), for
            a file this process has loaded already or the default local model's.
        sha256: The SHA-256 the file at `spec` must have, checked before llama.cpp reads it.

    Raises:
        ValidationError: llama-cpp-python is not installed; no file at that path; the file is
            not a GGUF, has another SHA-256 than `sha256`, or llama.cpp cannot read its
            vocabulary; no file is known by that SHA-256 here (or the default local model's
            is not installed).
    """
    if _SHA256.fullmatch(spec):
        return _by_hash(spec.lower())
    path = _gguf_path(spec)
    actual = _file_sha256(path)
    if sha256 is not None and actual != sha256.lower():
        raise ValidationError(
            _FIELD, f"{str(path)!r} has SHA-256 {actual}, expected {sha256.lower()}"
        )
    return _load(path, actual)


def _by_hash(sha256: str) -> GGUFTokenizer:
    with _lock:
        loaded = _by_sha.get(sha256)
    if loaded is not None:
        return loaded
    # The default local model's file, located (and its hash checked) where it is installed.
    from ._weights import LOCAL_MODEL_SHA256, LocalModelUnavailableError, local_model_path

    if sha256 != LOCAL_MODEL_SHA256:
        raise ValidationError(
            _FIELD, f"no GGUF file with SHA-256 {sha256} is known here: name it by its path"
        )
    try:
        path = local_model_path()
    except LocalModelUnavailableError as exc:
        raise ValidationError(_FIELD, str(exc)) from exc
    return _load(path, sha256)


def _gguf_path(spec: str) -> Path:
    """The resolved path of the GGUF file `spec` names, its first bytes checked.

    Raises:
        ValidationError: no such file, unreadable, or not a GGUF.
    """
    path = Path(spec).expanduser()
    try:
        with path.open("rb") as file:
            magic = file.read(len(GGUF_MAGIC))
    except FileNotFoundError as exc:
        raise ValidationError(_FIELD, f"no GGUF file at {spec!r}") from exc
    except OSError as exc:  # a directory, no permission, ...
        raise ValidationError(_FIELD, f"cannot read {spec!r}: {exc.strerror or exc}") from exc
    if magic != GGUF_MAGIC:
        raise ValidationError(
            _FIELD, f"{spec!r} is not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})"
        )
    return path.resolve()


def _file_sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise ValidationError(_FIELD, f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc


def _load(path: Path, sha256: str) -> GGUFTokenizer:
    with _lock:
        loaded = _by_sha.get(sha256)
        if loaded is None:
            loaded = _by_sha[sha256] = GGUFTokenizer(path, sha256, _Vocab.load(path))
    return loaded


class _Vocab:
    """A GGUF file's vocabulary in llama.cpp, with the metadata a tokenizer needs."""

    def __init__(self, native: Any, model: Any) -> None:
        self._native = native
        self._model = model  # never freed: a vocabulary lives as long as the process
        self._vocab = native.llama_model_get_vocab(model)
        self._none = (native.llama_token * 1)()
        template = native.llama_model_chat_template(model, None)
        self.chat_template: str | None = template.decode("utf-8") if template else None
        architecture = self.meta("general.architecture")
        length = self.meta(f"{architecture}.context_length") if architecture else None
        self.context_length: int | None = int(length) if length and length.isdigit() else None

    @classmethod
    def load(cls, path: Path) -> _Vocab:
        """Loads the vocabulary of `path`, with llama.cpp's logging silenced meanwhile.

        Raises:
            ValidationError: llama-cpp-python is not installed, or llama.cpp cannot load it.
        """
        global _backend_ready
        try:
            import llama_cpp.llama_cpp as native
        except ImportError as exc:
            raise ValidationError(
                _FIELD, f"a GGUF vocabulary needs llama-cpp-python: {_INSTALL_HINT}"
            ) from exc
        quiet = logging.getLogger("llama-cpp-python")  # the logger its log callback obeys
        level = quiet.level
        quiet.setLevel(logging.CRITICAL + 1)
        try:
            if not _backend_ready:
                native.llama_backend_init()
                _backend_ready = True
            params = native.llama_model_default_params()
            params.vocab_only = True
            model = native.llama_model_load_from_file(str(path).encode(), params)
        finally:
            quiet.setLevel(level)
        if not model:
            raise ValidationError(_FIELD, f"llama.cpp cannot read the vocabulary of {str(path)!r}")
        return cls(native, model)

    def count(self, data: bytes, *, special: bool) -> int:
        """The tokens of UTF-8 `data`, without a BOS: llama.cpp is asked for the number only
        (room for no token), and answers with minus the tokens it would have written."""
        found = self._native.llama_tokenize(
            self._vocab, data, len(data), self._none, 0, False, special
        )
        return cast(int, -found)

    def token_text(self, token: int) -> str:
        """How a (special) token renders, for the chat template's ``bos_token``/``eos_token``."""
        if token < 0:
            return ""
        buffer = (ctypes.c_char * 64)()
        size = self._native.llama_token_to_piece(self._vocab, token, buffer, 64, 0, True)
        return buffer.raw[: max(size, 0)].decode("utf-8", errors="replace")

    def meta(self, key: str) -> str | None:
        """A metadata value as text; None when the file has no such key."""
        buffer = (ctypes.c_char * _META_BYTES)()
        size = self._native.llama_model_meta_val_str(self._model, key.encode(), buffer, _META_BYTES)
        if size < 0:
            return None
        return buffer.raw[: min(size, _META_BYTES - 1)].decode("utf-8", errors="replace")

    @property
    def bos(self) -> int:
        return cast(int, self._native.llama_vocab_bos(self._vocab))

    @property
    def eos(self) -> int:
        return cast(int, self._native.llama_vocab_eos(self._vocab))


_PROBE = (
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello there."},
    {"role": "assistant", "content": "Hi, how can I help?"},
    {"role": "user", "content": "Say something."},
)
"""A conversation the template renders once: the last user message's share of it gives the
overhead of a message, what is left over once all are counted that of a request."""


def _chat_overhead(vocab: _Vocab) -> _ChatOverhead:
    """The chat template's tokens per message and per request, measured on `_PROBE`."""
    fallback = _ChatOverhead(HF_TOKENS_PER_MESSAGE, HF_REPLY_PRIMING, measured=False)
    if vocab.chat_template is None:
        return fallback
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def rendered(messages: tuple[dict[str, str], ...], reply: bool) -> int:
        formatter = Jinja2ChatFormatter(
            template=cast(str, vocab.chat_template),
            eos_token=vocab.token_text(vocab.eos),
            bos_token=vocab.token_text(vocab.bos),
            add_generation_prompt=reply,
        )
        prompt = formatter(messages=cast(Any, list(messages))).prompt
        return vocab.count(prompt.encode("utf-8"), special=True)

    def text(value: str) -> int:
        return vocab.count(value.encode("utf-8"), special=True)

    for probe in (_PROBE, _PROBE[1:]):  # some templates refuse a system message
        try:
            before, whole, primed = (
                rendered(probe[:-1], False),
                rendered(probe, False),
                rendered(probe, True),
            )
        except Exception:  # a template's raise_exception, or any error of its Jinja code
            continue
        last = probe[-1]
        per_message = whole - before - text(last["content"]) - text(last["role"])
        counted = sum(per_message + text(m["content"]) + text(m["role"]) for m in probe)
        per_request = primed - counted
        if per_message >= 0 and per_request >= 0:
            return _ChatOverhead(per_message, per_request, measured=True)
    logger.warning(
        "the chat template of this GGUF could not be measured: counting %d tokens a message "
        "and %d a request, an estimate",
        fallback.per_message,
        fallback.per_request,
    )
    return fallback


register_scheme(GGUF_KEY_PREFIX, gguf_tokenizer)
