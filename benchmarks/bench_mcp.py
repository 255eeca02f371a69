"""MCP tool calls: `workingmem mcp` beside the official "memory" MCP server, over stdio.

    .venv/bin/python benchmarks/bench_mcp.py [--calls 200] [--rounds 3]

Both servers are driven by the `mcp` SDK's client over stdio, as a desktop host runs them. A
write is our `update_working_memory` (the whole document, one line longer each call) beside the
peer's `add_observations` (one observation more on one entity); a read is our
`get_working_memory` beside the peer's `read_graph`, once the memory holds every write. The peer
(`@modelcontextprotocol/server-memory`, a knowledge graph in a JSONL file) is installed with npm
into the cache on first use: a benchmark's dependency, never the package's. Medians in ms per
call, then ratios (ours / theirs); the spread is the rounds' range.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from mcp import Client, StdioServerParameters

PEER = "@modelcontextprotocol/server-memory@2026.8.31"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "workingmem" / "peers"


def peer_command() -> Path:
    """The peer's executable, installed into the cache once."""
    folder = CACHE / "server-memory"
    binary = folder / "node_modules" / ".bin" / "mcp-server-memory"
    if not binary.exists():
        if shutil.which("npm") is None:
            raise SystemExit("bench_mcp: npm is needed to install the peer server")
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(folder),
                PEER,
            ],
            check=True,
        )
    return binary


async def timed(calls: int, call: Callable[[int], Awaitable[object]]) -> float:
    """The median ms of `calls` calls."""
    times = []
    for index in range(calls):
        started = time.perf_counter()
        await call(index)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def ours(folder: Path, calls: int) -> tuple[float, float]:
    command = Path(sys.executable).parent / "workingmem"
    params = StdioServerParameters(
        command=str(command), args=["mcp", "--db", str(folder / "memory.db"), "--user", "ada"]
    )
    lines: list[str] = []
    async with Client(params) as client:

        async def write(index: int) -> object:
            lines.append(f"- fact {index}: the user mentioned item number {index}")
            return await client.call_tool("update_working_memory", {"content": "\n".join(lines)})

        async def read(_index: int) -> object:
            return await client.call_tool("get_working_memory", {})

        return await timed(calls, write), await timed(calls, read)


async def theirs(folder: Path, calls: int) -> tuple[float, float]:
    env = dict(os.environ, MEMORY_FILE_PATH=str(folder / "memory.jsonl"))
    params = StdioServerParameters(command=str(peer_command()), args=[], env=env)
    async with Client(params) as client:
        entity = {"name": "ada", "entityType": "person", "observations": []}
        await client.call_tool("create_entities", {"entities": [entity]})

        async def write(index: int) -> object:
            fact = f"fact {index}: the user mentioned item number {index}"
            observation = {"entityName": "ada", "contents": [fact]}
            return await client.call_tool("add_observations", {"observations": [observation]})

        async def read(_index: int) -> object:
            return await client.call_tool("read_graph", {})

        return await timed(calls, write), await timed(calls, read)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, run in (("workingmem mcp", ours), ("server-memory", theirs)):
            with tempfile.TemporaryDirectory() as folder:
                write, read = await run(Path(folder), args.calls)
            rows.setdefault(f"{name} write", []).append(write)
            rows.setdefault(f"{name} read", []).append(read)
    print(f"MCP over stdio, {args.calls} calls a round, {args.rounds} rounds: median ms per call")
    for op in ("write", "read"):
        mine, peer = rows[f"workingmem mcp {op}"], rows[f"server-memory {op}"]
        ratios = [a / b for a, b in zip(mine, peer, strict=True)]
        print(
            f"  {op:5} ratio {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            f"   workingmem {statistics.median(mine):.2f} ({min(mine):.2f}-{max(mine):.2f})"
            f"   server-memory {statistics.median(peer):.2f} ({min(peer):.2f}-{max(peer):.2f})"
        )


if __name__ == "__main__":
    asyncio.run(main())
