"""What both stores do the same way: timestamps, JSON columns, and preparing an append.

Kept apart from the SQL so that SQLite and PostgreSQL agree by construction: the same
validation, the same units, the same counts, the same serialized form.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import msgspec

from .._inline_files import shed
from ..errors import ValidationError
from ..formats.chat_answer import with_own_fields
from ..messages import (
    MAX_DEPTH,
    OpenUnit,
    PlannedTurn,
    bounded,
    check_id,
    depth,
    dumps_message,
    plan_units,
)
from ..tokens import Tokenizer, tokenizer_from_key
from ..types import ChatMessage, CountedTurn, Fact, Message, MessageIn, WorkingMemoryState

__all__ = [
    "Counts",
    "PreparedAppend",
    "check_page",
    "check_scope",
    "check_times",
    "counted_tail",
    "counts_of",
    "decode_facts",
    "encode_facts",
    "first_tokenizer",
    "later",
    "loads_item",
    "loads_message",
    "loads_messages",
    "plan_append",
    "running_counts",
    "state_from_row",
    "state_of",
    "tokenizers_of",
    "utcnow",
]


def utcnow() -> datetime:
    return datetime.now(UTC)


def check_times(
    created_at: object, count: int, now: datetime, after: datetime | None = None
) -> list[datetime]:
    """The times of `count` new turns: `created_at` (one per turn, each aware, in order, none
    in the future nor before `after`, the turn before them) in UTC, or `now` for each."""
    if created_at is None:
        return [now] * count
    if isinstance(created_at, (str, bytes, datetime)) or not isinstance(created_at, Sequence):
        raise ValidationError("created_at", "must be a list of datetimes, one per message")
    if len(created_at) != count:
        raise ValidationError(
            "created_at", f"must give one time per message: {len(created_at)} for {count}"
        )
    times: list[datetime] = []
    for index, moment in enumerate(created_at):
        field = f"created_at[{index}]"
        if not isinstance(moment, datetime) or moment.utcoffset() is None:
            raise ValidationError(field, f"must be a timezone-aware datetime, got {moment!r}")
        moment = moment.astimezone(UTC)
        if moment > now:
            raise ValidationError(field, f"is in the future ({moment.isoformat()})")
        earlier = times[-1] if times else after
        if earlier is not None and moment < earlier:
            raise ValidationError(
                field,
                f"is before the turn before it ({moment.isoformat()} < {earlier.isoformat()})",
            )
        times.append(moment)
    return times


def later(moment: datetime, seconds: float) -> datetime:
    return moment + timedelta(seconds=seconds)


def check_scope(tenant_id: object, thread_id: object) -> tuple[str, str]:
    """Validates the (tenant, thread) key every call starts with."""
    return check_id("tenant_id", tenant_id), check_id("thread_id", thread_id)


_decode = msgspec.json.Decoder().decode


def loads_message(text: str) -> ChatMessage:
    """A stored message, decoded by msgspec (5x the standard library on chat messages, integers
    of any size kept exact); what it refuses and Python's JSON reads (a lone surrogate escape)
    is read by the standard library. One an older version stored nested deeper than today's
    limit is read with the excess replaced: only content parts can nest, so a text message is
    ruled out at once, brackets counted at C speed rule out most others, and a walk that stops
    at the limit the rest (braces inside strings: code, JSON arguments); only a message really
    too deep is copied."""
    try:
        message: Message = _decode(text)
    except msgspec.DecodeError:
        message = json.loads(text)
    return cast(ChatMessage, _shallow(message, text))  # stored after validation


def loads_messages(texts: Sequence[str]) -> list[ChatMessage]:
    """`loads_message` of each text, at the cost of one call for a whole tail."""
    try:
        messages: list[Message] = [_decode(text) for text in texts]
    except msgspec.DecodeError:
        return [loads_message(text) for text in texts]
    for index, message in enumerate(messages):
        if message.get("content").__class__ is list:
            messages[index] = _shallow(message, texts[index])
    return cast(list[ChatMessage], messages)  # stored after validation


def _shallow(message: Message, text: str) -> Message:
    """`message` with parts nested past the limit bounded (only a content list can nest)."""
    if (
        message.get("content").__class__ is list
        and text.count("{") + text.count("[") > MAX_DEPTH
        and depth(message) > MAX_DEPTH + 2
    ):
        message = bounded(message, MAX_DEPTH + 2)  # the message and its content list
    return message


def loads_item(text: str | None) -> dict[str, Any] | None:
    """A turn's original item, as it was given (None: the chat view is the original)."""
    if text is None:
        return None
    item: dict[str, Any] = json.loads(text)
    return item


