"""SUMMARY_BUFFER's pure parts: how far back the verbatim tail reaches, and the notes.

    render_notes(state)  # "The user is planning a trip...\n\nFacts:\n- lives in Lyon"

The window itself is `select_window` with `min_seq` set to the first of the last
`recent_turns` turns (R6).
"""

from __future__ import annotations

from ..types import WorkingMemoryState

__all__ = ["render_notes", "tail_start", "update_due"]


def tail_start(turn_count: int, recent_turns: int) -> int:
    """The seq of the oldest turn the verbatim tail may hold."""
    return max(1, turn_count - recent_turns + 1)


def update_due(*, turn_count: int, covered_turns: int, every: int) -> bool:
    """R7, the one place it is decided: the summary is rewritten once the thread has grown by
    `every` (``update_every_turns``) turns since the turn count the summary covers."""
    return turn_count - covered_turns >= every


def render_notes(state: WorkingMemoryState) -> str:
    """The stored summary and facts as the text of the {memory} slot; "" when both are empty."""
    parts = []
    if state.summary:
        parts.append(state.summary.strip())
    if state.facts:
        parts.append("Facts:\n" + "\n".join(f"- {fact}" for fact in state.facts))
    return "\n\n".join(parts)
