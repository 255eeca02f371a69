"""Summary updates with the local model: seconds and helper tokens per update, on LoCoMo.

    .venv/bin/python benchmarks/bench_local.py [--turns 60] [--data PATH]

Replays the first turns of a LoCoMo conversation into a SQLite thread and runs SUMMARY_BUFFER's
update every `update_every_turns` turns with the embedded defaults for the local model
(SmolLM2-135M-Instruct through llama.cpp on the CPU, the small-model prompt and caps), as the
gateway's background queue would. Prints each update's seconds, tokens and outcome, the
medians, and the last stored summary and facts (model text, for a human to judge).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
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


async def run(turns: int, data: Path) -> None:
    conversation = load_conversations(data)[0][:turns]
    config = LOCAL_GATEWAY_CONFIG.working_memory
    reports: list[tuple[float, wm.UpdateReport]] = []
    with tempfile.TemporaryDirectory() as folder:
        async with (
            LocalModelClient() as llm,
            await wm.open_store(str(Path(folder) / "bench.db")) as store,
        ):
            memory = wm.WorkingMemory(
                store=store, config=config, llm=llm, templates=local_templates()
            )
            for i, message in enumerate(conversation, start=1):
                await store.append(tenant_id="bench", thread_id="th", messages=[message])
                if i % config.update_every_turns:
                    continue
                started = time.perf_counter()
                report = await memory.update_summary(
                    tenant_id="bench",
                    thread_id="th",
                    user_id="u",
                    profile=wm.Profile(id="p"),
                    cheap_model_id=LOCAL_MODEL,
                )
                seconds = time.perf_counter() - started
                reports.append((seconds, report))
                print(
                    f"  turns {i:>4}: {seconds:6.1f} s  {report.prompt_tokens:>5} in "
                    f"{report.completion_tokens:>4} out  {report.outcome.value} {report.detail}",
                    file=sys.stderr,
                )
            state = await memory.get_state(tenant_id="bench", thread_id="th")
    updated = [(s, r) for s, r in reports if r.outcome is wm.UpdateOutcome.UPDATED]
    print(
        f"Local model {LOCAL_MODEL}, llama.cpp on the CPU, {os.cpu_count()} cores, Python "
        f"{sys.version.split()[0]}; LoCoMo conv 1, first {len(conversation)} turns; "
        f"update every {config.update_every_turns} turns; caps {config.summary_max_chars} "
        f"chars / {config.max_facts} facts / {config.fact_max_chars} chars"
    )
    print(
        f"updates: {len(reports)}, stored: {len(updated)}, "
        f"outcomes: {sorted({r.outcome.value for _, r in reports})}"
    )
    if updated:
        seconds = [s for s, _ in updated]
        prompt = [r.prompt_tokens for _, r in updated]
        completion = [r.completion_tokens for _, r in updated]
        print(
            f"seconds per update: median {statistics.median(seconds):.1f}, "
            f"min {min(seconds):.1f}, max {max(seconds):.1f}"
        )
        print(
            f"helper tokens per update: median {statistics.median(prompt):.0f} in, "
            f"{statistics.median(completion):.0f} out"
        )
    print(f"last summary ({len(state.summary)} chars): {state.summary!r}")
    print(f"facts ({len(state.facts)}): {state.facts}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=60, help="LoCoMo turns to replay")
    parser.add_argument("--data", type=Path, default=default_data_path(), help="locomo-dev.json")
    args = parser.parse_args(argv)
    asyncio.run(run(args.turns, args.data))


if __name__ == "__main__":
    main()
