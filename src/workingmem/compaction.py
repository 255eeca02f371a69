"""A conversation compacted: everything but its user messages folded into a summary and facts.

    start = starting_point(versions, turns)     # a stored summary, or a compaction item's
    compacted = await compact_turns(summarizer, turns, start=start, caps=caps,
                                    tokenizer=tokenizer, max_input_tokens=6_000, meta=meta)

What the Responses API's ``responses.compact`` asks of a model, done by the cheap model with
the summary update's own prompt (`Summarizer`): the model reads the summary so far, the facts
and the turns after them, in chunks of at most `max_input_tokens`, oldest first, and each
chunk's result is where the next one starts. Nothing is stored: a compaction is the client's
to keep (in the ``compaction`` item, `workingmem.formats.compaction`).

The work done already is not done again: the newest summary the thread's memory stored over
the conversation's turns, or the newest compaction item of the gateway's in them, is the start;
only the turns after it are read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import NotFoundError
from .formats.compaction import COMPACTION, notes_of
from .formats.responses import FORMAT, is_user_message, items_of, turns_of
from .llm import CallMeta, Usage
from .messages import same
from .placement import visible_turns
from .stores.base import TurnStore
from .summarizer import Caps, Summarizer, input_cost
from .tokens import Tokenizer
from .types import Fact, NativeItem, Turn, WorkingMemoryState

__all__ = [
    "Compacted",
    "Compaction",
    "Resent",
    "Start",
    "compact_turns",
    "newest_compaction",
    "restored",
    "starting_point",
]


@dataclass(frozen=True, slots=True)
class Start:
    """Where a compaction starts: a summary and facts that cover the turns up to `covered`."""

    summary: str = ""
    facts: tuple[Fact, ...] = ()
    covered: int = 0
    """The seq of the last turn the summary covers; 0 for none."""


@dataclass(frozen=True, slots=True)
class Compacted:
    """A compaction's result."""

    summary: str
    facts: tuple[Fact, ...]
    usage: Usage
    """The cheap model's tokens, all calls summed; zeros when nothing was left to read."""
    calls: int


@dataclass(frozen=True, slots=True)
class Compaction:
    """A conversation, and what compacting it gave (`Gateway.compact`)."""

    turns: tuple[Turn, ...]
    """The conversation, oldest first: the thread's turns the client saw, then the new ones,
    numbered on from the thread's."""
    stored: int
    """The seq of the thread's last turn in the conversation (0 without a thread): the turns
    after it are the request's own, not stored."""
    compacted: Compacted
    thread_id: str | None = None
    """The thread the stored turns are of."""

    @property
    def of_thread(self) -> bool:
        """Whether the conversation is the thread's turns alone (up to `stored`): what a
        compaction item may say it stands for (`restored`)."""
        return self.thread_id is not None and all(
            (turn.seq or 0) <= self.stored for turn in self.turns
        )


def starting_point(
    versions: Sequence[WorkingMemoryState], turns: Sequence[Turn], *, stored: int
) -> Start:
    """The newest start for compacting `turns` (seq'd, oldest first): a stored summary version
    (`versions`, newest first, of the thread whose turns up to `stored` begin the
    conversation) that covers only those turns, or the newest of the gateway's compaction
    items in the conversation, whichever covers more. A version without a summary or facts (a
    reset) is no start."""
    start = Start()
    for version in versions:
        if 0 < version.turn_count <= stored and (version.summary or version.facts):
            start = Start(version.summary, tuple(version.facts), version.turn_count)
            break
    for turn in reversed(turns):
        if turn.seq is None or turn.seq <= start.covered:
            break
        one = _only_item(turn)
        notes = notes_of(one) if one is not None else None
        if notes is not None:
            return Start(notes.summary, tuple(Fact(text) for text in notes.facts), turn.seq)
    return start


async def compact_turns(
    summarizer: Summarizer,
    turns: Sequence[Turn],
    *,
    start: Start,
    caps: Caps,
    tokenizer: Tokenizer,
    max_input_tokens: int,
    meta: CallMeta,
) -> Compacted:
    """The summary and facts of `turns` from `start` on, one cheap-model call a chunk.

    Raises what `Summarizer.update` raises (`InvalidOutputError`, `LLMError`,
    `UsageRefusedError`): a compaction is all or nothing."""
    summary, facts = start.summary, start.facts
    usage, calls = Usage(), 0
    due = [turn for turn in turns if (turn.seq or 0) > start.covered]
    for chunk in _chunks(due, tokenizer, max_input_tokens):
        result = await summarizer.update(
            summary=summary, facts=facts, turns=chunk, caps=caps, meta=meta
        )
        summary, facts = result.summary, result.facts
        usage, calls = usage + result.usage, calls + 1
    return Compacted(summary, facts, usage, calls)


