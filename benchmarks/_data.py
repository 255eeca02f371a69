"""LoCoMo conversations as chat threads of any length, for the benchmarks.

    conversations = load_conversations(default_data_path())
    messages = thread_messages(conversations, turns=10_000)  # real turns, the last a user turn

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents",
ACL 2024) is CC BY-NC 4.0: it is read from the shared data folder next to the repository, for
benchmarks only, and never shipped in the package.

How a conversation becomes a thread:

- sessions in order (``session_1``, ``session_2``, ...), each a list of turns
  ``{"speaker", "dia_id", "text"}``;
- the speaker of the conversation's first turn is ``user``, the other one ``assistant``;
- consecutive turns of one speaker are kept as separate messages, not merged (LoCoMo has a few,
  e.g. a speaker who writes twice in a row): one LoCoMo turn is one stored turn, so a thread of
  10,000 turns holds 10,000 real turns; a window made of whole units is still valid with them;
- a turn that shares a photo keeps its caption, as LoCoMo's own evaluation prompts do:
  ``text [shares a photo: <blip_caption>]``;
- longer threads cycle through the conversations (conv-26, conv-30, ..., conv-26, ...).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "conversation_messages",
    "default_data_path",
    "load_conversations",
    "read_conversations",
    "thread_messages",
]

Message = dict[str, Any]

_SESSION_KEY = re.compile(r"session_(\d+)")


def default_data_path() -> Path:
    """``shared/data/locomo-dev.json`` beside the repository (``../shared`` from its root)."""
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"


def load_conversations(path: Path) -> list[list[Message]]:
    """Every conversation of a LoCoMo file as chat messages, in file order.

    Raises:
        FileNotFoundError: no file at `path`, with a hint to pass ``--data``.
        ValueError: the file holds no conversation with turns.
    """
    if not path.is_file():
        raise FileNotFoundError(f"no LoCoMo file at {path}; pass --data PATH/locomo-dev.json")
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    conversations = [conversation_messages(sample["conversation"]) for sample in samples]
    conversations = [messages for messages in conversations if messages]
    if not conversations:
        raise ValueError(f"{path} holds no conversation turns")
    return conversations


def read_conversations(path: Path, program: str) -> list[list[Message]]:
    """`load_conversations` for a benchmark's command line: without the file, the benchmark
    ends with the reason on stderr and exit status 2."""
    try:
        return load_conversations(path)
    except (OSError, ValueError) as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def conversation_messages(conversation: dict[str, Any]) -> list[Message]:
    """One LoCoMo conversation, every session in order, as user/assistant messages."""
    turns = [turn for key in _session_keys(conversation) for turn in conversation[key]]
    if not turns:
        return []
    user = turns[0]["speaker"]
    return [
        {"role": "user" if turn["speaker"] == user else "assistant", "content": _content(turn)}
        for turn in turns
    ]


def thread_messages(conversations: list[list[Message]], turns: int) -> list[Message]:
    """`turns` consecutive messages of the conversations cycled end to end, the last a user turn.

    The slice starts at the first offset whose last message is a user turn, so the thread is a
    contiguous run of real turns, as long as asked, and ends on the turn being answered.
    """
    if turns < 1:
        raise ValueError(f"a thread needs at least one turn, got {turns}")
    flat = [message for messages in conversations for message in messages]
    for start in range(len(flat)):
        if flat[(start + turns - 1) % len(flat)]["role"] == "user":
            return [flat[(start + i) % len(flat)] for i in range(turns)]
    raise ValueError("the conversations hold no user turn")


def _session_keys(conversation: dict[str, Any]) -> list[str]:
    """``session_1``, ``session_2``, ... in numeric order (not ``session_1_date_time``)."""
    numbered = [
        (int(match.group(1)), key)
        for key in conversation
        if (match := _SESSION_KEY.fullmatch(key)) and isinstance(conversation[key], list)
    ]
    return [key for _, key in sorted(numbered)]


def _content(turn: dict[str, Any]) -> str:
    text = str(turn["text"])
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text
