"""Recall: turns from earlier in a thread that bear on the current one, found by a retriever.

    retriever = LexicalRetriever(store)      # the store's full-text search (BM25)
    units = await retriever.retrieve(tenant_id="t1", thread_id="th1",
                                     query="When did I adopt the puppy?", before_seq=480,
                                     limit=40)

A window holds the newest turns; a question about something said 400 turns ago needs that
turn. `WorkingMemory.load` asks its retriever, when `recall_ratio` gives recall a share of the
budget, for units older than the window that match the current user turn, and shows as many
as fit in the notes (`select_recalled`). `Retriever` is the protocol: the lexical
one is built in; one over embeddings can stand beside it.

What is shown: the units come best first (the retriever's ranking); as many as fit are taken
in that order, a unit whole or not at all, then shown in the thread's order, each turn with its
number and date, a gap between units that are not next to each other marked ``...``. The
tokens are the rendered text's, counted with the model's tokenizer: recall reaches the model
as notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Protocol, runtime_checkable

from .stores.base import ThreadStore, TurnSearchStore
from .tokens import Tokenizer
from .transcript import day_of, render_turns, text_of
from .types import CountedTurn, Turn

__all__ = [
    "DATES_HEADING",
    "RECALL_HEADING",
    "LexicalRetriever",
    "Recalled",
    "Retriever",
    "recall_before",
    "render_days",
    "select_recalled",
]


@runtime_checkable
class Retriever(Protocol):
    """Finds a thread's units that bear on a query."""

    async def retrieve(
        self, *, tenant_id: str, thread_id: str, query: str, before_seq: int, limit: int
    ) -> Sequence[Sequence[Turn]]:
        """Up to `limit` units of turns before `before_seq`, the best first, each whole
        (oldest turn first). Scoped to the tenant's thread; never a turn of another."""
        ...


class LexicalRetriever:
    """Recall by words: the store's full-text index (SQLite's FTS5, PostgreSQL's tsvector),
    ranked by BM25. No model, no embedding: a load stays a read of the database."""

    def __init__(self, store: TurnSearchStore) -> None:
        self.store = store

    async def retrieve(
        self, *, tenant_id: str, thread_id: str, query: str, before_seq: int, limit: int
    ) -> list[list[Turn]]:
        return await self.store.search_turns(
            tenant_id=tenant_id,
            thread_id=thread_id,
            query=query,
            before_seq=before_seq,
            limit=limit,
        )


RECALL_HEADING = (
    "From earlier in this conversation ([turn number] (date and time, UTC) role: text):"
)
_GAP = "..."
DATES_HEADING = "When the messages below were written (UTC):"
_OPENING_CHARS = 60
_RECALLED_TOKENS = 24
"""A guess at a recalled unit's tokens, to size the search: a turn of chat is 20-40."""
_MAX_RECALLED = 200
"""How much of a day's first message names it."""
_BLOCK_COUNTS: dict[tuple[str, int, int], int] = {}
"""Rendered units' token counts by tokenizer, length and hash (`_block_tokens`)."""
_MAX_BLOCK_COUNTS = 16_384


@dataclass(frozen=True, slots=True)
class Recalled:
    """The turns recall put in front of the model."""

    text: str = ""
    """The notes' section, heading included; "" when nothing was recalled."""
    seqs: tuple[int, ...] = ()
    """The recalled turns' seqs, in the thread's order."""
    tokens: int = 0
    """`text`'s tokens with the model's tokenizer."""


