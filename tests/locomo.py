"""LoCoMo's first conversation as exchanges, for the tests that replay a real conversation.

The file is ``../shared/data/locomo-dev.json`` (LoCoMo, CC BY-NC 4.0, Maharana et al., ACL
2024): read beside the repository, never part of it or of the package. Without it a test is
skipped with that reason, and fails under CI, which must have it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"


@dataclass(frozen=True)
class Exchange:
    """One user message and the answer the conversation gives it (consecutive turns of one
    speaker joined by a newline: LoCoMo has a few)."""

    question: str
    answer: str


def conversation_turns(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every turn, sessions in order; the first speaker is the user; a shared
    photo keeps its caption (as benchmarks/_data.py reads LoCoMo)."""
    sessions = sorted(
        (int(match.group(1)), turns)
        for key, turns in conversation.items()
        if (match := re.fullmatch(r"session_(\d+)", key)) and isinstance(turns, list)
    )
    turns = [turn for _, session in sessions for turn in session]
    first = turns[0]["speaker"]
    return [
        (
            "user" if turn["speaker"] == first else "assistant",
            f"{turn['text']} [shares a photo: {turn['blip_caption']}]"
            if turn.get("blip_caption")
            else turn["text"],
        )
        for turn in turns
    ]


def locomo_exchanges(prefix_turns: int) -> list[Exchange]:
    """The whole exchanges in the first `prefix_turns` turns of LoCoMo's first conversation."""
    if not DATA.is_file():
        reason = f"no LoCoMo file at {DATA} (the shared data folder beside the repository)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI must have it")
        pytest.skip(reason)
    samples = json.loads(DATA.read_text(encoding="utf-8"))
    grouped: list[tuple[str, list[str]]] = []
    for role, text in conversation_turns(samples[0]["conversation"])[:prefix_turns]:
        if grouped and grouped[-1][0] == role:
            grouped[-1][1].append(text)
        else:
            grouped.append((role, [text]))
    if grouped[-1][0] == "user":
        grouped.pop()  # a question without its answer
    assert [role for role, _ in grouped[:2]] == ["user", "assistant"]
    return [
        Exchange("\n".join(question), "\n".join(answer))
        for (_, question), (_, answer) in zip(grouped[::2], grouped[1::2], strict=True)
    ]
