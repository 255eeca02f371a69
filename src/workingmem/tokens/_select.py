"""Which tokenizer a model gets, and the functions the rest of workingmem calls.

    tok = tokenizer_for(ModelInfo(id="gpt-4o", context_window=128_000))
    tok.key                                    # "tiktoken:o200k_base"
    tokenizer_from_key(tok.key) is tok         # True: rebuilt from the key stored with a count
    count_tokens([{"role": "user", "content": "hi"}], model)  # 3 + 1 + 1 + 3 == 8

The choice, in order:

1. `ModelInfo.tokenizer`, when set: ``o200k_base`` / ``cl100k_base`` (or their keys
   ``tiktoken:...``), ``estimate:chars4``, a GGUF file's vocabulary (``gguf:<path>``, a path
   ending in ``.gguf``, or ``gguf:<SHA-256>`` for a file already loaded or the default local
   model's), or the path of a Hugging Face ``tokenizer.json`` (or of its folder, or
   ``hf:<path>``). Anything else is a `ValidationError`. A GGUF spec is turned into its
   tokenizer on first use only; when llama-cpp-python or the file is missing (or the file
   cannot be read), the estimate counts instead, after one logged warning.
2. tiktoken's own model table, when it maps the id to o200k_base or cl100k_base.
3. Otherwise the estimate (``estimate:chars4``), with one logged warning per model id saying
   how to get exact counts. A log record, not `warnings.warn`: hosts that turn warnings into
   errors must not fail a request over an estimate.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence

from workingmem.errors import ValidationError
from workingmem.tokens._estimate import ESTIMATE, ESTIMATE_KEY
from workingmem.tokens._hf import HF_KEY_PREFIX, hf_tokenizer
from workingmem.tokens._protocol import Tokenizer
from workingmem.tokens._tiktoken import (
    EXACT_ENCODINGS,
    encoding_name_for_model,
    tiktoken_tokenizer,
)
from workingmem.types import MessageIn, ModelInfo

__all__ = ["count_tokens", "tokenizer_for", "tokenizer_from_key"]

logger = logging.getLogger("workingmem.tokens")

_TIKTOKEN_PREFIX = "tiktoken:"


def tokenizer_for(model: ModelInfo) -> Tokenizer:
    """The tokenizer that counts for `model`, cached per (model id, model tokenizer).

    Args:
        model: The model; its `tokenizer` forces a choice, its `id` picks one otherwise.

    Returns:
        The model's own tokenizer when known, else the estimate (after a logged warning).

    Raises:
        ValidationError: `model.tokenizer` names no known encoding and no existing
            ``tokenizer.json``, or a ``tokenizer.json`` while ``tokenizers`` is not installed.
    """
    return _tokenizer_for(model.id, model.tokenizer)


def tokenizer_from_key(key: str) -> Tokenizer | None:
    """Rebuilds the tokenizer a stored `Tokenizer.key` names.

    Args:
        key: A key such as ``tiktoken:o200k_base``, ``hf:/models/llama3/tokenizer.json`` or
            ``gguf:<SHA-256 of the file>``.

    Returns:
        The tokenizer, or None when it cannot be rebuilt here: an unknown key, a
        ``tokenizer.json`` that is gone or unreadable, ``tokenizers`` not installed, a GGUF
        this process has not loaded (other than the default local model's) or
        llama-cpp-python not installed. Counts stored under such a key are then recounted
        rather than trusted.
    """
    if key == ESTIMATE_KEY:
        return ESTIMATE
    if key.startswith(_TIKTOKEN_PREFIX):
        name = key.removeprefix(_TIKTOKEN_PREFIX)
        return tiktoken_tokenizer(name) if name in EXACT_ENCODINGS else None
    if key.startswith(HF_KEY_PREFIX):
        try:
            return hf_tokenizer(key.removeprefix(HF_KEY_PREFIX))
        except ValidationError:
            return None
    scheme = _scheme_of(key)
    if scheme is not None:
        try:
            return _SCHEMES[scheme](key.removeprefix(scheme))
        except ValidationError:
            return None
    return None


def count_tokens(messages: Sequence[MessageIn], model: ModelInfo) -> int:
    """The prompt tokens of `messages` for `model`: every message, then the reply priming.

    Args:
        messages: OpenAI chat-format messages, system prompt included if it is to count.
        model: The model whose tokenizer counts.

    Returns:
        ``sum(count_message) + reply_overhead``; 0 for no messages (no request, no priming).
    """
    if not messages:
        return 0
    tokenizer = tokenizer_for(model)
    count_message = tokenizer.count_message
    return sum(count_message(message) for message in messages) + tokenizer.reply_overhead


@functools.cache
def _tokenizer_for(model_id: str, spec: str | None) -> Tokenizer:
    if spec is not None:
        return _from_spec(spec)
    name = encoding_name_for_model(model_id)
    if name in EXACT_ENCODINGS:
        return tiktoken_tokenizer(name)
    why = "is unknown to tiktoken" if name is None else f"uses {name}, which is not bundled"
    logger.warning(
        "model %r %s: counting tokens with an estimate (4 characters a token). For exact "
        "counts pass ModelInfo(tokenizer=...) with 'o200k_base', 'cl100k_base' or the path "
        "of the model's Hugging Face tokenizer.json.",
        model_id,
        why,
    )
    return ESTIMATE


def _from_spec(spec: str) -> Tokenizer:
    """The tokenizer `ModelInfo.tokenizer` forces."""
    if spec in EXACT_ENCODINGS:
        return tiktoken_tokenizer(spec)
    if spec == ESTIMATE_KEY:
        return ESTIMATE
    if spec.startswith(_TIKTOKEN_PREFIX):
        name = spec.removeprefix(_TIKTOKEN_PREFIX)
        if name not in EXACT_ENCODINGS:
            raise ValidationError(
                "model.tokenizer", f"{spec!r}: only {sorted(EXACT_ENCODINGS)} are available"
            )
        return tiktoken_tokenizer(name)
    if spec.lower().endswith(".gguf") and not spec.startswith(GGUF_KEY_PREFIX):
        spec = GGUF_KEY_PREFIX + spec
    scheme = _scheme_of(spec)
    if scheme is not None:
        return _registered_or_estimate(spec, scheme)
    return hf_tokenizer(spec.removeprefix(HF_KEY_PREFIX))


GGUF_KEY_PREFIX = "gguf:"
"""A GGUF file's vocabulary (``gguf:<path>`` or ``gguf:<SHA-256>``), counted by the local
model's layer (`workingmem.llm._gguf`), which registers the scheme."""
_SCHEMES: dict[str, Callable[[str], Tokenizer]] = {}
"""Prefix -> what makes its tokenizer, registered by the layer that can (`register_scheme`)."""


def register_scheme(prefix: str, factory: Callable[[str], Tokenizer]) -> None:
    """Lets a layer above count for specs and keys that start with `prefix` (``gguf:``):
    `factory` gets the rest of the spec and returns the tokenizer, or raises
    `ValidationError` (the estimate counts then, after a logged warning)."""
    _SCHEMES[prefix] = factory


def _scheme_of(spec: str) -> str | None:
    return next((prefix for prefix in _SCHEMES if spec.startswith(prefix)), None)


def _registered_or_estimate(spec: str, scheme: str) -> Tokenizer:
    """The tokenizer a registered scheme makes of `spec`, else the estimate after a logged
    warning: the local model's settings name its GGUF, and must still count where the
    ``local`` extra or the weights are not installed (a command that only reads memory)."""
    try:
        return _SCHEMES[scheme](spec.removeprefix(scheme))
    except ValidationError as exc:
        logger.warning(
            "%s: counting tokens with an estimate (4 characters a token) instead of the GGUF's "
            "own vocabulary",
            exc.reason,
        )
        return ESTIMATE
