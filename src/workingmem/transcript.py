"""Stored turns as lines of text: what a helper model reads, and what recall shows the model.

    render_turns(turns)
    # [12] (8 May 2023, 13:56) user: Book the train for Friday.
    # [13] (8 May 2023, 13:57) assistant: Done.

Each turn carries its number in the thread and its date (UTC), so that a summary can say when
something happened and a model can answer "when did I ...": day, month name and year, as
people write them (never 05/08, which reads two ways), then the time. A turn's text is its
text parts and a name for each other part (``[file: report.pdf]``), its calls as
``(called name(arguments))``; a very long turn is cut at `TURN_MAX_CHARS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from .formats.files import label
from .types import Turn

__all__ = ["TURN_MAX_CHARS", "day_of", "label", "render_turn", "render_turns", "text_of"]

TURN_MAX_CHARS = 4_000
"""The longest a turn's text is rendered; the rest is cut, saying how much."""
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
"""English, whatever the process's locale (``%B`` follows it)."""


def render_turns(turns: Sequence[Turn]) -> str:
    """The turns, one block each: ``[seq] (date) role: text``."""
    return "\n".join(render_turn(turn) for turn in turns)


def render_turn(turn: Turn) -> str:
    """One turn as ``[seq] (8 May 2023, 13:56) role: text`` (no date for a turn not stored)."""
    head = f"[{turn.seq}]"
    if turn.created_at is not None:
        moment = turn.created_at.astimezone(UTC)
        head += f" ({day_of(moment)}, {moment:%H:%M})"
    if turn.role == "tool":
        head += f" tool result ({turn.tool_call_id})"
    else:
        head += f" {turn.role}"
    text = text_of(turn.content)
    for call in turn.tool_calls:
        text += f"\n(called {call.name}({call.arguments}))"
    if len(text) > TURN_MAX_CHARS:
        text = text[:TURN_MAX_CHARS] + f" [... {len(text) - TURN_MAX_CHARS} characters cut]"
    return f"{head}: {text.strip()}"


def day_of(moment: datetime) -> str:
    """A date as people write it: ``8 May 2023`` (English, whatever the locale)."""
    return f"{moment.day} {_MONTHS[moment.month - 1]} {moment.year}"


def text_of(content: object, joiner: str = " ") -> str:
    """A content's text: its text parts, each other part named where it stands (`label`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    return joiner.join(
        part["text"]
        if part.get("type") == "text" and isinstance(part.get("text"), str)
        else label(part)
        for part in content
        if isinstance(part, dict)
    )
