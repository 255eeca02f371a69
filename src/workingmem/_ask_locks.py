"""One ask at a time per thread, across processes, and the thread an ask answers when the
request names none.

    locks = AskLocks(store, busy_wait_seconds=60)
    async with locks.conversation(tenant_id, thread_id, ...) as (thread_id, lock):
        ...   # the thread's newest turns are lock.newest; the answer's append gives it back

An asker holds its thread's lock from the user turn's append to the answer's, so every answer
is built with its own question newest and stored right after it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

from ._ask_request import AskRequest
from .conversations import continues, extends, family_of, find_conversation
from .errors import ConflictError
from .leases import keep_renewed
from .placement import NewestRead, first_limit
from .stores.base import Store, claim_and_open
from .tokens import Tokenizer
from .types import MessageIn, NativeItem, Turn

__all__ = ["ASK_LOCK_SECONDS", "FIND_ATTEMPTS", "AskLock", "AskLocks", "Opening"]

FIND_ATTEMPTS = 8
"""How often a conversation found without an id is looked for again when another request of
its family moved it between the finding and the lock."""

REMEMBERED_FAMILIES = 4096
"""The conversations found without an id that this process remembers (the newest)."""
ASK_LOCK_SECONDS = 30.0
"""How long a thread's ask lock lasts unless renewed (every third of it while an answer is
made): the longest a crashed asker keeps a thread from being answered."""


@dataclass(slots=True)
class AskLock:
    """A thread's ask lock as held by one ask: its owner, the read of the thread made with
    it, and whether the answer's append gave it back."""

    owner: str
    newest: NewestRead
    opened: list[Turn] = field(default_factory=list)
    """The request's turns, when the lock's trip opened the (new) thread with them."""
    renewing: asyncio.Task[None] | None = None
    released: bool = False

    def stop_renewing(self) -> None:
        """Nothing to renew once the lock is being given back."""
        if self.renewing is not None:
            self.renewing.cancel()


@dataclass(frozen=True, slots=True)
class Opening:
    """A request's turns for the ask lock's trip to open a new thread with: what `place`
    would append to a thread without turns (all of them)."""

    items: Sequence[MessageIn | NativeItem]
    user_id: str | None

    @classmethod
    def of(
        cls, request: AskRequest, user_id: str | None, expect_turns: int | None
    ) -> Opening | None:
        """None when the ask could not start a thread with the request's turns: it has none,
        or it expects a thread that has turns (`expect_turns`)."""
        if not request.items or expect_turns:
            return None
        return cls(request.items, user_id)


