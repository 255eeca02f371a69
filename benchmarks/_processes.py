"""The benchmarks' server processes: start and stop them, and read their CPU time.

    with server_process("upstream", command, env) as (pid, port):   # it prints its port
        before = tree_cpu_seconds(pid)                               # its workers included

CPU times come from Linux's /proc (user + system, in clock ticks); elsewhere they are NaN and
the report says "-".
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench_gateway import progress

__all__ = [
    "children",
    "cpu_seconds",
    "free_port",
    "server_process",
    "server_socket",
    "stack_of",
    "tree_cpu_seconds",
]


@contextlib.contextmanager
def server_process(
    name: str, command: Sequence[str], env: dict[str, str], port: int | None = None
) -> Iterator[tuple[int, int]]:
    """A server in a process of its own: (pid, port). Without `port`, the process prints its
    port on its first line; with it, its output goes to a log, shown if it fails to start."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE if port is None else log,
            stderr=None if port is None else subprocess.STDOUT,
            text=True,
            env={**os.environ, **env},
        )
        try:
            if port is None:
                assert proc.stdout is not None
                line = proc.stdout.readline().strip()
                if not line.isdigit():
                    raise RuntimeError(f"the {name} did not start (exit status {proc.poll()})")
                port = int(line)
            yield proc.pid, port
        except RuntimeError:
            log.seek(0)
            progress(f"{name}'s output:\n{log.read()[-3_000:]}")
            raise
        finally:
            if proc.poll() is not None:  # it ended by itself, before we stopped it
                log.seek(0)
                status = f"exit status {proc.returncode}"
                progress(f"the {name} ended during the run ({status}); its output:")
                progress(log.read()[-3_000:])
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def server_socket() -> socket.socket:
    """A loopback socket on a free port for a server of this machine's benchmarks, listening
    (a client that comes before the server has started waits instead of being refused).
    IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets accepted from a socket of that
    proto; without it every keep-alive request waits ~40 ms (Nagle + delayed ACK)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    return sock


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (Linux /proc)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(c) for c in (task / "children").read_text().split()]
    return found


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live descendants (a server's workers)."""
    return cpu_seconds(pid) + sum(tree_cpu_seconds(child) for child in children(pid))


def stack_of(pid: int) -> str:
    """The event loop and HTTP parser a server's processes have loaded (their mapped
    libraries: what uvicorn's "auto" picked)."""
    maps = ""
    for each in [pid, *children(pid)]:
        with contextlib.suppress(OSError):
            maps += Path(f"/proc/{each}/maps").read_text()
    loop = "uvloop" if "/uvloop/" in maps else "asyncio"
    parser = "httptools" if "/httptools/" in maps else "h11"
    return f"{loop} loop, {parser} parser"
