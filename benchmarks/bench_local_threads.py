"""The local model's threads: one generating thread that sleeps when idle, against two that
spin-wait (llama.cpp's defaults before), on an idle machine and beside a busy core.

    .venv/bin/python benchmarks/bench_local_threads.py [--updates 4] [--repeat 2]

Runs the same SUMMARY_BUFFER updates (LoCoMo conversation 1, the local model's small-model
prompt and caps) with each setting, in one run, alternating so that the machine's drift hits
both alike: once with nothing else running, once beside a process that keeps one core busy
(what a shared CI machine or a second service looks like). Prints seconds per update, the
spread, and the ratio before/now.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import workingmem as wm
from workingmem.embedded import LOCAL_GATEWAY_CONFIG, local_templates
from workingmem.llm import LOCAL_MODEL, LocalModelClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import default_data_path, load_conversations

SETTINGS = {
    "now: 1 thread, OpenMP sleeps": {"n_threads": 1, "wait_policy": "PASSIVE"},
    "before: 2 threads, OpenMP spins": {"n_threads": 2, "wait_policy": ""},
}
"""An empty OMP_WAIT_POLICY is libgomp's default (spin, then sleep): what llama.cpp did."""


async def updates(n_threads: int, wait_policy: str, count: int, data: Path) -> list[float]:
    """Seconds of each of `count` summary updates, on a fresh thread and a fresh worker."""
    config = LOCAL_GATEWAY_CONFIG.working_memory
    conversation = load_conversations(data)[0][: count * config.update_every_turns]
    os.environ["OMP_WAIT_POLICY"] = wait_policy  # the worker inherits it
    seconds: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        async with (
            LocalModelClient(n_threads=n_threads, n_threads_batch=2) as llm,
            await wm.open_store(str(Path(folder) / "bench.db")) as store,
        ):
            await llm.load()
            memory = wm.WorkingMemory(
                store=store, config=config, llm=llm, templates=local_templates()
            )
            for i, message in enumerate(conversation, start=1):
                await store.append(tenant_id="bench", thread_id="th", messages=[message])
                if i % config.update_every_turns:
                    continue
                started = time.perf_counter()
                await memory.update_summary(
                    tenant_id="bench",
                    thread_id="th",
                    user_id="u",
                    profile=wm.Profile(id="p"),
                    cheap_model_id=LOCAL_MODEL,
                )
                seconds.append(time.perf_counter() - started)
    return seconds


def busy_core() -> subprocess.Popen[bytes]:
    """A process that keeps one core busy until it is terminated."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--updates", type=int, default=4, help="summary updates per setting")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of every setting")
    parser.add_argument("--data", type=Path, default=default_data_path(), help="locomo-dev.json")
    args = parser.parse_args(argv)
    results: dict[tuple[str, str], list[float]] = {}
    for machine in ("idle", "one core busy"):
        for round_ in range(args.repeat):
            for name, setting in SETTINGS.items():
                competitor = busy_core() if machine != "idle" else None
                try:
                    took = asyncio.run(
                        updates(
                            int(setting["n_threads"]),
                            str(setting["wait_policy"]),
                            args.updates,
                            args.data,
                        )
                    )
                finally:
                    if competitor is not None:
                        competitor.terminate()
                        competitor.wait()
                results.setdefault((machine, name), []).extend(took)
                print(f"  {machine}, round {round_ + 1}, {name}: {took}", file=sys.stderr)
    print(
        f"Local model {LOCAL_MODEL}, {os.cpu_count()} cores; {args.updates} summary updates "
        f"x {args.repeat} rounds per cell (LoCoMo conversation 1), seconds per update"
    )
    print(f"{'machine':<15} {'setting':<34} {'median':>7} {'min':>6} {'max':>6}")
    for machine in ("idle", "one core busy"):
        medians = {}
        for name in SETTINGS:
            took = results[(machine, name)]
            medians[name] = statistics.median(took)
            print(
                f"{machine:<15} {name:<34} {medians[name]:7.2f} {min(took):6.2f} {max(took):6.2f}"
            )
        now, before = (medians[name] for name in SETTINGS)
        print(f"{machine:<15} {'ratio before / now':<34} {before / now:7.2f}x")


if __name__ == "__main__":
    main()
