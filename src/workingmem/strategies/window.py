"""The one window selection every strategy uses: the newest whole units that fit.

    selection = select_window(tail, limit_tokens=2_000, reply_overhead=3, at_thread_start=True)
    [turn.message for turn in selection.turns]

Pure: it sees the tail of a thread (oldest first, with stored token counts) and answers which
turns go to the model, or that it needs to see further back. No I/O, no tokenizing.

The rules it keeps (R3, R4, R6):

- a window is made of whole units: a user turn, or an assistant turn with every tool turn
  answering its calls; a unit whose calls are not all answered is never sent;
- the *current exchange* (the newest user turn and whatever answers it so far) is always in
  the window; when it alone does not fit, `ContextOverflowError`;
- older units are added newest first while they fit; the first that does not fit ends the
  window, so it is the longest suffix that fits;
- the window opens on a user turn: leading assistant and tool units are dropped;
- with `step_tokens`, the window's start moves in steps, to keep a provider's prompt cache
  (which bills a repeated prefix at a fraction, only when it is byte-identical): it opens on a
  steady start, a seq of a grid about `step_tokens` wide, leaving no more than `step_tokens`
  unused. As the thread grows, that start holds until the budget passes it, then jumps a grid
  ahead: a request's history mostly starts where the previous one's did, instead of one unit
  later each time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import ContextOverflowError
from ..types import CountedTurn, MessageIn

__all__ = ["Selection", "Unit", "group_units", "select_window"]


@dataclass(frozen=True, slots=True)
class Unit:
    """Consecutive turns that travel together."""

    turns: tuple[CountedTurn, ...]
    tokens: int
    is_user: bool
    complete: bool
    """False when some call of the assistant turn has no result (yet): not sendable."""
    cut: bool
    """True when the tail read so far starts inside this unit: its head is further back."""

    @property
    def start_seq(self) -> int:
        return self.turns[0].unit_seq


@dataclass(frozen=True, slots=True)
class Selection:
    """What `select_window` decided."""

    turns: list[CountedTurn]
    """The window, oldest first."""
    tokens: int
    """The window's tokens, reply overhead included; 0 for an empty window."""
    needs_more: bool
    """The tail was too short to decide: read further back and select again."""


def group_units(tail: Sequence[CountedTurn]) -> list[Unit]:
    """Splits a tail (oldest first) into its units, in one pass: most units are one turn (a
    user turn, an answer without calls), and a window load does this for every turn it reads."""
    units: list[Unit] = []
    start, end = 0, len(tail)
    while start < end:
        first = tail[start]
        stop = start + 1
        while stop < end and tail[stop].unit_seq == first.unit_seq:
            stop += 1
        head: MessageIn = first.message
        calls = head.get("tool_calls") or ()
        cut = first.seq != first.unit_seq
        if stop == start + 1:
            units.append(Unit((first,), first.tokens, head["role"] == "user", not calls, cut))
        else:
            group = tuple(tail[start:stop])
            answered = sum(1 for turn in group if turn.message["role"] == "tool")
            tokens = sum(turn.tokens for turn in group)
            units.append(Unit(group, tokens, head["role"] == "user", answered >= len(calls), cut))
        start = stop
    return units