def encode_facts(facts: Sequence[Fact]) -> str:
    return json.dumps(
        [{"text": f.text, "first_turn": f.first_turn, "last_turn": f.last_turn} for f in facts],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_facts(text: str) -> tuple[Fact, ...]:
    items: list[dict[str, Any]] = json.loads(text)
    return tuple(
        Fact(text=item["text"], first_turn=item.get("first_turn"), last_turn=item.get("last_turn"))
        for item in items
    )


def state_of(row: Sequence[Any], moment: Callable[[Any], datetime]) -> WorkingMemoryState:
    """A state's row (version, summary, facts, turn count, time), its time read by `moment`
    (the dialect's)."""
    version, summary, facts, turn_count, stamp = row
    return state_from_row(version, summary, facts, turn_count, moment(stamp))


def state_from_row(
    version: int, summary: str, facts: str, turn_count: int, updated_at: datetime | None
) -> WorkingMemoryState:
    return WorkingMemoryState(
        summary=summary,
        facts=list(decode_facts(facts)),
        turn_count=turn_count,
        version=version,
        updated_at=updated_at,
    )


def tokenizers_of(column: str) -> list[str]:
    keys: list[str] = json.loads(column)
    return keys


@dataclass(frozen=True, slots=True)
class Counts:
    """What a writer stores of new turns' counts, for every registered tokenizer that can be
    rebuilt."""

    own: list[int | None]
    """Each turn's count with the thread's first tokenizer, kept in the turn's row (None: no
    tokenizer registered yet, or it cannot be rebuilt here)."""
    others: list[tuple[str, int, int]]
    """(tokenizer key, seq, tokens) with the others, rows of ``turn_tokens``."""


@dataclass(frozen=True, slots=True)
class PreparedAppend:
    """The rows one append writes."""

    turns: list[PlannedTurn]
    serialized: list[str]
    counts: Counts
    shed: list[tuple[str | None, int | None]]
    """Each turn's message with its large files named, and their bytes (`shed_row`)."""

    @property
    def last_unit_seq(self) -> int:
        return self.turns[-1].unit_seq


def plan_append(
    messages: Sequence[MessageIn],
    *,
    turn_count: int,
    open_unit: OpenUnit | None,
    tokenizer_keys: Sequence[str],
) -> PreparedAppend:
    """Places validated messages after `turn_count` and counts them with each tokenizer."""
    planned = plan_units(open_unit, messages, first_seq=turn_count + 1)
    return PreparedAppend(
        turns=planned,
        serialized=[dumps_message(t.message) for t in planned],
        counts=counts_of(planned, tokenizer_keys),
        shed=[shed_row(t.message) for t in planned],
    )


def shed_row(message: MessageIn) -> tuple[str | None, int | None]:
    """A turn's ``shed`` and ``shed_bytes`` columns (migration 16): its message with its large
    inline files named, as JSON, and the bytes of base64 they hold; (None, None) for a
    message kept whole (`_inline_files.shed`)."""
    found = shed(message)
    return (None, None) if found is None else (dumps_message(found[1]), found[0])


def counts_of(turns: Sequence[PlannedTurn], tokenizer_keys: Sequence[str]) -> Counts:
    """The counts of `turns` that their writer stores beside them."""
    own: list[int | None] = [None] * len(turns)
    others: list[tuple[str, int, int]] = []
    for index, key in enumerate(tokenizer_keys):
        tokenizer = tokenizer_from_key(key)
        if tokenizer is None:
            continue
        counted = [tokenizer.count_message(turn.message) for turn in turns]
        if index == 0:
            own = list(counted)
        else:
            others += [(key, turn.seq, n) for turn, n in zip(turns, counted, strict=True)]
    return Counts(own=own, others=others)


def running_counts(
    counts: Sequence[int | None], before: int | None = 0
) -> tuple[list[int | None], int | None]:
    """New turns' running counts (migration 12), summed on from `before`, the thread's before
    them (0: relative to it; None: not known, as when a turn before is not counted): each
    turn's, None from the first turn not counted on; and the last (None likewise)."""
    through: list[int | None] = []
    total = before
    for n in counts:
        total = None if total is None or n is None else total + n
        through.append(total)
    return through, total


def first_tokenizer(column: str) -> str | None:
    """The key of the tokenizer whose counts a thread keeps in its turns' rows."""
    keys = tokenizers_of(column)
    return keys[0] if keys else None


def counted_tail(
    tokenizer: Tokenizer, rows: Sequence[Sequence[Any]]
) -> tuple[list[CountedTurn], dict[int, int]]:
    """Turns (oldest first) from tail rows read newest first as (seq, unit_seq, message,
    tokens, original, held): the original is the item a turn goes upstream by when it is not
    its view (its own or the one it carries), else NULL (`CountedTurn.original`); held the
    bytes of the files the message names instead of holding (`CountedTurn.held`), else NULL.

    A turn whose count with `tokenizer` is not stored yet is counted here; those counts are
    returned too, {seq: tokens}, for the store to remember.
    """
    rows = rows[::-1]
    messages = loads_messages([row[2] for row in rows])
    missing = {
        row[0]: tokenizer.count_message(message)
        for row, message in zip(rows, messages, strict=True)
        if row[3] is None
    }
    turns = [
        _counted_turn(
            seq, unit_seq, message, missing[seq] if tokens is None else tokens, original, held
        )
        for (seq, unit_seq, _, tokens, original, held), message in zip(rows, messages, strict=True)
    ]
    return turns, missing


def _slot_setter(name: str) -> Callable[[CountedTurn, Any], None]:
    setter: Callable[[CountedTurn, Any], None] = vars(CountedTurn)[name].__set__
    return setter


_SET_SEQ, _SET_UNIT_SEQ, _SET_MESSAGE, _SET_TOKENS, _SET_ORIGINAL, _SET_HELD = map(
    _slot_setter, ("seq", "unit_seq", "message", "tokens", "original", "held")
)


def _counted_turn(
    seq: int,
    unit_seq: int,
    message: ChatMessage,
    tokens: int,
    original: str | None,
    held: int | None,
) -> CountedTurn:
    """`CountedTurn(seq, unit_seq, message, tokens, original, held)` (the view with the
    upstream's own fields `original` holds: `formats.chat_answer.with_own_fields`) at 60%
    of the cost: a frozen dataclass's constructor sets each field through
    ``object.__setattr__``, where the slots' own setters do it directly (a long window's tail
    builds thousands)."""
    turn: CountedTurn = object.__new__(CountedTurn)
    _SET_SEQ(turn, seq)
    _SET_UNIT_SEQ(turn, unit_seq)
    _SET_MESSAGE(turn, message)
    _SET_TOKENS(turn, tokens)
    _SET_ORIGINAL(
        turn, None if original is None else with_own_fields(message, json.loads(original))
    )
    _SET_HELD(turn, held or 0)
    return turn


def check_seq(field: str, value: object, *, minimum: int = 0) -> int:
    """`value` as a seq argument (an int, not a bool, at least `minimum`), else a
    `ValidationError` naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValidationError(field, f"must be a seq (an int >= {minimum}), got {value!r}")
    return value


def check_page(limit: int, offset: int) -> None:
    if not 1 <= limit <= 1_000:
        raise ValidationError("limit", f"must be between 1 and 1000, got {limit}")
    if offset < 0:
        raise ValidationError("offset", f"must not be negative, got {offset}")