@dataclass(frozen=True, slots=True)
class Resent:
    """A resent history, read for a compaction of a thread it holds (`restored`)."""

    turns: list[NativeItem]
    """What the request's turns are: as sent, or with the compaction's part replaced."""
    thread_id: str | None = None
    """The thread the compaction stands for; None when the history holds none."""
    only_new: bool = False
    """`turns` are the turns after the thread's: new, never an edit of it."""


async def restored(store: TurnStore, *, tenant_id: str, turns: Sequence[NativeItem]) -> Resent:
    """A history resent after a compaction of a thread, read as continuing that thread: when
    its newest compaction item of the gateway's names a thread of `tenant_id`, and what comes
    before the item is either the thread's user messages up to there (as ``responses.compact``
    answered them) or ends with the thread's turn the item stands through (a server-side
    compaction, kept where the answer put it, after the client's own copy of the thread).

    - The thread still ends where the compaction did (the usual case): what follows the item
      is new, the rest is the thread as it stands; nothing of the thread is read.
    - The thread went on since: the thread's turns up to there, as the client saw them, take
      the place of all that comes before the item, for the overlap rule to place (read up to
      where the compaction ended).

    So the thread stays whole, not edited nor forked, and what comes before the item (the
    client's copy of the thread) is not read again. Any other history comes back as sent."""
    sent = Resent(list(turns))
    index = newest_compaction(turns)
    mark = _mark(turns[index]) if index is not None else None
    if index is None or mark is None:
        return sent
    thread_id, through = mark
    before, after = turns[:index], list(turns[index + 1 :])
    try:
        stored = await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
    except NotFoundError:
        return sent
    if stored.turn_count < through:
        return sent
    listed = all(_user_message(turn.item.get("items")) for turn in before)
    if not listed and not await _ends_at(store, tenant_id, thread_id, through, before[-1]):
        return sent
    if stored.turn_count == through:
        return Resent(after, thread_id, only_new=True)
    thread = await visible_turns(
        store, tenant_id=tenant_id, thread_id=thread_id, first=1, count=through
    )
    if listed and before:  # an item alone stands for all of the thread up to there
        users = [turn for turn in thread if _user_message(items_of(turn))]
        if len(users) != len(before):
            return sent
        if not all(same(a.to_message(), b.message) for a, b in zip(users, before, strict=True)):
            return sent
    # the thread's turns as a Responses client resends them: their items, grouped again
    items = [item for turn in thread for item in items_of(turn)]
    return Resent([*turns_of(items), *after], thread_id)


async def _ends_at(
    store: TurnStore, tenant_id: str, thread_id: str, through: int, last: NativeItem
) -> bool:
    """Whether `last`, the turn a compaction item follows, is the thread's turn `through`:
    a server-side compaction comes right after the answer it stands through."""
    found = await store.list_turns(
        tenant_id=tenant_id, thread_id=thread_id, after_seq=through - 1, limit=1
    )
    return bool(found) and same(found[0].to_message(), last.message)


def newest_compaction(turns: Sequence[NativeItem]) -> int | None:
    """The index of the newest turn that is a compaction item (a user-side turn of one item):
    a look at each turn, on every resent history, so a short one."""
    found = None
    for index, turn in enumerate(turns):
        if turn.message.get("role") == "user":  # a compaction's side: the rest is passed over
            one = _only_item(turn)
            if one is not None and one.get("type") == COMPACTION:
                found = index
    return found


def _mark(turn: NativeItem) -> tuple[str, int] | None:
    """The thread, and the seq of its last turn, that a turn stands for: a compaction item of
    the gateway's made of a thread's turns alone."""
    one = _only_item(turn)
    notes = notes_of(one) if one is not None else None
    if notes is None or notes.thread is None or notes.through is None:
        return None
    return notes.thread, notes.through


def _only_item(turn: Turn | NativeItem) -> Mapping[str, Any] | None:
    """The one Responses item a turn was made of (a compaction is one), else None."""
    items = turn.item.get("items") if turn.format == FORMAT and turn.item is not None else None
    return items[0] if isinstance(items, list) and len(items) == 1 else None


def _user_message(items: object) -> bool:
    """Whether a turn's Responses items are a user's message: what a compaction lists."""
    return (
        isinstance(items, list)
        and len(items) > 0
        and all(isinstance(one, Mapping) and is_user_message(one) for one in items)
    )


def _chunks(turns: Sequence[Turn], tokenizer: Tokenizer, max_tokens: int) -> Iterator[list[Turn]]:
    """The turns in runs whose rendering fits `max_tokens` (a run holds one turn at least)."""
    chunk: list[Turn] = []
    used = 0
    for turn in turns:
        cost = input_cost(turn, tokenizer)
        if chunk and used + cost > max_tokens:
            yield chunk
            chunk, used = [], 0
        chunk.append(turn)
        used += cost
    if chunk:
        yield chunk
