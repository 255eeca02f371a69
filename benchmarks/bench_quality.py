"""What is remembered: evidence- and answer-in-context on LoCoMo, each strategy with and without
recall, beside the whole conversation.

    .venv/bin/python benchmarks/bench_quality.py [--data PATH] [--conversations N]
        [--history 8000] [--recall 0.5] [--plot DIR]

Each LoCoMo conversation is imported into a SQLite thread with its sessions' dates
(`append(created_at=...)`: a session's turns a minute apart from its date). Every question of
categories 1-4 (5, the adversarial one, has no answer to find) is then asked after the whole
conversation: appended as the current user turn, the memory loaded with an `--history`-token
history share (gpt-4o's tokenizer; `budget_tokens` twice that, `chat_history_ratio` 0.5), and
the question popped again. What the model would read is scored:

- evidence-in-context: every one of the question's evidence turns is in the window or among
  the recalled turns (a summary's paraphrase does not count: it names no turn);
- answer-in-context: every content word of the gold answer is in the text the model reads (the
  window's messages, the notes: summary, facts, recalled turns with their dates). Normalized:
  lower case, words of letters and digits, English stop words dropped.

The prompt cache: each conversation replayed turn by turn into a new thread, a SLIDING_WINDOW
load at every user turn, plain and with `window_step_ratio` (`--step`): the share of requests
whose history starts where the previous request's did, once the thread is longer than the
window (a provider's cache of the repeated prefix can only hit then), and the share of the
history budget left unused on average.

With `--local`, SUMMARY_BUFFER with the local model (SmolLM2-135M on the CPU, its own prompt
and caps, as `workingmem serve` runs it) on the first conversation, with and without recall:
its updates take a few minutes.

Contenders: SLIDING_WINDOW; SUMMARY_BUFFER with a scripted helper (bench_summary's: a summary
near its cap, the user's statements with a name or number as facts), its updates run over the
whole conversation first; each with recall (`recall_ratio`) and without; the whole
conversation as the upper bound, without and with each session's date.

With ``--plot DIR`` it also writes ``DIR/evidence-in-context.svg``: both scores of every
contender as bars (the documentation site's chart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import workingmem as wm
from workingmem.llm.testing import ScriptedUpstream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import default_data_path
from _plot import Bars, bar_chart
from bench_summary import CHEAP, scripted_helper

MODEL = wm.ModelInfo(id="gpt-4o", context_window=128_000)
PLOT_FILE = "evidence-in-context.svg"
TENANT = "bench"
_SESSION = re.compile(r"session_(\d+)")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = (
    "a an the and or of in on at to for with by from is are was were be been it its this that "
    "he she they his her their them i you we my your our me us as than then so s"
)
_STOP = frozenset(_STOPWORDS.split())


@dataclass
class Question:
    text: str
    answer: str
    evidence: list[int]
    """Seqs of the evidence turns; [] when LoCoMo's ids do not resolve."""
    category: int


@dataclass
class Conversation:
    sample_id: str
    messages: list[dict[str, Any]]
    times: list[datetime]
    questions: list[Question]
    session_of: list[str] = field(default_factory=list)
    """Each turn's session date as LoCoMo writes it."""


