"""Hugging Face tokenizers: exact content counts for open models, from a ``tokenizer.json``.

    model = ModelInfo(id="llama3", context_window=8_192, tokenizer="/models/llama3/")
    tokenizer_for(model).count_text("hello")  # what Llama 3's own tokenizer says

The ``tokenizers`` package is the optional extra ``hf`` (``pip install 'workingmem[hf]'``);
it is imported on first use only, so the core works without it.

Content is counted exactly (``encode(text, add_special_tokens=False)``: no BOS/EOS per text).
The chat template's own tokens are not read from the file (templates are Jinja code, not
data), so they are an estimate: `HF_TOKENS_PER_MESSAGE` per message plus the role's tokens,
and `HF_REPLY_PRIMING` per request.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from workingmem.errors import ValidationError
from workingmem.tokens._chat import ChatTokenizer
from workingmem.tokens._recent import RecentCounts

__all__ = [
    "HF_KEY_PREFIX",
    "HF_REPLY_PRIMING",
    "HF_TOKENS_PER_MESSAGE",
    "HFTokenizer",
    "hf_tokenizer",
    "resolve_tokenizer_json",
]

HF_KEY_PREFIX = "hf:"

HF_TOKENS_PER_MESSAGE = 4
"""The template tokens around each message besides its role, an estimate: Llama 3's
``<|start_header_id|>`` role ``<|end_header_id|>`` ``\\n\\n`` ... ``<|eot_id|>`` and ChatML's
``<|im_start|>`` role ``\\n`` ... ``<|im_end|>`` ``\\n`` both have 4."""

HF_REPLY_PRIMING = 3
"""The tokens that open the reply, an estimate: ChatML's ``<|im_start|>assistant\\n``."""

_FIELD = "model.tokenizer"
_INSTALL_HINT = "pip install 'workingmem[hf]'"

_lock = threading.Lock()
_loaded: dict[Path, HFTokenizer] = {}


class HFTokenizer(ChatTokenizer):
    """Counts text with a Hugging Face ``tokenizers.Tokenizer``.

    Args:
        path: The absolute path of the ``tokenizer.json`` (part of the key).
        backend: The loaded ``tokenizers.Tokenizer``.
    """

    def __init__(self, path: Path, backend: Any) -> None:
        super().__init__(
            key=f"{HF_KEY_PREFIX}{path}",
            exact=True,
            tokens_per_message=HF_TOKENS_PER_MESSAGE,
            reply_overhead=HF_REPLY_PRIMING,
        )
        self.path = path
        encode = backend.encode
        self._count = RecentCounts(lambda text: len(encode(text, add_special_tokens=False).ids))

    def count_text(self, text: str) -> int:
        """The tokens of `text` alone, without the BOS/EOS the post-processor would add."""
        return self._count(text)


def resolve_tokenizer_json(spec: str) -> Path:
    """The absolute path of the ``tokenizer.json`` that `spec` names (the file or its folder).

    Raises:
        ValidationError: no such file.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ValidationError(
            _FIELD,
            f"{spec!r} is neither o200k_base, cl100k_base nor an existing tokenizer.json "
            "(or a directory holding one)",
        )
    return path.resolve()


def hf_tokenizer(spec: str) -> HFTokenizer:
    """The tokenizer of the ``tokenizer.json`` that `spec` names, loaded once per process.

    Raises:
        ValidationError: the file does not exist, ``tokenizers`` is not installed, or the
            file is not a tokenizer ``tokenizers`` can load.
    """
    path = resolve_tokenizer_json(spec)
    loaded = _loaded.get(path)
    if loaded is not None:
        return loaded
    try:
        from tokenizers import Tokenizer as Backend
    except ImportError as exc:
        raise ValidationError(
            _FIELD, f"{spec!r} needs the Hugging Face tokenizers package: {_INSTALL_HINT}"
        ) from exc
    with _lock:
        loaded = _loaded.get(path)
        if loaded is None:
            try:
                backend = Backend.from_file(str(path))
            except Exception as exc:  # tokenizers raises a bare Exception for bad files
                raise ValidationError(_FIELD, f"cannot load {str(path)!r}: {exc}") from exc
            loaded = _loaded[path] = HFTokenizer(path, backend)
    return loaded
