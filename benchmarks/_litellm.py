"""LiteLLM's proxy as a benchmark's peer: in a virtual environment of its own, never a
dependency of the package, set up only when a benchmark is asked to run it.

    executable = ensure_litellm(DEFAULT_VENV, progress)   # creates the venv once, then reuses it
    command, env = proxy_command(executable, upstream_url, "gpt-4o-mini", port, folder)

The proxy runs as `litellm --config FILE --num_workers 1`: one model route to the given
OpenAI-compatible upstream, no database, no callbacks, a master key (the proxy refuses to start
without one) that every request sends. The model cost map is read from the package, not fetched.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["DEFAULT_VENV", "REQUIREMENTS", "ensure_litellm", "litellm_version", "proxy_command"]

DEFAULT_VENV = Path.home() / ".cache" / "workingmem" / "bench-litellm"
REQUIREMENTS = ("litellm[proxy]", "httptools")
"""The proxy and the HTTP parser our service runs with (uvicorn's uvloop comes with the proxy),
so that both servers run on the same uvicorn stack."""
_CHECK = "import litellm.proxy.proxy_server, httptools, uvloop"


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if sys.platform == "win32" else "bin") / name


def ensure_litellm(venv: Path, progress: Callable[[str], None]) -> Path:
    """The `litellm` executable of `venv`, creating the environment and installing
    `REQUIREMENTS` into it first if they are not there (pip's output on this stderr)."""
    python = _bin(venv, "python")
    if not python.exists():
        progress(f"LiteLLM: creating a virtual environment in {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if subprocess.run([str(python), "-c", _CHECK], capture_output=True).returncode != 0:
        progress(f"LiteLLM: pip install {' '.join(REQUIREMENTS)} (once)")
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS],
            check=True,
            stdout=sys.stderr,
        )
    return _bin(venv, "litellm")


def litellm_version(executable: Path) -> str:
    """The installed proxy's version."""
    python = executable.with_name("python")
    found = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() or "unknown"


def proxy_command(
    executable: Path, upstream_url: str, model: str, port: int, folder: Path
) -> tuple[list[str], dict[str, str], str]:
    """The command that runs the proxy on 127.0.0.1:`port`, the environment it adds, and the
    key its requests need. Its config file is written into `folder`."""
    key = f"sk-bench-{secrets.token_hex(16)}"
    config = folder / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {model}\n"
        "    litellm_params:\n"
        f"      model: openai/{model}\n"
        f"      api_base: {upstream_url}\n"
        "      api_key: bench\n"
        "general_settings:\n"
        f"  master_key: {key}\n",
        encoding="utf-8",
    )
    command = [str(executable), "--config", str(config), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--num_workers", "1"]
    env = {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the cost map at start
        "LITELLM_LOG": "ERROR",
    }
    return command, env, key
