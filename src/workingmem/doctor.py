"""`workingmem doctor`: does the local model load and answer here, and if not, why.

    checks = await check_local_model()
    for check in checks:
        print("ok" if check.ok else "FAIL", check.name, check.detail, check.fix or "")

Loads the local model in its worker process, generates a few tokens, and says what it found:
the llama-cpp-python build and the CPU features it uses (next to those the CPU advertises),
the weights and their checksum, the threads, the speed. A failure says how to fix it. Each
check is data, so the command only prints them and a test can read them.
"""

from __future__ import annotations

import importlib.metadata
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .llm import CallKind, CallMeta, LLMError
from .llm._build import REBUILD_COMMAND
from .llm._weights import INSTALL_COMMAND, LOCAL_MODEL, LOCAL_MODEL_SHA256, local_model_path

__all__ = ["Check", "check_local_model", "cpu_flags", "features_used"]

UNSAFE_FEATURES = ("AMX_INT8", "AMX_BF16", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16")
"""Build features a virtual machine may advertise and fault on: the portable build has none."""

_PROMPT = [{"role": "user", "content": "Say hello in five words."}]


@dataclass(frozen=True, slots=True)
class Check:
    """One thing the doctor looked at."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    """What to do about it, when it is not ok."""


def features_used(system_info: str) -> list[str]:
    """The CPU features a llama.cpp build says it uses (``AVX2 = 1 | ...`` → ``["AVX2"]``)."""
    used = []
    for part in system_info.replace(":", "|").split("|"):
        name, _, value = part.partition("=")
        if value.strip() == "1":
            used.append(name.strip())
    return used


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The instruction-set flags the CPU advertises (empty where /proc/cpuinfo is not)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


async def check_local_model(*, max_tokens: int = 8) -> list[Check]:
    """Every check, in order; the first failing one ends the list (what follows needs it)."""
    checks: list[Check] = []
    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return [Check("llama-cpp-python", False, "not installed", fix=INSTALL_COMMAND)]
    checks.append(Check("llama-cpp-python", True, version))
    try:
        path = local_model_path()
    except LLMError as exc:
        return [*checks, Check("weights", False, str(exc), fix=INSTALL_COMMAND)]
    checks.append(Check("weights", True, f"{path} (SHA-256 {LOCAL_MODEL_SHA256}, checked)"))

    from .llm.local import LocalModelClient

    client = LocalModelClient(max_output_tokens=max_tokens)
    try:
        started = time.perf_counter()
        try:
            info = await client.load()
        except LLMError as exc:
            return [*checks, Check("load", False, str(exc), fix=REBUILD_COMMAND)]
        loaded = time.perf_counter() - started
        used = features_used(info.system_info)
        unsafe = [feature for feature in used if feature in UNSAFE_FEATURES]
        advertised = cpu_flags()
        checks.append(
            Check(
                "build",
                not unsafe,
                f"CPU features used: {', '.join(used) or 'none reported'}"
                + (
                    f"; the CPU advertises AMX too ({_amx(advertised)})" if _amx(advertised) else ""
                ),
                fix=None
                if not unsafe
                else f"this build uses {', '.join(unsafe)}, which virtual machines may advertise "
                f"and fault on; rebuild it portably: {REBUILD_COMMAND}",
            )
        )
        checks.append(
            Check("load", True, f"worker process {info.pid}, model loaded in {loaded:.1f} s")
        )
        meta = CallMeta(tenant_id="doctor", kind=CallKind.ANSWER, model=LOCAL_MODEL)
        started = time.perf_counter()
        try:
            completion = await client.complete(
                model=LOCAL_MODEL, messages=_PROMPT, meta=meta, max_tokens=max_tokens
            )
        except LLMError as exc:
            return [*checks, Check("generate", False, str(exc), fix=REBUILD_COMMAND)]
        took = time.perf_counter() - started
        tokens = completion.usage.completion_tokens
        checks.append(
            Check(
                "generate",
                bool(completion.text.strip()),
                f"{tokens} tokens in {took:.2f} s ({tokens / took:.0f} tokens/s): "
                f"{' '.join(completion.text.split())!r}",
                fix=None if completion.text.strip() else "the model answered nothing",
            )
        )
        policy = os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
        checks.append(
            Check(
                "threads",
                True,
                f"{client.n_threads} generating, {client.n_threads_batch} reading the prompt; "
                f"OMP_WAIT_POLICY={policy}",
            )
        )
    finally:
        await client.aclose()
    return checks


def _amx(flags: set[str]) -> str:
    return ", ".join(sorted(flag for flag in flags if flag.startswith("amx")))