def select_window(
    tail: Sequence[CountedTurn],
    *,
    limit_tokens: int | None,
    reply_overhead: int,
    at_thread_start: bool,
    min_seq: int = 1,
    step_tokens: int = 0,
) -> Selection:
    """Chooses the window from the tail of a thread.

    Args:
        tail: the newest turns read so far, oldest first.
        limit_tokens: the most the window may count (reply overhead included); None for no
            limit.
        reply_overhead: tokens a request adds once to prime the reply.
        at_thread_start: the tail starts at the thread's first turn.
        min_seq: units that start before this seq are out of reach (SUMMARY_BUFFER's
            `recent_turns`, the switched-off memory's last 20 turns); the current exchange
            is taken whole all the same.
        step_tokens: the most tokens the window may leave out to open on a steadier start
            (see the module's rules); 0 for the longest suffix that fits.

    Walks the tail newest first, unit by unit, and stops where the window is decided: a load
    pays for the units it sends, not for the whole tail it read.
    """
    units = _newest_first(tail)
    newer: list[_Span] = []  # the units after the current user turn, newest first
    for unit in units:
        if unit[3] and not unit[5]:
            current = [unit, *reversed(newer)]
            break
        newer.append(unit)
    else:
        return Selection(turns=[], tokens=0, needs_more=not at_thread_start)

    sendable = [unit for unit in current if unit[4]]
    whole = len(sendable) == len(current)  # no unit left out between the first and the last
    current = sendable
    tokens = reply_overhead + sum(unit[2] for unit in current)
    if limit_tokens is not None and tokens > limit_tokens:
        raise ContextOverflowError(tokens, limit_tokens, "the newest user turn and its answers")

    older: list[_Span] = []  # newest first
    needs_more = False
    for unit in units:
        start, _, unit_tokens, _, complete, cut = unit
        if tail[start].unit_seq < min_seq:
            break
        if cut:
            needs_more = True
            break
        if not complete:
            whole = False
            continue
        if limit_tokens is not None and tokens + unit_tokens > limit_tokens:
            break
        older.append(unit)
        tokens += unit_tokens
    else:
        needs_more = not at_thread_start and tail[0].seq > min_seq

    while older and not older[-1][3]:
        tokens -= older.pop()[2]
    if step_tokens > 0 and older and not needs_more:
        tokens -= _step(tail, older, step_tokens)
    if whole and (older or current):
        chosen = list(tail[(older[-1] if older else current[0])[0] :])  # one slice
    else:
        chosen = [turn for unit in [*reversed(older), *current] for turn in tail[unit[0] : unit[1]]]
    return Selection(turns=chosen, tokens=tokens, needs_more=needs_more)


def _step(tail: Sequence[CountedTurn], older: list[_Span], step_tokens: int) -> int:
    """Drops from `older` (newest first, oldest a user unit) the units before the window's
    steady start; the tokens dropped.

    The steady starts are a grid of seqs (1, 1 + grid, 1 + 2 x grid, ...), the grid the power
    of two nearest below the turns `step_tokens` holds at the window's average turn (which
    changes slowly as a thread grows, so the grid rarely does). The window opens on the first
    user unit at or after the first grid seq it reaches, when no more than `step_tokens` lie
    before it; else on its plain start."""
    first = tail[older[-1][0]].seq
    turns = len(tail) - older[-1][0]
    average = max(1.0, sum(unit[2] for unit in older) / max(1, turns))
    span = int(step_tokens / average)
    if span < 2:
        return 0
    grid = 1 << (span.bit_length() - 1)
    target = (first - 1 + grid - 1) // grid * grid + 1
    dropped = 0
    for index in range(len(older) - 1, -1, -1):  # oldest first
        start, _, unit_tokens, is_user, _, _ = older[index]
        if dropped > step_tokens:
            return 0
        if is_user and tail[start].seq >= target:
            del older[index + 1 :]
            return dropped
        dropped += unit_tokens
    return 0


_Span = tuple[int, int, int, bool, bool, bool]
"""A unit as `select_window` walks it: (start, stop) in the tail, tokens, is_user, complete,
cut; a plain tuple, since a load makes one per turn it sends."""


def _newest_first(tail: Sequence[CountedTurn]) -> Iterator[_Span]:
    """The tail's units, newest first, made only as far as they are asked for."""
    stop = len(tail)
    while stop > 0:
        last = tail[stop - 1]
        unit_seq, tokens, start = last.unit_seq, last.tokens, stop - 1
        while start > 0 and tail[start - 1].unit_seq == unit_seq:
            start -= 1
            tokens += tail[start].tokens
        head: MessageIn = tail[start].message
        calls = head.get("tool_calls") or ()
        if calls and stop - start > 1:
            answered = sum(1 for k in range(start, stop) if tail[k].message["role"] == "tool")
            complete = answered >= len(calls)
        else:
            complete = not calls
        yield start, stop, tokens, head["role"] == "user", complete, tail[start].seq != unit_seq
        stop = start
