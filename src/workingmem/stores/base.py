"""The store protocols: what every backend keeps, and how it is asked for it.

    async with await open_store("sqlite:///memory.db") as store:
        await store.append(tenant_id="t1", thread_id="th1", messages=[{"role": "user", ...}])
        page = await store.read_tail(tenant_id="t1", thread_id="th1", tokenizer=tok, limit=64)

Narrow protocols that compose: `TurnStore` (threads and their turns), `MemoryStateStore` (a
thread's summary state, its versions and its update lease), `ThreadStore` (both: what the
thread memory needs), and `Store` (that, `DocumentStore` for agent memory, `ApiKeyStore` for
the service, `ResponseStore` for the Responses API's stored responses and `CompletionStore` for
stored chat completions): what the gateway takes. Every method is scoped by `tenant_id`: a
thread of another tenant is `NotFoundError`, with the same message as a thread that does not
exist.
Backends: `SQLiteStore` (the embedded default) and `PostgresStore` (the `postgres` extra), one
`SQLStore` on two dialects. One contract suite (tests/stores) runs against both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self, TypeGuard, runtime_checkable

from .._protocols import implements
from ..errors import NotFoundError
from ..tokens import Tokenizer
from ..types import CountedTurn, Fact, MessageIn, NativeItem, Thread, Turn, WorkingMemoryState
from .completions import CompletionStore
from .documents import DocumentStore
from .keys import ApiKeyStore
from .responses import ResponseStore

__all__ = [
    "PAGE_LIMIT",
    "AskLockStore",
    "Claim",
    "MemoryStateStore",
    "PooledStore",
    "StateWrite",
    "Store",
    "Tail",
    "ThreadStore",
    "TurnSearchStore",
    "TurnStore",
    "TurnsAtStore",
    "append_and_release",
    "claim_and_open",
    "locks_asks",
    "read_turns",
    "read_turns_at",
    "with_window",
]


@dataclass(frozen=True, slots=True)
class Tail:
    """The newest turns of a thread, oldest first, counted with one tokenizer."""

    thread: Thread
    turns: list[CountedTurn]
    state: WorkingMemoryState | None = None
    """The thread's memory state, when the store read it with the turns (one snapshot, one
    trip); None: ask `get_memory_state`."""


@dataclass(frozen=True, slots=True)
class StateWrite:
    """A new memory state, written only if the stored one is still `expected_version`."""

    expected_version: int
    summary: str
    facts: Sequence[Fact]
    turn_count: int
    reason: str
    """Why this version exists: ``update``, ``reset`` or ``rollback``."""

    @property
    def forgets(self) -> bool:
        """A reset purges the earlier versions in the same transaction: what the user asked
        to forget must not come back through the history or a rollback."""
        return self.reason == "reset"


@runtime_checkable
class TurnStore(Protocol):
    """Threads and their turns, per tenant."""

    async def append(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[MessageIn | Turn | NativeItem],
        user_id: str | None = None,
        after_seq: int | None = None,
        created_at: Sequence[datetime] | None = None,
    ) -> list[Turn]:
        """Stores messages at the end of a thread, all or none; creates the thread if new.

        Validates every message first (`ValidationError` names the field; nothing is stored),
        and counts each turn's tokens with every tokenizer the thread was loaded with.
        Returns the stored turns with their seq. With `after_seq`, the turns after that seq
        are removed first, in the same transaction, and the memory state rolls back as for
        `pop_turns`: an edit of the history, or a regenerated answer. `messages` then
        continue the thread from that seq (and may be empty).

        `created_at`: when each message was said, for a host that imports a history (one
        timezone-aware datetime per message, in order, none in the future nor before the
        thread's turn before them; a `ValidationError` names the one that is not); None
        stamps every turn with the time it is stored.
        """
        ...

    async def pop_turns(self, *, tenant_id: str, thread_id: str) -> list[Turn]:
        """Removes the thread's newest unit: its newest turn, or, when that turn belongs to a
        tool exchange, the assistant turn with all its tool results (never an orphan).

        For "undo" and human-in-the-loop rewinds. When the memory state covers a removed turn,
        it rolls back, in the same transaction, to the newest version that covers only
        surviving turns (or to empty); versions that cover removed turns are dropped. Returns
        the removed turns, oldest first; [] for a thread without turns. `NotFoundError` for a
        missing thread (or another tenant's).
        """
        ...

    async def replace_turns(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[MessageIn | Turn | NativeItem],
        user_id: str | None = None,
    ) -> list[Turn]:
        """Makes `messages` the thread's turns, all or nothing; creates the thread if new.

        For clients that edit history and for wrappers that clear and re-add. The stored turns
        that equal the start of `messages` stay as they are (their counts too); the rest are
        removed and the new ones appended. The whole sequence is validated first (nothing
        changes on a `ValidationError`), and the memory state rolls back as for `pop_turns`
        when it covered a removed turn. Returns the thread's turns as stored now.
        """
        ...

    async def fork_thread(
        self, *, tenant_id: str, source_id: str, thread_id: str, through_seq: int
    ) -> Thread:
        """A new thread, `thread_id`, that starts as the source's first `through_seq` turns
        (verbatim, with their counts), its memory the source's newest summary version that
        covers only those turns: for a conversation that parts from another one where they
        differ. `NotFoundError` for a missing source (or another tenant's), `ConflictError`
        when `thread_id` exists already.
        """
        ...

    async def delete_thread(self, *, tenant_id: str, thread_id: str) -> None:
        """Deletes the thread and everything of it: turns, counts, summary and its versions,
        the update lease, the conversation's agent-memory document (not the user's), its
        stored responses and chat completions.

        For "delete my conversation" and data-protection requests; unlike a reset, nothing of
        the thread remains. `NotFoundError` for a missing thread (or another tenant's).
        """
        ...

    async def get_thread(self, *, tenant_id: str, thread_id: str) -> Thread:
        """The thread, or `NotFoundError`."""
        ...

    async def list_threads(
        self, *, tenant_id: str, limit: int = 50, offset: int = 0
    ) -> list[Thread]:
        """The tenant's threads, most recently updated first."""
        ...

    async def list_turns(
        self, *, tenant_id: str, thread_id: str, after_seq: int = 0, limit: int = 100
    ) -> list[Turn]:
        """A page of a thread's turns, oldest first, from `after_seq` on."""
        ...

    async def read_tail(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        tokenizer: Tokenizer,
        limit: int,
        before_seq: int | None = None,
        tokens: int | None = None,
    ) -> Tail:
        """The newest `limit` turns before `before_seq` (all when None), oldest first.

        With `tokens`, no more than it takes to pass that many tokens: the newest turns
        through the first whose counts add up past it (a window's read, sized by the budget
        and not by a guess of the turns' length). Fewer when the thread is shorter or some
        turn was not counted yet; a caller that needs more reads further back.

        Reads newest first through the primary key, so its cost does not grow with the
        thread's length. Counts come from the stored cache; a turn not yet counted with this
        tokenizer is counted once and the count stored, and the tokenizer is registered on the
        thread so that later appends count with it too.
        """
        ...

    async def aclose(self) -> None:
        """Closes connections; the store is unusable afterwards."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class TurnSearchStore(Protocol):
    """A store that finds a thread's turns by their words (recall): the SQL stores, through
    SQLite's FTS5 and PostgreSQL's text search, kept in step with the turns as they are
    written."""

    async def search_turns(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        query: str,
        before_seq: int | None = None,
        limit: int = 20,
    ) -> list[list[Turn]]:
        """The units whose turns best match the words of `query`, the best first, each whole
        (a call with its results) and oldest turn first: at most `limit` matching turns'
        units, of those before `before_seq` (all when None). A turn matches when it has any
        of the query's words (stemmed, the commonest English words left out); [] when the
        query has no such word or nothing matches.

        Scoped to the tenant's thread: `NotFoundError` for an unknown thread or another
        tenant's. A search through the database's index: its cost does not grow with the
        thread's length but with the matches of its words.
        """
        ...

    async def turn_days(
        self, *, tenant_id: str, thread_id: str, first_seq: int, last_seq: int
    ) -> list[Turn]:
        """The first turn of each day (UTC) among the thread's turns `first_seq`..`last_seq`,
        oldest first: when the stretches of a window were written. `NotFoundError` for an
        unknown thread or another tenant's."""
        ...


@runtime_checkable
class TurnsAtStore(Protocol):
    """A store that reads chosen turns of a thread in one trip: the turns whose large files a
    window read left in the store (`CountedTurn.held`), read whole when the request sends
    them."""

    async def turns_at(self, *, tenant_id: str, thread_id: str, seqs: Sequence[int]) -> list[Turn]:
        """The thread's turns at `seqs` (those it has), oldest first, with their items.
        `NotFoundError` for an unknown thread or another tenant's."""
        ...


class MemoryStateStore(Protocol):
    """A thread's memory state (summary and facts), its versions and its update lease."""

    async def get_memory_state(self, *, tenant_id: str, thread_id: str) -> WorkingMemoryState:
        """The thread's memory state; the empty state when none was written."""
        ...

    async def write_memory_state(
        self, *, tenant_id: str, thread_id: str, write: StateWrite
    ) -> WorkingMemoryState:
        """Writes a new version of the state if the stored version is `write.expected_version`.

        One transaction: the state and its history row (a reset also purges the earlier
        versions). `ConflictError` when another writer got there first; nothing is written
        then.
        """
        ...

    async def list_memory_states(
        self, *, tenant_id: str, thread_id: str, limit: int = 20
    ) -> list[WorkingMemoryState]:
        """The state's versions, newest first (the history of summaries)."""
        ...

    async def claim_thread(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        """Takes the thread's ask lock for `owner` unless another holds an unexpired one (the
        thread need not exist yet): one question answered at a time, across processes."""
        ...

    async def renew_thread(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        """Extends `owner`'s ask lock; False when `owner` holds it no more."""
        ...

    async def release_thread(self, *, tenant_id: str, thread_id: str, owner: str) -> None:
        """Gives the ask lock back, if `owner` still holds it."""
        ...

    async def read_memory(
        self, *, tenant_id: str, thread_id: str, versions: int = 20
    ) -> tuple[Thread, WorkingMemoryState, list[WorkingMemoryState]]:
        """The thread, its memory state and the state's newest `versions` versions (newest
        first), read from one snapshot. `NotFoundError` for a missing thread."""
        ...

    async def claim_memory_update(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        """Takes the thread's update lease for `owner` unless another holds an unexpired one.

        Single flight across processes: of two updaters of one thread, one gets True. The
        lease expires after `ttl_seconds`, so a crashed updater never blocks a thread for good.
        """
        ...

    async def renew_memory_update(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        """Extends `owner`'s lease to `ttl_seconds` from now; False when `owner` holds it no
        more (it expired and another updater took it)."""
        ...

    async def release_memory_update(self, *, tenant_id: str, thread_id: str, owner: str) -> None:
        """Gives the lease back, if `owner` still holds it."""
        ...


@runtime_checkable
class PooledStore(Protocol):
    """A store that reaches its database through a pool of connections (PostgreSQL's), and
    says how the pool is doing: for the service's metrics."""

    def pool_stats(self) -> Mapping[str, int]:
        """The pool's figures now: connections open (``pool_size``), idle
        (``pool_available``) and at most (``pool_max``), requests waiting
        (``requests_waiting``); and since the store opened, requests (``requests_num``), the
        ms they waited (``requests_wait_ms``), those that got none (``requests_errors``: in
        time, or before their task was cancelled), connections given back broken
        (``returns_bad``) and lost (``connections_lost``). A counter not moved yet may be
        missing."""
        ...


@runtime_checkable
class ThreadStore(TurnStore, MemoryStateStore, Protocol):
    """Threads, their turns and their memory state: what `WorkingMemory` needs."""


@runtime_checkable
class Store(ThreadStore, DocumentStore, ApiKeyStore, ResponseStore, CompletionStore, Protocol):
    """Everything the gateway and the service keep: what `open_store` returns."""


@dataclass(frozen=True, slots=True)
class Claim:
    """An ask lock's first trip (`AskLockStore.claim_and_open`)."""

    taken: bool
    """Whether the lock was taken (else it is another asker's)."""
    tail: Tail | None
    """The thread's newest turns, read after the lock was taken (None: no thread yet, or the
    lock was not taken)."""
    opened: list[Turn] = field(default_factory=list)
    """The turns the thread was opened with in the same trip (empty: none, as when the thread
    had turns already)."""


@runtime_checkable
class AskLockStore(Protocol):
    """A store that folds a thread's ask lock into an ask's first read and last write, a
    trip each (the SQL stores: a PostgreSQL pipeline or statement, a SQLite transaction).
    Optional: the functions `claim_and_open` and `append_and_release` do the same in
    two steps on any other `ThreadStore`."""

    async def claim_and_open(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        owner: str,
        ttl_seconds: float,
        tokenizer: Tokenizer,
        limit: int,
        window: tuple[int, int | None] | None = None,
        opening: Sequence[MessageIn | NativeItem] = (),
        user_id: str | None = None,
    ) -> Claim:
        """`claim_thread`, then, when it took the lock, `read_tail(limit=limit)` read after it
        (`Claim`). With `window` (the turns and the token goal of the caller's window's first
        read, `WorkingMemory.first_read`), a store whose reads are round trips
        reads that much with the lock (at least `limit` turns, or through the goal), so the
        window needs no read of its own. In the same trip, `opening` appended as the thread's
        first turns when the lock was taken and the thread has none yet: a new thread needs no
        trip of its own for its first turns. `opening` is validated as `append` validates it,
        before the lock is asked for (a `ValidationError`, nothing taken), when the store
        cannot tell that the thread has turns (the SQL stores remember the threads they saw:
        a thread seen with turns is sent no opening); messages that cannot open a thread at
        once (a tool result first) are not written, and `append` says why."""
        ...

    async def append_and_release(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[MessageIn | NativeItem],
        owner: str,
        user_id: str | None = None,
    ) -> list[Turn]:
        """`append` after the thread's newest turn, and `owner`'s ask lock given back in the
        same transaction: held still when the append fails."""
        ...


def locks_asks(store: ThreadStore) -> TypeGuard[AskLockStore]:
    """Whether `store` is an `AskLockStore`: asked on every ask, so answered once per class."""
    return implements(store, AskLockStore)


async def claim_and_open(
    store: ThreadStore,
    *,
    tenant_id: str,
    thread_id: str,
    owner: str,
    ttl_seconds: float,
    tokenizer: Tokenizer,
    limit: int,
    window: tuple[int, int | None] | None = None,
    opening: Sequence[MessageIn | NativeItem] = (),
    user_id: str | None = None,
) -> Claim:
    """`AskLockStore.claim_and_open` on any store: on another, the lock, then the read, and
    nothing opened (the caller appends)."""
    if locks_asks(store):
        return await store.claim_and_open(
            tenant_id=tenant_id,
            thread_id=thread_id,
            owner=owner,
            ttl_seconds=ttl_seconds,
            tokenizer=tokenizer,
            limit=limit,
            window=window,
            opening=opening,
            user_id=user_id,
        )
    if not await store.claim_thread(
        tenant_id=tenant_id, thread_id=thread_id, owner=owner, ttl_seconds=ttl_seconds
    ):
        return Claim(taken=False, tail=None)
    limit, tokens = with_window(limit, window)  # here the window's read would be a trip too
    try:
        tail = await store.read_tail(
            tenant_id=tenant_id,
            thread_id=thread_id,
            tokenizer=tokenizer,
            limit=limit,
            tokens=tokens,
        )
    except NotFoundError:
        return Claim(taken=True, tail=None)
    return Claim(taken=True, tail=tail)


def with_window(limit: int, window: tuple[int, int | None] | None) -> tuple[int, int | None]:
    """The turns and the token goal of an ask lock's read of `limit` turns that takes the
    window's first page too (`AskLockStore.claim_and_open`'s `window`)."""
    if window is None:
        return limit, None
    return max(limit, window[0]), window[1]


async def append_and_release(
    store: ThreadStore,
    *,
    tenant_id: str,
    thread_id: str,
    messages: Sequence[MessageIn | NativeItem],
    owner: str,
    user_id: str | None = None,
) -> list[Turn]:
    """`AskLockStore.append_and_release` on any store: in one trip where it can."""
    if locks_asks(store):
        return await store.append_and_release(
            tenant_id=tenant_id,
            thread_id=thread_id,
            messages=messages,
            owner=owner,
            user_id=user_id,
        )
    turns = await store.append(
        tenant_id=tenant_id, thread_id=thread_id, messages=messages, user_id=user_id
    )
    await store.release_thread(tenant_id=tenant_id, thread_id=thread_id, owner=owner)
    return turns


PAGE_LIMIT = 1_000
"""The most turns one `TurnStore.list_turns` call returns."""


async def read_turns_at(
    store: TurnStore, *, tenant_id: str, thread_id: str, seqs: Sequence[int]
) -> list[Turn]:
    """The stored turns at `seqs`, oldest first (`TurnsAtStore.turns_at`; a turn at a time
    from a store without it)."""
    if isinstance(store, TurnsAtStore):
        return await store.turns_at(tenant_id=tenant_id, thread_id=thread_id, seqs=seqs)
    turns: list[Turn] = []
    for seq in sorted(set(seqs)):
        turns += await store.list_turns(
            tenant_id=tenant_id, thread_id=thread_id, after_seq=seq - 1, limit=1
        )
    return [turn for turn in turns if turn.seq in seqs]


async def read_turns(
    store: TurnStore, *, tenant_id: str, thread_id: str, first: int, count: int
) -> list[Turn]:
    """The `count` stored turns from seq `first` on (fewer at the thread's end), with their
    items: a window's turns in their own formats (`WorkingMemoryLoad.seqs` is such a run),
    read a page of `PAGE_LIMIT` at a time."""
    turns: list[Turn] = []
    after = first - 1
    while len(turns) < count:
        page = await store.list_turns(
            tenant_id=tenant_id,
            thread_id=thread_id,
            after_seq=after,
            limit=min(PAGE_LIMIT, count - len(turns)),
        )
        turns += page
        if not page or page[-1].seq is None:
            break
        after = page[-1].seq
    return turns
