"""Input tokens per model call, SUMMARY_BUFFER against SLIDING_WINDOW, on LoCoMo threads.

    .venv/bin/python benchmarks/bench_summary.py [--sizes 20,100,500,2000] [--data PATH]
        [--plot DIR]

Replays a LoCoMo conversation (cycled to 2,000 turns) as a live thread on SQLite: every user
turn is appended, the assistant turn follows, and `save_context` runs after each answer, as the
gateway's background update does. The helper model is a scripted OpenAI-compatible server on
127.0.0.1 (reached through the real `openai` SDK) that writes a summary near its cap and keeps
facts, so the notes are as large as a real helper would make them.

At each size it prints what one model call would read: the notes plus the window, in tokens
(gpt-4o's tokenizer, budget = 128k window - 4,096 output reserve), for both strategies on the
same thread, and the helper's calls and tokens per 100 turns. With ``--plot DIR`` it also
writes ``DIR/input-tokens.svg``: those input tokens against the thread's length, a line per
strategy (the documentation site's chart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import workingmem as wm
from workingmem.llm.testing import Reply, ScriptedUpstream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import default_data_path, load_conversations, thread_messages
from _plot import Guide, Line, line_chart

MODEL = wm.ModelInfo(id="gpt-4o", context_window=128_000)
CHEAP = "gpt-4o-mini"
BUDGET = MODEL.context_window - MODEL.max_output_tokens
CONFIG = wm.WorkingMemoryConfig()  # the defaults: recent 12 turns, update every 6
PLOT_FILE = "input-tokens.svg"
Row = tuple[int, tuple[int, int], tuple[int, int]]
"""(turns, (SUMMARY_BUFFER's notes, its window), (SLIDING_WINDOW's notes, its window))."""
_TURN = re.compile(r"^\[(\d+)\](?: \([^)]*\))? (user|assistant)[^:]*: (.*)$", re.MULTILINE)
_FACT = re.compile(r"^- (?:\[turns? [\d-]+\] )?(.*)$", re.MULTILINE)


def scripted_helper(request: dict[str, Any]) -> Reply:
    """A stand-in cheap model with a real model's output sizes: it appends a line per new
    user turn to the summary (keeping it under the cap by dropping its oldest lines) and keeps
    the newest user statements that carry a number or a capitalised name as facts."""
    prompt = request["messages"][-1]["content"]
    old_summary = prompt.split("<summary>", 1)[-1].split("</summary>", 1)[0].strip()
    old_facts = _FACT.findall(prompt.split("<facts>", 1)[-1].split("</facts>", 1)[0])
    turns = _TURN.findall(prompt)
    lines = [line for line in old_summary.splitlines() if line and line != "(none yet)"]
    lines += [f"Turn {n}: {text[:120]}" for n, role, text in turns if role == "user"]
    while len("\n".join(lines)) > CONFIG.summary_max_chars - 200:
        lines.pop(0)
    facts = [{"text": f, "first_turn": 1, "last_turn": 1} for f in old_facts if f != "(none yet)"]
    facts += [
        {"text": text[: CONFIG.fact_max_chars - 20], "first_turn": int(n), "last_turn": int(n)}
        for n, role, text in turns
        if role == "user" and re.search(r"\d|\b[A-Z][a-z]+\b", text[1:])
    ]
    text = json.dumps({"summary": "\n".join(lines), "facts": facts[-CONFIG.max_facts :]})
    tok = wm.tokenizer_for(wm.ModelInfo(id=CHEAP, context_window=128_000))
    return Reply(
        text,
        prompt_tokens=tok.count_message(request["messages"][-1]) + tok.reply_overhead,
        completion_tokens=tok.count_text(text),
    )


async def input_tokens(
    memory: wm.WorkingMemory, thread_id: str, strategy: wm.Strategy
) -> tuple[int, int]:
    """(tokens of the notes, tokens of the window) for one model call under `strategy`."""
    loaded = await memory.load(
        tenant_id="bench",
        thread_id=thread_id,
        model=MODEL,
        profile=wm.Profile(id="p", working_memory=strategy),
        budget_tokens=BUDGET,
    )
    tok = wm.tokenizer_for(MODEL)
    notes = tok.count_text(loaded.notes) if loaded.notes else 0
    return notes, loaded.tokens


async def run(sizes: list[int], data: Path) -> list[Row]:
    """Replays the thread, prints the report and returns its rows (for `plot`)."""
    messages = thread_messages(load_conversations(data), turns=max(sizes))
    checkpoints = set(sizes)
    reports: list[wm.UpdateReport] = []
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        async with (
            ScriptedUpstream(responder=scripted_helper) as upstream,
            wm.OpenAIClient(base_url=upstream.base_url) as client,
            await wm.open_store(f"sqlite:///{Path(folder) / 'bench.db'}") as store,
        ):
            memory = wm.WorkingMemory(
                store=store, config=CONFIG, llm=client, on_report=reports.append
            )
            for i, message in enumerate(messages, start=1):
                await store.append(tenant_id="bench", thread_id="th", messages=[message])
                if message["role"] == "assistant":
                    await memory.update_summary(
                        tenant_id="bench",
                        thread_id="th",
                        user_id="u",
                        profile=wm.Profile(id="p"),
                        cheap_model_id=CHEAP,
                    )
                if i in checkpoints:
                    summary = await input_tokens(memory, "th", wm.Strategy.SUMMARY_BUFFER)
                    sliding = await input_tokens(memory, "th", wm.Strategy.SLIDING_WINDOW)
                    rows.append((i, summary, sliding))
                    print(f"  replayed {i} turns", file=sys.stderr)
            calls = len(upstream.requests)
    helper_in = sum(r.prompt_tokens for r in reports)
    helper_out = sum(r.completion_tokens for r in reports)
    outcomes = {r.outcome.value for r in reports}
    print(
        f"\nLoCoMo replay, {max(sizes)} turns, gpt-4o tokenizer, budget {BUDGET:,} tokens, "
        f"defaults: recent_turns {CONFIG.recent_turns}, update_every_turns "
        f"{CONFIG.update_every_turns}, chat_history_ratio {CONFIG.chat_history_ratio}"
    )
    header = (
        f"{'turns':>6} | {'SUMMARY_BUFFER (notes + window)':>32} | {'SLIDING_WINDOW':>15} | "
        f"{'ratio S/B':>9}"
    )
    print(header)
    print("-" * len(header))
    for turns, (notes, window), (_, sliding) in rows:
        total = notes + window
        print(
            f"{turns:>6} | {total:>9,} ({notes:>5,} + {window:>5,})     | {sliding:>15,} | "
            f"{sliding / total:>8.1f}x"
        )
    per100 = 100 / max(sizes)
    print(
        f"\nHelper: {calls} calls for {max(sizes)} turns = {calls * per100:.1f} calls per 100 "
        f"turns; {helper_in:,} prompt tokens = {helper_in * per100:,.0f} per 100 turns "
        f"({helper_in / max(calls, 1):,.0f} per call); {helper_out:,} completion tokens = "
        f"{helper_out * per100:,.0f} per 100 turns; outcomes: {', '.join(sorted(outcomes))}"
    )
    return rows


def plot(rows: list[Row], folder: Path) -> Path:
    """The table's two columns as lines, with the history share that caps SLIDING_WINDOW: the
    chart shows where one keeps growing and the other stays flat."""
    turns = [row[0] for row in rows]
    history = math.floor(CONFIG.chat_history_ratio * BUDGET)
    return line_chart(
        folder / PLOT_FILE,
        title="Input tokens per model call, LoCoMo replay (gpt-4o tokenizer)",
        x_label="thread length (turns)",
        y_label="input tokens per call",
        lines=[
            Line("SLIDING_WINDOW (the window)", turns, [sliding for _, _, (_, sliding) in rows]),
            Line(
                "SUMMARY_BUFFER (notes + window)",
                turns,
                [notes + window for _, (notes, window), _ in rows],
            ),
        ],
        guides=[Guide(history, f"history share of the budget: {history:,} tokens")],
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="20,100,500,2000", help="comma-separated turn counts")
    parser.add_argument("--data", type=Path, default=default_data_path(), help="locomo-dev.json")
    parser.add_argument(
        "--plot", type=Path, metavar="DIR", help=f"also write DIR/{PLOT_FILE} (needs matplotlib)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rows = asyncio.run(run(sizes, args.data))
    if args.plot:
        print(f"  wrote {plot(rows, args.plot)}", file=sys.stderr)


if __name__ == "__main__":
    main()
