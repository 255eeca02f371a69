"""The facts' merge of a summary update (`curation.merge_facts`) beside the same rule applied
with difflib pair by pair, in one run.

    .venv/bin/python benchmarks/bench_merge.py [--facts 50] [--repeat 7]

Every summary update merges the facts the cheap model proposes into the thread's old ones: a
proposed fact that nearly repeats a kept one (`curation.near_same`: the same numbers, lengths
within 90%, difflib's ratio at least 0.9) widens it, the rest are added. Each fact is compared
with every kept one, so a thread at the cap of 50 facts costs thousands of comparisons an
update, in the background, on the server's CPU.

- **ours**: `merge_facts`, which finds each text's numbers and letters once and tries the
  lengths, the numbers and difflib's quick ratio (from the letters) before difflib's ratio;
- **difflib pair by pair**: the same rule as it reads, a `SequenceMatcher` for each pair that
  passes the lengths and the numbers (its quick ratio, then its ratio).

The facts are LoCoMo turns of 60 to 200 characters (see `_data`): ``--facts`` old ones and one
removal, and two kinds of answer:

- **edits**: 20 proposed, half of them old ones with one letter changed, half new;
- **echo**: the old list given back word for word, then 10 new (what most models answer, and
  what `bench_summary`'s scripted helper does).

Both merges give the same facts (checked). Prints the milliseconds a merge (median, min-max of
``--repeat`` runs of 20 merges each) and their ratio first; never asserts.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from pathlib import Path

import workingmem as wm
from workingmem.curation import NEAR, Removal, merge_facts, normalized

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import default_data_path, load_conversations

Case = tuple[list[wm.Fact], list[wm.Fact], list[Removal]]
Merge = Callable[[Sequence[wm.Fact], Sequence[wm.Fact], Sequence[Removal]], tuple[wm.Fact, ...]]


def pairwise_near(a: str, b: str) -> bool:
    """`near_same` as its rule reads: difflib's matcher built for the pair."""
    if a == b:
        return True
    if not a or not b or min(len(a), len(b)) < NEAR * max(len(a), len(b)):
        return False
    if re.findall(r"\d+", a) != re.findall(r"\d+", b):
        return False
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    return matcher.quick_ratio() >= NEAR and matcher.ratio() >= NEAR


def pairwise_merge(
    old: Sequence[wm.Fact], proposed: Sequence[wm.Fact], removals: Sequence[Removal]
) -> tuple[wm.Fact, ...]:
    """`merge_facts`' rule (no cap reached here) with `pairwise_near`."""
    gone = [normalized(removal.text) for removal in removals]
    kept: list[wm.Fact] = []
    keys: list[str] = []
    for fact in [*old, *proposed]:
        key = normalized(fact.text)
        if any(pairwise_near(key, g) for g in gone):
            continue
        hit = next((i for i, k in enumerate(keys) if pairwise_near(key, k)), None)
        if hit is None:
            kept.append(fact)
            keys.append(key)
        else:
            first = min(t for t in (kept[hit].first_turn, fact.first_turn) if t is not None)
            last = max(t for t in (kept[hit].last_turn, fact.last_turn) if t is not None)
            kept[hit] = wm.Fact(kept[hit].text, first_turn=first, last_turn=last)
    return tuple(kept)


def ours(
    old: Sequence[wm.Fact], proposed: Sequence[wm.Fact], removals: Sequence[Removal]
) -> tuple[wm.Fact, ...]:
    return merge_facts(old, proposed, removals, max_facts=len(old) + len(proposed))[0]


def cases(texts: Sequence[str], facts: int, count: int, *, echo: bool) -> list[Case]:
    rng = random.Random(1)
    made: list[Case] = []
    for _ in range(count):
        old = [
            wm.Fact(t, first_turn=i, last_turn=i) for i, t in enumerate(rng.sample(texts, facts))
        ]
        if echo:
            again = [f.text for f in old]
            new = rng.sample(texts, 10)
        else:
            again = [f.text.replace("e", "a", 1) for f in rng.sample(old, 10)]
            new = rng.sample(texts, 10)
        proposed = [wm.Fact(t, first_turn=facts + 1, last_turn=facts + 1) for t in again + new]
        made.append((old, proposed, [Removal(old[3].text, "obsolete")]))
    return made


def timed(merge: Merge, batch: Sequence[Case]) -> float:
    """Milliseconds a merge over `batch`."""
    start = time.perf_counter()
    for old, proposed, removals in batch:
        merge(old, proposed, removals)
    return (time.perf_counter() - start) / len(batch) * 1000


def spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=50, help="old facts a merge (the cap: 50)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--data", type=Path, default=None)
    args = parser.parse_args(argv)
    conversations = load_conversations(args.data or default_data_path())
    texts = [
        m["content"]
        for conversation in conversations
        for m in conversation
        if isinstance(m["content"], str) and 60 <= len(m["content"]) <= 200
    ]
    print(f"# the facts' merge: {args.facts} old facts and 1 removal")
    rows = []
    for kind in ("edits", "echo"):
        batch = cases(texts, args.facts, 20, echo=kind == "echo")
        if [ours(*case) for case in batch] != [pairwise_merge(*case) for case in batch]:
            raise SystemExit("the two merges disagree: the benchmark compares nothing")
        mine: list[float] = []
        theirs: list[float] = []
        for _ in range(args.repeat):  # interleaved, so that the machine's load falls on both
            mine.append(timed(ours, batch))
            theirs.append(timed(pairwise_merge, batch))
        ratios = [t / m for m, t in zip(mine, theirs, strict=True)]
        print(f"{kind}: difflib pair by pair / ours: {spread(ratios)}x")
        rows.append(f"| {kind} | {spread(mine)} | {spread(theirs)} |")
    print()
    print("| answer | ours (`merge_facts`), ms a merge | difflib pair by pair |")
    print("| --- | ---: | ---: |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
