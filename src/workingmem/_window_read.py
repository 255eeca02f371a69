"""How a load reads a thread's tail: newest first, in pages sized from the tokens still to
fill, until the strategy's window is decided; a thread its caller knows is the first page.

    window, tokens, total, state = await read_window(
        store, "t1", "th1", tokenizer, limit=8_000, reach=None
    )

`WorkingMemory.load` reads through it; the gateway's ask gives it the turns it read under the
thread's lock (`KnownThread`), so that a window those hold needs no read at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .errors import NotFoundError
from .formats.chat_answer import chat_original
from .messages import carried_bytes
from .stores.base import Tail, ThreadStore, read_turns_at
from .strategies import select_window, tail_start
from .tokens import Tokenizer
from .types import ChatMessage, CountedTurn, Turn, WorkingMemoryState

__all__ = [
    "KnownThread",
    "Window",
    "first_batch",
    "pending_turns",
    "read_window",
    "whole_turn",
]

_FIRST_READ = 64
_MAX_READ = 4_096

Window = tuple[list[CountedTurn], int, int, WorkingMemoryState | None]
"""A window read: its turns, their tokens, the thread's turn count, its memory state when the
store read it with the tail (else None)."""


@dataclass(frozen=True, slots=True)
class KnownThread:
    """A thread's newest turns, counted with one tokenizer, and its memory state, as a caller
    that holds the thread's ask lock knows them: a read made with the lock, and the turns the
    caller appended since. A load given it reads the thread only for turns older than these
    that its window needs, none when they hold the window (`WorkingMemory.load`'s `known`)."""

    turns: tuple[CountedTurn, ...]
    """The thread's newest turns, oldest first, through its last."""
    state: WorkingMemoryState | None
    """Its memory state as read with the turns; None: the load reads it where it needs it."""
    tokenizer_key: str
    """The tokenizer the turns are counted with."""

    @classmethod
    def after(
        cls, read: Tail | None, appended: Sequence[Turn], tokenizer: Tokenizer
    ) -> KnownThread | None:
        """The thread's newest turns that `read` held (None: it did not exist yet) with
        `appended`, the turns stored after them since, counted on and grouped in units as the
        store does; None when they are not one run of seqs through the read's newest turn
        (another writer came in between)."""
        turns = read.turns if read is not None else []
        total = read.thread.turn_count if read is not None else 0
        seqs = [turn.seq for turn in turns] + [turn.seq for turn in appended]
        first = total - len(turns) + 1
        if not seqs or seqs != list(range(first, first + len(seqs))):
            return None  # no thread at all (the load says so), or another writer's turns
        messages = [turn.to_message() for turn in appended]
        newest = turns[-1] if turns else None
        counted = [
            replace(turn, original=original) if (original := chat_original(stored)) else turn
            for turn, stored in zip(
                pending_turns(messages, tokenizer, after=newest, total=total), appended, strict=True
            )
        ]
        state = read.state if read is not None else WorkingMemoryState()
        return cls((*turns, *counted), state, tokenizer.key)


async def read_window(
    store: ThreadStore,
    tenant_id: str,
    thread_id: str,
    tokenizer: Tokenizer,
    *,
    limit: int | None,
    reach: int | None,
    step: int = 0,
    pending: Sequence[ChatMessage] = (),
    known: KnownThread | None = None,
    file_bytes: int | None = None,
) -> Window:
    """Reads the tail newest first until the window is decided.

    Returns the window (the `pending` messages last, numbered after the thread's turns),
    its tokens, the thread's turn count and its memory state when the store read it with
    the first page (`Tail.state`). The first read asks the store for the turns that fill
    the limit (the store sums its cached counts), so a load reads what it sends, in one
    trip, whatever the thread's length; further pages, sized from the tokens still to
    fill, are for turns not counted yet and windows that reach past an unanswered call.
    A `known` thread is the first page instead. The large files a read leaves in the store
    are read back for the window (`with_files`: those that fit `file_bytes`).
    """
    batch = first_batch(limit, reach)
    if known is not None:
        turns, state = list(known.turns), known.state
        total = turns[-1].seq if turns else 0
    else:
        try:
            tail = await store.read_tail(
                tenant_id=tenant_id,
                thread_id=thread_id,
                tokenizer=tokenizer,
                limit=batch,
                tokens=limit,
            )
        except NotFoundError:
            if pending:  # a thread not stored yet: what the request sends must fit anyway
                select_window(
                    pending_turns(pending, tokenizer, after=None, total=0),
                    limit_tokens=limit,
                    reply_overhead=tokenizer.reply_overhead,
                    at_thread_start=True,
                )
            raise
        turns, state, total = tail.turns, tail.state, tail.thread.turn_count
    min_seq = 1 if reach is None else tail_start(total, reach)
    if pending:
        turns = [
            *turns,
            *pending_turns(pending, tokenizer, after=turns[-1] if turns else None, total=total),
        ]
    while True:
        selection = select_window(
            turns,
            limit_tokens=limit,
            reply_overhead=tokenizer.reply_overhead,
            at_thread_start=not turns or turns[0].seq == 1,
            min_seq=min_seq,
            step_tokens=step,
        )
        if not selection.needs_more:
            window = await with_files(store, tenant_id, thread_id, selection.turns, file_bytes)
            return window, selection.tokens, total, state
        batch = _next_batch(turns, limit, batch)
        older = await store.read_tail(
            tenant_id=tenant_id,
            thread_id=thread_id,
            tokenizer=tokenizer,
            limit=batch,
            before_seq=turns[0].seq,
        )
        turns = older.turns + turns


async def with_files(
    store: ThreadStore,
    tenant_id: str,
    thread_id: str,
    turns: list[CountedTurn],
    file_bytes: int | None,
) -> list[CountedTurn]:
    """`turns` with the large files their read left in the store (`CountedTurn.held`) read
    back: all of them when `file_bytes` is None; else, walking back from the newest turn, those
    whose base64 fits `file_bytes` beside the newer turns' files, as a request keeps its files
    (`_inline_files.within_file_bytes`: the newest turn's always). The others stay named, so
    a load reads about what its request sends, however many files its window holds."""
    if not any(turn.held for turn in turns):
        return turns
    wanted, kept = [], 0
    for position, turn in enumerate(reversed(turns)):
        size = turn.held or carried_bytes(turn.message)
        if file_bytes is None or position == 0 or kept + size <= file_bytes:
            kept += size
            if turn.held:
                wanted.append(turn.seq)
    if not wanted:
        return turns
    stored = await read_turns_at(store, tenant_id=tenant_id, thread_id=thread_id, seqs=wanted)
    whole = {turn.seq: turn for turn in stored}
    return [whole_turn(turn, whole[turn.seq]) if turn.seq in whole else turn for turn in turns]


def whole_turn(turn: CountedTurn, stored: Turn) -> CountedTurn:
    """A tail read's turn whose files the read left in the store, as `stored` holds it whole."""
    return replace(turn, message=stored.to_message(), original=chat_original(stored), held=0)


def first_batch(limit: int | None, reach: int | None) -> int:
    """The turns of a window's first read: a strategy's reach and some, else the most a read
    takes (the token goal ends it sooner); without either, a first page."""
    if reach is not None:
        return min(_MAX_READ, reach + 8)
    return _FIRST_READ if limit is None else _MAX_READ


def _next_batch(turns: list[CountedTurn], limit: int | None, batch: int) -> int:
    """Sizes the next page from the average turn so far and the tokens still to fill."""
    if limit is None or not turns:
        return min(_MAX_READ, batch * 2)
    average = max(1.0, sum(t.tokens for t in turns) / len(turns))
    remaining = max(0, limit - sum(t.tokens for t in turns))
    return max(16, min(_MAX_READ, int(remaining / average * 1.25) + 16))


def pending_turns(
    pending: Sequence[ChatMessage], tokenizer: Tokenizer, *, after: CountedTurn | None, total: int
) -> list[CountedTurn]:
    """The pending messages as the turns they will be once stored after the thread's `total`
    turns (`after` the newest of them, when read): numbered on, counted, grouped in units (a
    tool result joins the unit of the call before it, a stored one included)."""
    first = total + 1
    unit = after.unit_seq if after is not None and after.seq == total else first
    turns = []
    for seq, message in enumerate(pending, start=first):
        if message["role"] != "tool":
            unit = seq
        turns.append(CountedTurn(seq, unit, message, tokenizer.count_message(message)))
    return turns