class AskLocks:
    """The ask locks of one gateway's threads: in-process askers queue on an asyncio lock,
    other processes' on the store's thread lock."""

    def __init__(self, store: Store, *, busy_wait_seconds: float) -> None:
        self.store = store
        self.busy_wait_seconds = busy_wait_seconds
        self._local: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        """The in-process locks of the threads being asked now (gone with their askers)."""
        self._first_members: dict[tuple[str, str], None] = {}
        """The (tenant, family) pairs whose last request went to their first member, oldest
        first (`_remember`)."""

    @asynccontextmanager
    async def conversation(
        self,
        tenant_id: str,
        thread_id: str | None,
        user_id: str | None,
        system_prompt: str | None,
        request: AskRequest,
        tokenizer: Tokenizer,
        session: str | None = None,
        opening: Opening | None = None,
        window: tuple[int, int | None] | None = None,
    ) -> AsyncIterator[tuple[str, AskLock]]:
        """The thread to answer, its ask lock held: `thread_id`, or the conversation found by
        how the request opens. Found, it is checked again under its lock, since another
        request of the family may have moved it meanwhile; a fork that another request made
        first is found again. Bounded: a family this busy is a `ConflictError` (409). With
        it, the lock, and the read of the thread's newest turns made with it; `thread_id`
        new, the thread opened with `opening` in the same trip (a found conversation is
        checked before anything is written to it). `window`: the turns and tokens the lock's
        read takes beyond placement's, for the window to start from."""
        views = request.views
        limit = first_limit(views)  # placing reads this first
        if thread_id is not None:
            async with self.hold(tenant_id, thread_id, tokenizer, limit, opening, window) as lock:
                yield thread_id, lock
            return
        # A conversation's next request most often extends its family's first member, where
        # its last request went: then that member is checked first, under its lock, against
        # the lock's read (no read of its opening before the lock), as finding would check it
        # first. Any other request (a fork, a trimmed history, a new conversation, one that
        # went elsewhere last) is found below.
        family = family_of(
            tenant_id=tenant_id,
            user_id=user_id,
            system_prompt=system_prompt,
            first=views[0],
            session=session,
        )
        if (tenant_id, family) in self._first_members:
            async with self.hold(tenant_id, family, tokenizer, limit) as lock:
                read = lock.newest
                if read.tail is not None and await extends(
                    self.store, tenant_id=tenant_id, thread_id=family, request=views, read=read
                ):
                    yield family, lock
                    return
        for _ in range(FIND_ATTEMPTS):
            found = await find_conversation(
                self.store,
                tenant_id=tenant_id,
                user_id=user_id,
                system_prompt=system_prompt,
                request=views,
                session=session,
                tokenizer=tokenizer,
                family=family,
            )
            if found.fork is not None:
                source, through = found.fork
                try:
                    await self.store.fork_thread(
                        tenant_id=tenant_id,
                        source_id=source,
                        thread_id=found.thread_id,
                        through_seq=through,
                    )
                except ConflictError:
                    continue  # another request forked it first: find again
            async with self.hold(tenant_id, found.thread_id, tokenizer, limit) as lock:
                if await continues(
                    self.store,
                    tenant_id=tenant_id,
                    found=found,
                    request=views,
                    tokenizer=tokenizer,
                    read=lock.newest,
                ):
                    self._remember(tenant_id, family, first=found.thread_id == family)
                    yield found.thread_id, lock
                    return
        raise ConflictError("this conversation is busy in another request; ask again")

    def _remember(self, tenant_id: str, family: str, *, first: bool) -> None:
        """Whether a request of `family` went to its first member, for its next request
        (`conversation`); the newest `REMEMBERED_FAMILIES` families."""
        key = (tenant_id, family)
        self._first_members.pop(key, None)
        if first:
            self._first_members[key] = None
            if len(self._first_members) > REMEMBERED_FAMILIES:
                del self._first_members[next(iter(self._first_members))]

    @asynccontextmanager
    async def hold(
        self,
        tenant_id: str,
        thread_id: str,
        tokenizer: Tokenizer,
        limit: int,
        opening: Opening | None = None,
        window: tuple[int, int | None] | None = None,
    ) -> AsyncIterator[AskLock]:
        """The thread's ask lock, renewed while held, so a crashed holder frees it within
        `ASK_LOCK_SECONDS`. A thread busy for longer than `busy_wait_seconds` is a
        `ConflictError` (409). The thread's `limit` newest turns are read with the lock, in
        the same trip where the store can (with `window`, as many more as the window's first
        read would take, where that saves a trip), and a new thread is opened with
        `opening`'s turns there too (`claim_and_open`). The answer's append may give the lock
        back (`AskLock.released`); else it is given back here."""
        local = self._local.setdefault((tenant_id, thread_id), asyncio.Lock())
        # The lock lives while an asker holds a reference to it (a weak map).
        async with local:
            owner = uuid.uuid4().hex
            deadline = time.monotonic() + self.busy_wait_seconds
            delay = 0.01
            ids = {"tenant_id": tenant_id, "thread_id": thread_id, "owner": owner}
            while True:
                try:
                    claim = await claim_and_open(
                        self.store,
                        **ids,
                        ttl_seconds=ASK_LOCK_SECONDS,
                        tokenizer=tokenizer,
                        limit=limit,
                        window=window,
                        opening=opening.items if opening is not None else (),
                        user_id=opening.user_id if opening is not None else None,
                    )
                except BaseException:  # the lock may be taken (the read failed after it)
                    await asyncio.shield(self.store.release_thread(**ids))
                    raise
                if claim.taken:
                    break
                if time.monotonic() > deadline:
                    raise ConflictError(
                        f"thread {thread_id!r} is busy answering another message; "
                        "ask again once that answer is in"
                    )
                await asyncio.sleep(delay)  # another process holds it: a short backoff
                delay = min(delay * 2, 0.25)
            lock = AskLock(owner, NewestRead(claim.tail), claim.opened)
            lock.renewing = renewing = asyncio.create_task(
                keep_renewed(
                    lambda: self.store.renew_thread(
                        tenant_id=tenant_id,
                        thread_id=thread_id,
                        owner=owner,
                        ttl_seconds=ASK_LOCK_SECONDS,
                    ),
                    seconds=ASK_LOCK_SECONDS,
                    what=f"ask lock of thread {thread_id!r}",
                )
            )
            try:
                yield lock
            finally:
                renewing.cancel()
                with suppress(asyncio.CancelledError):
                    await renewing
                if not lock.released:
                    await asyncio.shield(self.store.release_thread(**ids))
