"""wrk as the load generator: N keep-alive connections driven from C, so that the servers get
the cores a Python client would have taken (httpx spent more CPU a request than our server).

    result = await run_wrk(url, bodies, headers, clients=8, seconds=3, fresh="run1-",
                           marker=b'"OK."')

wrk (Debian's and Ubuntu's package ``wrk``) is a benchmark's tool, never the package's: the
script uses it when it is on PATH. A Lua script written per run sends the given bodies in turn,
each on a new thread (``X-Thread-Id`` of `fresh` and a counter) or all on one, counts as an
error any answer that is not a 200 with `marker` in its body, and prints the totals and the
latency percentiles as JSON. One wrk thread drives every connection (closed loop: each sends
its next request when its answer has come, like the httpx clients).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import resource
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["WrkResult", "run_wrk", "wrk_path", "wrk_version"]

_SCRIPT = r"""
local bodies = {}
for line in io.lines(os.getenv("WRK_BODIES")) do bodies[#bodies + 1] = line end
local path = os.getenv("WRK_PATH")
local fresh = os.getenv("WRK_FRESH")
local thread_id = os.getenv("WRK_THREAD")
local marker = os.getenv("WRK_MARKER")
local headers = {["Content-Type"] = "application/json"}
local auth = os.getenv("WRK_AUTH")
if auth ~= "" then headers["Authorization"] = auth end
local profile = os.getenv("WRK_PROFILE")
if profile ~= "" then headers["X-Profile"] = profile end
local threads = {}
local counter = 0
errors = 0
first_error = ""

function setup(thread) threads[#threads + 1] = thread end

function request()
  counter = counter + 1
  headers["X-Thread-Id"] = fresh ~= "" and (fresh .. counter) or thread_id
  return wrk.format("POST", path, headers, bodies[(counter - 1) % #bodies + 1])
end

function response(status, _, body)
  if status ~= 200 or not string.find(body, marker, 1, true) then
    errors = errors + 1
    if first_error == "" then first_error = status .. " " .. string.sub(body, 1, 200) end
  end
end

function done(summary, latency, _)
  local failed, first = 0, ""
  for _, thread in ipairs(threads) do
    failed = failed + thread:get("errors")
    if first == "" then first = thread:get("first_error") end
  end
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "failed": %d, "socket_errors": %d, ' ..
    '"p50_us": %d, "p99_us": %d}\n',
    summary.requests, summary.duration, failed, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
  io.write("FIRST_ERROR ", first, "\n")
end
"""


@dataclass(frozen=True)
class WrkResult:
    """One wrk run's totals."""

    succeeded: int
    """Answers that were a 200 with the marker."""
    failed: int
    """Answers that were not, and requests lost to a socket error."""
    first_error: str
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_seconds: float
    """wrk's own user + system CPU time."""


def wrk_path() -> str | None:
    return shutil.which("wrk")


def wrk_version() -> str:
    """``wrk`` and its version, as it prints it (it exits 1 when asked)."""
    executable = wrk_path()
    if executable is None:
        return "wrk (not installed)"
    found = subprocess.run([executable, "-v"], capture_output=True, text=True)
    version = re.search(r"\d+\.\d+(\.\d+)?", found.stdout + found.stderr)
    return f"wrk {version.group(0) if version else '(version unknown)'}"


async def run_wrk(
    url: str,
    bodies: list[bytes],
    headers: dict[str, str],
    *,
    clients: int,
    seconds: float,
    fresh: str = "",
    thread_id: str = "",
    marker: bytes,
) -> WrkResult:
    """`clients` connections posting `bodies` to `url` for `seconds` (whole seconds, at least
    one): each request on a new thread named `fresh` + a counter, else all on `thread_id`."""
    executable = wrk_path()
    if executable is None:
        raise RuntimeError("wrk is not on PATH")
    parts = urlsplit(url)
    unknown = set(headers) - {"Authorization", "X-Profile"}
    if unknown:
        raise ValueError(f"the wrk script sends no {sorted(unknown)} header")
    with tempfile.TemporaryDirectory(prefix="workingmem-wrk-") as folder:
        script = Path(folder) / "post.lua"
        script.write_text(_SCRIPT, encoding="utf-8")
        lines = Path(folder) / "bodies.jsonl"
        lines.write_bytes(b"".join(body.rstrip(b"\n") + b"\n" for body in bodies))
        env = {
            "WRK_BODIES": str(lines),
            "WRK_PATH": parts.path,
            "WRK_FRESH": fresh,
            "WRK_THREAD": thread_id,
            "WRK_MARKER": marker.decode(),
            "WRK_AUTH": headers.get("Authorization", ""),
            "WRK_PROFILE": headers.get("X-Profile", ""),
        }
        duration = max(1, math.ceil(seconds))
        command = [executable, "-t1", f"-c{clients}", f"-d{duration}s", "--timeout", "60s"]
        command += ["-s", str(script), f"{parts.scheme}://{parts.netloc}"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        process = await asyncio.create_subprocess_exec(
            *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await process.communicate()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}): {err.decode()[-500:]}")
    text = out.decode()
    summary = json.loads(next(line for line in text.splitlines() if line.startswith("{")))
    first = next((line for line in text.splitlines() if line.startswith("FIRST_ERROR ")), "")
    failed = summary["failed"] + summary["socket_errors"]
    return WrkResult(
        succeeded=summary["requests"] - summary["failed"],
        failed=failed,
        first_error=first.removeprefix("FIRST_ERROR ").strip(),
        seconds=summary["duration_us"] / 1e6,
        p50_ms=summary["p50_us"] / 1e3,
        p99_ms=summary["p99_us"] / 1e3,
        cpu_seconds=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
    )