def session_date(text: str) -> datetime:
    """LoCoMo's ``1:56 pm on 8 May, 2023`` as an aware datetime (UTC: LoCoMo gives no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def read_conversations(path: Path) -> list[Conversation]:
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for sample in samples:
        conversation = sample["conversation"]
        keys = sorted(
            (int(m.group(1)), key)
            for key in conversation
            if (m := _SESSION.fullmatch(key)) and isinstance(conversation[key], list)
        )
        messages, times, sessions, seq_of = [], [], [], {}
        first = None
        for _, key in keys:
            start = session_date(conversation[f"{key}_date_time"])
            for i, turn in enumerate(conversation[key]):
                first = first or turn["speaker"]
                text = str(turn["text"])
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                role = "user" if turn["speaker"] == first else "assistant"
                messages.append({"role": role, "content": text})
                moment = start + timedelta(minutes=i)
                times.append(max(moment, times[-1]) if times else moment)
                sessions.append(conversation[f"{key}_date_time"])
                seq_of[turn["dia_id"]] = len(messages)
        questions = []
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4) or "answer" not in qa:
                continue
            ids = re.findall(r"D\d+:\d+", " ".join(qa.get("evidence", [])))
            seqs = [seq_of[i] for i in ids if i in seq_of]
            questions.append(
                Question(
                    qa["question"],
                    str(qa["answer"]),
                    seqs if len(seqs) == len(ids) else [],
                    qa["category"],
                )
            )
        found.append(Conversation(sample["sample_id"], messages, times, questions, sessions))
    return found


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def answer_words(answer: str) -> set[str]:
    return words(answer) - _STOP


def text_of(message: wm.MessageIn) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or ())


@dataclass
class Score:
    evidence_hits: int = 0
    evidence_asked: int = 0
    answer_hits: int = 0
    answer_asked: int = 0
    tokens: list[int] = field(default_factory=list)
    recalled: list[int] = field(default_factory=list)

    def add(self, question: Question, seqs: set[int], text: str, tokens: int) -> None:
        if question.evidence:
            self.evidence_asked += 1
            self.evidence_hits += set(question.evidence) <= seqs
        wanted = answer_words(question.answer)
        if wanted:
            self.answer_asked += 1
            self.answer_hits += wanted <= words(text)
        self.tokens.append(tokens)

    @property
    def evidence(self) -> float:
        return 100 * self.evidence_hits / max(1, self.evidence_asked)

    @property
    def answer(self) -> float:
        return 100 * self.answer_hits / max(1, self.answer_asked)


LOCAL = "SUMMARY_BUFFER (local model, first conversation)"
CONTENDERS = (
    "SLIDING_WINDOW",
    "SLIDING_WINDOW + recall",
    "SUMMARY_BUFFER (scripted helper)",
    "SUMMARY_BUFFER (scripted helper) + recall",
    "whole conversation",
    "whole conversation with dates",
    LOCAL,
    LOCAL + " + recall",
)


async def score_conversation(
    conversation: Conversation,
    store: wm.SQLiteStore,
    memory: wm.WorkingMemory,
    profiles: dict[str, wm.Profile],
    history: int,
    scores: dict[str, Score],
    cheap: str = CHEAP,
) -> None:
    thread_id = conversation.sample_id
    for start in range(0, len(conversation.messages), 1_000):
        await store.append(
            tenant_id=TENANT,
            thread_id=thread_id,
            messages=conversation.messages[start : start + 1_000],
            created_at=conversation.times[start : start + 1_000],
        )
    summary_profile = next(p for n, p in profiles.items() if n.startswith("SUMMARY_BUFFER"))
    for _ in range(1_000):  # the backlog, folded chunk by chunk as background updates would
        report = await memory.update_summary(
            tenant_id=TENANT,
            thread_id=thread_id,
            user_id=None,
            profile=summary_profile,
            cheap_model_id=cheap,
        )
        if report.outcome is not wm.UpdateOutcome.UPDATED:
            break
    tokenizer = wm.tokenizer_for(MODEL)
    whole = "\n".join(text_of(m) for m in conversation.messages)
    dated = "\n".join(
        f"({date}) {text_of(m)}"
        for date, m in zip(conversation.session_of, conversation.messages, strict=True)
    )
    whole_tokens, dated_tokens = tokenizer.count_text(whole), tokenizer.count_text(dated)
    every = set(range(1, len(conversation.messages) + 1))
    asked_at = conversation.times[-1] + timedelta(minutes=1)
    for question in conversation.questions:
        await store.append(
            tenant_id=TENANT,
            thread_id=thread_id,
            messages=[{"role": "user", "content": question.text}],
            created_at=[asked_at],
        )
        for name, profile in profiles.items():
            loaded = await memory.load(
                tenant_id=TENANT,
                thread_id=thread_id,
                model=MODEL,
                profile=profile,
                budget_tokens=2 * history,
            )
            seqs = set(loaded.seqs) | set(loaded.recalled_seqs)
            text = loaded.notes + "\n" + "\n".join(text_of(m) for m in loaded.messages)
            notes_tokens = tokenizer.count_text(loaded.notes) if loaded.notes else 0
            scores[name].add(question, seqs, text, loaded.tokens + notes_tokens)
            scores[name].recalled.append(len(loaded.recalled_seqs))
        scores["whole conversation"].add(question, every, whole, whole_tokens)
        scores["whole conversation with dates"].add(question, every, dated, dated_tokens)
        await store.pop_turns(tenant_id=TENANT, thread_id=thread_id)


@dataclass
class CacheScore:
    held: int = 0
    requests: int = 0
    unused: list[float] = field(default_factory=list)


async def replay_cache(
    conversation: Conversation,
    store: wm.SQLiteStore,
    memory: wm.WorkingMemory,
    history: int,
    steps: dict[float, CacheScore],
) -> None:
    """Every user turn of the conversation answered in order: where each request's history
    starts, plain and stepped."""
    thread_id = f"{conversation.sample_id}-replay"
    previous: dict[float, int] = {}
    for index, message in enumerate(conversation.messages):
        await store.append(
            tenant_id=TENANT,
            thread_id=thread_id,
            messages=[message],
            created_at=[conversation.times[index]],
        )
        if message["role"] != "user":
            continue
        outgrown = False
        for ratio, score in steps.items():
            config = wm.WorkingMemoryConfig(
                strategy=wm.Strategy.SLIDING_WINDOW, window_step_ratio=ratio
            )
            loaded = await memory.load(
                tenant_id=TENANT,
                thread_id=thread_id,
                model=MODEL,
                profile=wm.Profile(id=f"step-{ratio}", working_memory=config),
                budget_tokens=2 * history,
            )
            start = loaded.seqs[0]
            outgrown = outgrown or (ratio == 0 and start > 1)
            if outgrown and ratio in previous:
                score.requests += 1
                score.held += start == previous[ratio]
                score.unused.append(100 * (history - loaded.tokens) / history)
            previous[ratio] = start


def report_cache(steps: dict[float, CacheScore]) -> None:
    print("\n## The prompt cache (SLIDING_WINDOW, every user turn replayed)\n")
    print("| window_step_ratio | history starts where the previous did | budget unused (mean) |")
    print("| --- | --- | --- |")
    for ratio, score in steps.items():
        held = 100 * score.held / max(1, score.requests)
        unused = statistics.mean(score.unused) if score.unused else 0.0
        print(f"| {ratio} | {held:.1f}% ({score.held}/{score.requests}) | {unused:.1f}% |")


async def score_local(
    conversation: Conversation,
    store: wm.SQLiteStore,
    args: argparse.Namespace,
    scores: dict[str, Score],
) -> None:
    """The first conversation again, in a thread of its own, its summary written by the local
    model with the settings `workingmem serve` gives it."""
    local = wm.LOCAL_GATEWAY_CONFIG.working_memory
    profiles = {
        LOCAL: wm.Profile(id="local", working_memory=local),
        LOCAL + " + recall": wm.Profile(
            id="local-recall", working_memory=local.model_copy(update={"recall_ratio": args.recall})
        ),
    }
    print(f"{conversation.sample_id} with the local model ...", file=sys.stderr)
    async with wm.LocalModelClient() as client:
        memory = wm.WorkingMemory(
            store=store,
            llm=client,
            templates=wm.embedded.local_templates(),
            models=wm.LOCAL_GATEWAY_CONFIG.models,
        )
        local_copy = Conversation(
            f"{conversation.sample_id}-local",
            conversation.messages,
            conversation.times,
            conversation.questions,
            conversation.session_of,
        )
        wholes = {n: Score() for n in ("whole conversation", "whole conversation with dates")}
        await score_conversation(
            local_copy,
            store,
            memory,
            profiles,
            args.history,
            {**scores, **wholes},
            cheap=wm.LOCAL_GATEWAY_CONFIG.cheap_model,
        )
    state = await store.get_memory_state(tenant_id=TENANT, thread_id=local_copy.sample_id)
    print(
        f"local model's notes: {len(state.summary)} characters of summary, "
        f"{len(state.facts)} facts, through turn {state.turn_count}",
        file=sys.stderr,
    )


def report(scores: dict[str, Score], history: int, recall: float, seconds: float) -> None:
    window, recalled = scores["SLIDING_WINDOW"], scores["SLIDING_WINDOW + recall"]
    summary, summary_recall = (
        scores["SUMMARY_BUFFER (scripted helper)"],
        scores["SUMMARY_BUFFER (scripted helper) + recall"],
    )
    whole = scores["whole conversation with dates"]
    print(
        f"\nLoCoMo, questions of categories 1-4 asked after the whole conversation, "
        f"{history:,}-token history share, recall_ratio {recall} ({seconds:.0f} s)\n"
    )
    print("## Ratios first")
    print(
        f"- evidence-in-context with recall / without: {recalled.evidence:.1f}% / "
        f"{window.evidence:.1f}% = {recalled.evidence / max(window.evidence, 0.1):.2f}x "
        f"(target: >= 70%: {'PASS' if recalled.evidence >= 70 else 'MISS'})"
    )
    plain = scores["whole conversation"]
    for name, bound in (("whole conversation", plain), ("whole conversation with dates", whole)):
        gap = bound.answer - recalled.answer
        print(
            f"- answer-in-context, {name} minus SLIDING_WINDOW + recall: {bound.answer:.1f}% - "
            f"{recalled.answer:.1f}% = {gap:.1f} points "
            f"(target <= 10: {'PASS' if gap <= 10 else 'MISS'})"
        )
    never_below = (
        summary_recall.evidence >= window.evidence and summary_recall.answer >= window.answer
    )
    print(
        f"- SUMMARY_BUFFER + recall against SLIDING_WINDOW: evidence {summary_recall.evidence:.1f}"
        f"% vs {window.evidence:.1f}%, answer {summary_recall.answer:.1f}% vs "
        f"{window.answer:.1f}% (target: never below: {'PASS' if never_below else 'MISS'})"
    )
    print(
        f"- SUMMARY_BUFFER without recall: evidence {summary.evidence:.1f}%, answer "
        f"{summary.answer:.1f}%\n"
    )
    print(
        "| contender | evidence-in-context | answer-in-context | tokens read (median) "
        "| turns recalled (median) |"
    )
    print("| --- | --- | --- | --- | --- |")
    for name in CONTENDERS:
        score = scores[name]
        if not score.tokens:
            continue
        tokens = statistics.median(score.tokens) if score.tokens else 0
        recalled_turns = statistics.median(score.recalled) if score.recalled else 0
        print(
            f"| {name} | {score.evidence:.1f}% ({score.evidence_hits}/{score.evidence_asked}) "
            f"| {score.answer:.1f}% ({score.answer_hits}/{score.answer_asked}) "
            f"| {tokens:,.0f} | {recalled_turns:.0f} |"
        )


def plot(scores: dict[str, Score], history: int, folder: Path) -> Path:
    """The table's two scores as bars, a pair per contender, each named with the tokens it
    reads: what it remembers beside what it costs."""
    names = [name for name in CONTENDERS if scores[name].tokens]
    return bar_chart(
        folder / PLOT_FILE,
        title=(
            "Questions whose evidence / answer is in what the model reads "
            f"(LoCoMo, {history:,}-token history)"
        ),
        value_label="questions (%)",
        categories=[
            f"{name}\n{statistics.median(scores[name].tokens):,.0f} tokens (median)"
            for name in names
        ],
        groups=[
            Bars("evidence-in-context", [scores[name].evidence for name in names]),
            Bars("answer-in-context", [scores[name].answer for name in names]),
        ],
        unit="%",
        limit=100,
    )


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_path())
    parser.add_argument("--conversations", type=int, default=0, help="0: all of them")
    parser.add_argument("--history", type=int, default=8_000)
    parser.add_argument("--recall", type=float, default=0.5, help="recall_ratio")
    parser.add_argument("--step", type=float, default=0.2, help="window_step_ratio")
    parser.add_argument("--local", action="store_true", help="also the local model (minutes)")
    parser.add_argument(
        "--plot", type=Path, metavar="DIR", help=f"also write DIR/{PLOT_FILE} (needs matplotlib)"
    )
    args = parser.parse_args(argv)
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}; pass --data PATH/locomo-dev.json")
    conversations = read_conversations(args.data)
    if args.conversations:
        conversations = conversations[: args.conversations]
    sliding = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
    summary = wm.WorkingMemoryConfig(strategy=wm.Strategy.SUMMARY_BUFFER)
    profiles = {
        "SLIDING_WINDOW": wm.Profile(id="sw", working_memory=sliding),
        "SLIDING_WINDOW + recall": wm.Profile(
            id="sw-recall",
            working_memory=sliding.model_copy(update={"recall_ratio": args.recall}),
        ),
        "SUMMARY_BUFFER (scripted helper)": wm.Profile(id="sb", working_memory=summary),
        "SUMMARY_BUFFER (scripted helper) + recall": wm.Profile(
            id="sb-recall",
            working_memory=summary.model_copy(update={"recall_ratio": args.recall}),
        ),
    }
    scores = {name: Score() for name in CONTENDERS}
    steps = {0.0: CacheScore(), args.step: CacheScore()}
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        async with (
            ScriptedUpstream(responder=scripted_helper) as helper,
            wm.OpenAIClient(base_url=helper.base_url) as client,
            await wm.SQLiteStore.open(Path(folder) / "quality.db") as store,
        ):
            memory = wm.WorkingMemory(store=store, llm=client)
            for conversation in conversations:
                print(
                    f"{conversation.sample_id}: {len(conversation.messages)} turns, "
                    f"{len(conversation.questions)} questions",
                    file=sys.stderr,
                )
                await score_conversation(
                    conversation, store, memory, profiles, args.history, scores
                )
                await replay_cache(conversation, store, memory, args.history, steps)
            if args.local:
                await score_local(conversations[0], store, args, scores)
    report(scores, args.history, args.recall, time.perf_counter() - began)
    report_cache(steps)
    if args.plot:
        print(f"wrote {plot(scores, args.history, args.plot)}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