async def recall_before(
    store: ThreadStore,
    retriever: Retriever | None,
    tenant_id: str,
    thread_id: str,
    tokenizer: Tokenizer,
    window: list[CountedTurn],
    stored: list[CountedTurn],
    limit: int,
    extra_query: str | None,
) -> Recalled:
    """The units before the window that match its newest user turn (a pending one
    included), as many as fit, and the days the window's stored turns were written (when
    the store can say)."""
    days = ""
    if stored and isinstance(store, TurnSearchStore):
        days = render_days(
            await store.turn_days(
                tenant_id=tenant_id,
                thread_id=thread_id,
                first_seq=stored[0].seq,
                last_seq=stored[-1].seq,
            )
        )
    query = next(
        (
            text_of(t.message.get("content"))
            for t in reversed(window)
            if t.message["role"] == "user"
        ),
        "",
    )
    if extra_query and extra_query.strip() != query.strip():
        query = f"{extra_query}\n{query}"  # the rewrite's words first: they name the topic
    units: Sequence[Sequence[Turn]] = ()
    if retriever is not None and window[0].seq > 1 and query.strip():
        units = await retriever.retrieve(
            tenant_id=tenant_id,
            thread_id=thread_id,
            query=query,
            before_seq=window[0].seq,
            limit=max(8, min(_MAX_RECALLED, limit // _RECALLED_TOKENS)),
        )
    return select_recalled(units, tokenizer=tokenizer, limit_tokens=limit, after=days)


def select_recalled(
    units: Sequence[Sequence[Turn]], *, tokenizer: Tokenizer, limit_tokens: int, after: str = ""
) -> Recalled:
    """The best-ranked units whose rendering fits `limit_tokens`, in the thread's order, then
    `after` (the window's dates, `render_days`): `after` is kept first when it fits at all,
    the units take what is left; the whole is counted once more, exactly, at the end."""
    budget = limit_tokens
    if after:
        after_tokens = tokenizer.count_text(after) + 2  # the blank line before it
        after, budget = ("", budget) if after_tokens > budget else (after, budget - after_tokens)
    budget -= tokenizer.count_text(RECALL_HEADING) + 1
    chosen: list[tuple[int, str]] = []  # (first seq, rendered unit), best first
    for unit in units:
        if budget <= 0:
            break
        if not unit or unit[0].seq is None:
            continue
        block = render_turns(unit)
        cost = _block_tokens(tokenizer, block) + 2  # its line break, a gap marker's share
        if cost <= budget:
            chosen.append((unit[0].seq, block))
            budget -= cost
    text, seqs, tokens = _joined(chosen, units, after, tokenizer)
    while chosen and tokens > limit_tokens:
        chosen.pop()  # the worst-ranked goes first
        text, seqs, tokens = _joined(chosen, units, after, tokenizer)
    return Recalled(text, seqs, tokens)


def _block_tokens(tokenizer: Tokenizer, block: str) -> int:
    """`tokenizer.count_text(block)`, remembered. A thread's recall ranks mostly the units it
    ranked on its previous asks (94% of the rendered units of 100 asks on a LoCoMo thread had
    been rendered before), and counting each candidate was most of choosing them. Keyed by the
    text's hash, not the text, so that no message outlives its thread here; the selection is
    counted exactly as a whole at the end, so even a collision of hashes cannot overfill the
    share. Bounded: emptied when full."""
    key = (tokenizer.key, len(block), hash(block))
    tokens = _BLOCK_COUNTS.get(key)
    if tokens is None:
        if len(_BLOCK_COUNTS) >= _MAX_BLOCK_COUNTS:
            _BLOCK_COUNTS.clear()
        tokens = _BLOCK_COUNTS[key] = tokenizer.count_text(block)
    return tokens


def _joined(
    chosen: Sequence[tuple[int, str]],
    units: Sequence[Sequence[Turn]],
    after: str,
    tokenizer: Tokenizer,
) -> tuple[str, tuple[int, ...], int]:
    """The notes' recall section and `after`, their seqs and their exact tokens."""
    text, seqs = _render(chosen, units) if chosen else ("", ())
    text = "\n\n".join(part for part in (text, after) if part)
    return text, seqs, tokenizer.count_text(text) if text else 0


def _render(
    chosen: Sequence[tuple[int, str]], units: Sequence[Sequence[Turn]]
) -> tuple[str, tuple[int, ...]]:
    first = {start for start, _ in chosen}
    spans = sorted(
        (unit[0].seq or 0, unit[-1].seq or 0, [turn.seq or 0 for turn in unit])
        for unit in units
        if unit and unit[0].seq in first
    )
    blocks = dict(chosen)
    lines, seqs, last = [RECALL_HEADING], [], None
    for start, end, unit_seqs in spans:
        if last is not None and start != last + 1:
            lines.append(_GAP)
        lines.append(blocks[start])
        seqs.extend(unit_seqs)
        last = end
    return "\n".join(lines), tuple(seqs)


def render_days(firsts: Sequence[Turn]) -> str:
    """The first turn of each day of a window (`TurnSearchStore.turn_days`) as the notes'
    dates: a line per day, its date and time and how its first message opens; "" for none."""
    lines = []
    for turn in firsts:
        if turn.created_at is None:
            continue
        moment = turn.created_at.astimezone(UTC)
        opening = " ".join(text_of(turn.content).split())
        if len(opening) > _OPENING_CHARS:
            opening = opening[:_OPENING_CHARS].rsplit(" ", 1)[0] + " ..."
        lines.append(f'- {day_of(moment)}, {moment:%H:%M}: from "{opening}"')
    return "\n".join([DATES_HEADING, *lines]) if lines else ""
