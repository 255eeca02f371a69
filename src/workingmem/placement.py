"""Where a request's turns go in its thread, as the client sees the thread.

    placed = await place(store, tenant_id="t1", thread_id="th", request=views, tokenizer=tok)
    await store.append(..., messages=items[placed.start:], after_seq=placed.after_seq)

A client knows the thread without the gateway's own agent-memory rounds: their calls and
results run on the server and never reach it. So the rule of `workingmem.messages` (extend,
or edit / regenerate, or all new) is applied to the thread's *client-visible* turns, and the
answer says where that is in the stored thread. The common cases (a request that extends the
thread, one new message on a thread longer than one exchange) cost one read of the thread's
newest turns; only a request that could rewrite the thread (`may_rewrite`) reads its start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._inline_files import named_files
from ._window_read import whole_turn
from .agent_memory.tools import TOOL_NAMES
from .errors import NotFoundError, ValidationError
from .messages import (
    common_start,
    continuation,
    may_rewrite,
    opening_turns,
    overlap,
    said,
)
from .stores.base import Tail, TurnStore, read_turns, read_turns_at
from .tokens import Tokenizer
from .types import MessageIn, Turn

__all__ = [
    "GATEWAY_TOOLS",
    "NewestRead",
    "Placement",
    "check_client_tools",
    "ends_with",
    "first_limit",
    "opening",
    "place",
    "tool_name",
    "visible",
    "visible_turns",
]

GATEWAY_TOOLS = frozenset(TOOL_NAMES)
"""The tools the gateway runs itself (spec 003's three): a client's tool may not be named so."""


@dataclass(frozen=True, slots=True)
class NewestRead:
    """A read of the thread's newest turns made already (with its ask lock, in one trip),
    for `place` to start from; `tail` None for a missing thread."""

    tail: Tail | None

    def keep_whole(self, stored: Mapping[int, Turn]) -> None:
        """The turns whose files the read left in the store, as read whole since (`stored`,
        by seq): a load given this read (`KnownThread`) reads their files no more."""
        if self.tail is not None:
            turns = self.tail.turns
            turns[:] = [whole_turn(t, stored[t.seq]) if t.seq in stored else t for t in turns]

    @property
    def whole(self) -> bool:
        """The read holds the whole thread (every turn from the first, or no thread)."""
        return self.tail is None or len(self.tail.turns) == self.tail.thread.turn_count

    def holds(self, newest: int) -> bool:
        """Whether the read holds the thread's `newest` newest turns (or all it has)."""
        return self.whole or (self.tail is not None and len(self.tail.turns) >= newest)


def first_limit(request: Sequence[MessageIn]) -> int:
    """The turns `place` reads first for `request`: as many as it has, and for one message
    enough to see whether the thread is longer than one exchange (then the message cannot
    rewrite it, and the thread's start is not read)."""
    return max(len(request), opening_turns(1))


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a request's turns go."""

    start: int
    """The first of the request's turns that is new."""
    after_seq: int | None = None
    """None: append after the thread's newest turn. A seq: an edit or a regenerate; the
    turns after it are replaced (the memory rolled back with them)."""
    turn_count: int = 0
    """The thread's turns when it was read (0 for a new thread)."""


def visible(turns: Iterable[tuple[int, MessageIn]]) -> list[tuple[int, MessageIn]]:
    """The (seq, message) pairs a client saw: without the gateway's agent-memory rounds (an
    assistant turn that only calls the gateway's tools, and those calls' results). `turns`
    start at a unit's first turn."""
    hidden: set[str] = set()
    shown: list[tuple[int, MessageIn]] = []
    for seq, message in turns:
        calls = message.get("tool_calls") or ()
        if calls and all(tool_name(call) in GATEWAY_TOOLS for call in calls):
            hidden.update(str(call.get("id")) for call in calls)
            continue
        if message.get("role") == "tool" and message.get("tool_call_id") in hidden:
            continue
        shown.append((seq, message))
    return shown


async def visible_turns(
    store: TurnStore, *, tenant_id: str, thread_id: str, first: int, count: int
) -> list[Turn]:
    """The client-visible turns with seq in [first, first + count). A tool result is hidden
    when its call is, so the read starts before `first` until it begins on a turn that is not
    a result (a unit's first turn)."""
    lead = 0
    while True:
        start = max(1, first - lead)
        turns = await read_turns(
            store,
            tenant_id=tenant_id,
            thread_id=thread_id,
            first=start,
            count=first - start + count,
        )
        if start == 1 or not turns or turns[0].role != "tool":
            break
        lead = max(2 * lead, 8)
    shown = {seq for seq, _ in visible((t.seq or 0, t.to_message()) for t in turns)}
    return [t for t in turns if t.seq is not None and t.seq >= first and t.seq in shown]


async def place(
    store: TurnStore,
    *,
    tenant_id: str,
    thread_id: str,
    request: Sequence[MessageIn],
    tokenizer: Tokenizer,
    read: NewestRead | None = None,
    rewrites: bool = True,
) -> Placement:
    """Where `request` (validated chat views) goes in the thread (see the module); `read`,
    the first read of the thread's newest turns if made already. Without `rewrites`, the
    request may repeat the thread's newest turns but never edits or regenerates it."""
    try:
        newest, complete, count = await _newest_visible(
            store, tenant_id, thread_id, request, tokenizer, read
        )
    except NotFoundError:
        return Placement(start=0)  # a new thread
    extended = overlap([m for _, m in newest], request)
    if extended or not newest or not rewrites or not may_rewrite(len(request), len(newest)):
        return Placement(start=extended, turn_count=count)
    oldest = (
        newest
        if complete
        else await opening(store, tenant_id, thread_id, opening_turns(len(request)))
    )
    found = continuation([m for _, m in oldest], request)
    if found.keep is None:
        return Placement(start=found.start, turn_count=count)
    return Placement(start=found.start, after_seq=oldest[found.keep - 1][0], turn_count=count)


async def ends_with(
    store: TurnStore,
    *,
    tenant_id: str,
    thread_id: str,
    turns: Sequence[MessageIn],
    tokenizer: Tokenizer,
    read: NewestRead | None = None,
) -> bool:
    """Whether the thread's newest client-visible turns are `turns` (compared as `same`);
    False for a missing thread. `read`: its newest turns read already (with its ask lock)."""
    try:
        newest, _, _ = await _newest_visible(store, tenant_id, thread_id, turns, tokenizer, read)
    except NotFoundError:
        return False
    tail = [message for _, message in newest[-len(turns) :]] if turns else []
    return len(tail) == len(turns) and common_start(tail, turns) == len(turns)


async def _newest_visible(
    store: TurnStore,
    tenant_id: str,
    thread_id: str,
    request: Sequence[MessageIn],
    tokenizer: Tokenizer,
    read: NewestRead | None,
) -> tuple[list[tuple[int, MessageIn]], bool, int]:
    """The thread's newest client-visible turns, at least ``len(request)`` of them when there
    are, starting at a unit's first turn; whether that is the whole thread; its turn count."""
    limit = first_limit(request)
    while True:
        if read is None or not read.holds(limit):
            read = NewestRead(
                await store.read_tail(
                    tenant_id=tenant_id, thread_id=thread_id, tokenizer=tokenizer, limit=limit
                )
            )
        if read.tail is None:
            raise NotFoundError("thread", thread_id)
        turns = read.tail.turns[-limit:]  # a longer read (a window's) is looked at as asked
        whole = len(turns) == read.tail.thread.turn_count
        if not whole and turns and turns[0].seq != turns[0].unit_seq:
            limit += turns[0].seq - turns[0].unit_seq  # begin at the unit's first turn
            continue
        shown = visible((t.seq, t.message) for t in turns)
        if whole or len(shown) >= len(request):
            stored = await _as_stored(store, tenant_id, thread_id, shown, read, request)
            return stored, whole, read.tail.thread.turn_count
        limit *= 2


async def opening(
    store: TurnStore,
    tenant_id: str,
    thread_id: str,
    need: int,
    read: NewestRead | None = None,
    request: Sequence[MessageIn] = (),
) -> list[tuple[int, MessageIn]]:
    """The thread's first `need` client-visible turns (seq, message), or all there are (a
    placement reads `opening_turns`). `NotFoundError` for a missing thread. `read`: the
    thread's newest turns read already (with its ask lock); when they are the whole thread,
    they are its opening, and the store is not asked again; `request`, what they will be
    compared with (`_as_stored`)."""
    if read is not None and read.whole:
        if read.tail is None:
            raise NotFoundError("thread", thread_id)
        shown = visible((t.seq, t.message) for t in read.tail.turns)[:need]
        return await _as_stored(store, tenant_id, thread_id, shown, read, request)
    after = 0
    size = max(need, 16)
    found: list[tuple[int, MessageIn]] = []
    while len(visible(found)) < need:
        page = await store.list_turns(
            tenant_id=tenant_id, thread_id=thread_id, after_seq=after, limit=size
        )
        found.extend((t.seq or 0, t.to_message()) for t in page)
        if len(page) < size:  # the thread ends here: no page after it
            break
        after = found[-1][0]
    return visible(found)[:need]


async def _as_stored(
    store: TurnStore,
    tenant_id: str,
    thread_id: str,
    shown: list[tuple[int, MessageIn]],
    read: NewestRead,
    request: Sequence[MessageIn],
) -> list[tuple[int, MessageIn]]:
    """`shown`, a tail read's (seq, message) pairs, as the turns are stored, for a comparison
    with `request`: a message whose large files the read left in the store (`CountedTurn.held`)
    is read whole when a message of the request says what the stored copy says once its files
    are named (`messages.said`: it may be the same message, a client that resends the thread
    sends its files); one that none says so differs from every message of the request, and
    its files are not read. A turn read whole is kept so in `read`, the read `shown` comes
    from, for the window after it (`NewestRead.keep_whole`)."""
    turns = read.tail.turns if read.tail is not None else []
    seqs = {seq for seq, _ in shown}
    if not any(turn.held and turn.seq in seqs for turn in turns):
        return shown
    named = {said(named_files(message)) for message in request}
    held = [
        turn.seq for turn in turns if turn.held and turn.seq in seqs and said(turn.message) in named
    ]
    if not held:
        return shown
    stored = await read_turns_at(store, tenant_id=tenant_id, thread_id=thread_id, seqs=held)
    whole = {turn.seq: turn for turn in stored if turn.seq is not None}
    read.keep_whole(whole)
    return [(seq, whole[seq].to_message() if seq in whole else message) for seq, message in shown]


def check_client_tools(tools: object) -> list[dict[str, Any]]:
    """A request's tool definitions (OpenAI's function tools), checked for what the gateway
    relies on: each a function with a name, none named like the gateway's own tools (a call
    to it would be run on the server, never reach the client). `ValidationError` otherwise."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ValidationError("tools", f"must be a list, got {type(tools).__name__}")
    checked: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        path = f"tools[{index}]"
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            raise ValidationError(f"{path}.type", "must be a function tool")
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ValidationError(f"{path}.function.name", "must be a non-empty string")
        if name in GATEWAY_TOOLS:
            raise ValidationError(
                f"{path}.function.name",
                f"{name!r} is the gateway's own agent-memory tool (it runs on the server): "
                "give your tool another name",
            )
        checked.append(tool)
    return checked


def tool_name(item: object) -> object:
    """The function name of a tool definition or a tool call (both nest it so); None when
    there is none."""
    function = item.get("function") if isinstance(item, Mapping) else None
    return function.get("name") if isinstance(function, Mapping) else None
