"""Conversations found without an id, for clients that know nothing of threads.

    found = await find_conversation(store, tenant_id="t1", user_id=None, system_prompt=None,
                                    request=views)
    found.thread_id, found.fork      # the thread to continue, or the one to fork it from

A chat front end resends the whole history on every call and names no thread. Its
conversation is known by how it opens: the tenant, the user, the system prompt and the first
message make a *family* (``conv-<digest>``); every conversation that opens the same way is a
member (``conv-<digest>``, ``conv-<digest>-1``, ...). A request continues the member whose
turns it extends. Two chats that open with the same words share a member while they say the
same; the first request that parts from it (another first answer, an edited turn, a
regenerated answer) forks a member of its own at the point where they differ, so neither ever
sees the other's later turns. Lookups are by exact id; a family is as long as its forks.

A client that trims its history from the front, to a budget of its own, soon resends a request
that no longer opens as its conversation did. Its conversation is known by the newest turn the
client saw: after each answer the conversation is marked with a key of its opening's user,
system prompt and session and of that newest turn (`newest_key`), and a request that starts no
member of its family continues the conversation of its last answer's key, when the thread's
newest turns are the request's up to that answer (the overlap rule's first case).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from ._protocols import implements
from .errors import NotFoundError
from .messages import common_start, said
from .placement import NewestRead, ends_with, opening
from .stores.base import TurnStore
from .stores.responses import ResponseStore
from .tokens import Tokenizer
from .types import MessageIn

__all__ = [
    "FAMILY_PREFIX",
    "Found",
    "continues",
    "extends",
    "family_of",
    "find_conversation",
    "keeps_keys",
    "newest_key",
]

FAMILY_PREFIX = "conv-"


@dataclass(frozen=True, slots=True)
class Found:
    """The thread a request without an id continues."""

    thread_id: str
    fork: tuple[str, int] | None = None
    """(source thread, seq): the thread is new, and starts as the source's turns up to seq."""
    trimmed: int | None = None
    """The request's first `trimmed` turns are the thread's newest: a history its client
    trimmed from the front (`newest_key`)."""


def family_of(
    *,
    tenant_id: str,
    user_id: str | None,
    system_prompt: str | None,
    first: MessageIn,
    session: str | None = None,
) -> str:
    """The id of the first member of the family a conversation opening so belongs to; a
    client's own name for its session (a Responses ``prompt_cache_key``) makes a family of its
    own, so two sessions that open alike never share a member."""
    return FAMILY_PREFIX + _digest(tenant_id, user_id, system_prompt, first, session)


def newest_key(
    *,
    tenant_id: str,
    user_id: str | None,
    system_prompt: str | None,
    newest: MessageIn,
    session: str | None = None,
) -> str:
    """The key a conversation found without an id is marked with after an answer, `newest`
    its newest client-visible turn (the answer): a request trimmed from the front finds it
    by its last answer."""
    return NEWEST_PREFIX + _digest(tenant_id, user_id, system_prompt, newest, session)


MIN_TRIMMED = 4
"""The fewest turns a trimmed history must share with a conversation's newest to continue it
(two exchanges): two conversations the gateway cannot tell apart share a thread, and one
exchange alike ("Hi" and its answer) is too common to say so."""

NEWEST_PREFIX = "newest-"
"""Its keys' prefix: they share the store's keys of a conversation's newest turn with the
Responses API's awaiting conversations (`service.sessions`), whose keys are bare digests."""


def _digest(
    tenant_id: str,
    user_id: str | None,
    system_prompt: str | None,
    message: MessageIn,
    session: str | None,
) -> str:
    parts = [tenant_id, user_id, system_prompt, said(message)]
    if session is not None:
        parts.append(session)
    key = json.dumps(parts, ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


async def find_conversation(
    store: TurnStore,
    *,
    tenant_id: str,
    user_id: str | None,
    system_prompt: str | None,
    request: Sequence[MessageIn],
    session: str | None = None,
    tokenizer: Tokenizer | None = None,
    family: str | None = None,
) -> Found:
    """The member of the request's family it continues; else, with `tokenizer`, the
    conversation it continues as a history trimmed from the front (`newest_key`); else the
    fork it starts. Check it again under the thread's ask lock (`continues`):
    another request may have moved it meanwhile. `family`: its id (`family_of`), when the
    caller has it."""
    family = family or family_of(
        tenant_id=tenant_id,
        user_id=user_id,
        system_prompt=system_prompt,
        first=request[0],
        session=session,
    )
    best: tuple[int, str, int] | None = None  # (turns in common, member, seq they end at)
    members = 0
    while True:
        member = family if members == 0 else f"{family}-{members}"
        try:
            turns = await opening(store, tenant_id, member, len(request) + 1)
        except NotFoundError:
            break
        members += 1
        common = _common(turns, request)
        if common == len(turns):
            return Found(member)  # the request extends it (or repeats it: a retry)
        if best is None or common > best[0]:
            best = (common, member, turns[common - 1][0] if common else 0)
    if tokenizer is not None:  # before a fork: a trimmed history may open like another
        trimmed = await _trimmed(
            store,
            tenant_id=tenant_id,
            user_id=user_id,
            system_prompt=system_prompt,
            session=session,
            request=request,
            tokenizer=tokenizer,
        )
        if trimmed is not None:
            return trimmed
    if best is None:
        return Found(family)
    return Found(f"{family}-{members}", fork=(best[1], best[2]))


async def _trimmed(
    store: TurnStore,
    *,
    tenant_id: str,
    user_id: str | None,
    system_prompt: str | None,
    session: str | None,
    request: Sequence[MessageIn],
    tokenizer: Tokenizer,
) -> Found | None:
    """The conversation whose newest turns are the request's up to its last answer, found by
    that answer's key; None when there is none (or the store keeps no keys)."""
    answers = [i for i, message in enumerate(request) if message.get("role") == "assistant"]
    keys: object = store  # narrowed alone: the store stays a TurnStore below
    if not answers or answers[-1] + 1 < MIN_TRIMMED or not keeps_keys(keys):
        return None
    through = answers[-1] + 1
    key = newest_key(
        tenant_id=tenant_id,
        user_id=user_id,
        system_prompt=system_prompt,
        newest=request[through - 1],
        session=session,
    )
    thread_id = await keys.find_awaiting(tenant_id=tenant_id, key=key)
    if thread_id is None:
        return None
    found = Found(thread_id, trimmed=through)
    continued = await continues(
        store, tenant_id=tenant_id, found=found, request=request, tokenizer=tokenizer
    )
    return found if continued else None


def keeps_keys(store: object) -> TypeGuard[ResponseStore]:
    """Whether `store` keeps a conversation's newest-turn key (a `ResponseStore`): asked on
    every ask without an id, so answered once per class."""
    return implements(store, ResponseStore)


async def extends(
    store: TurnStore,
    *,
    tenant_id: str,
    thread_id: str,
    request: Sequence[MessageIn],
    read: NewestRead | None = None,
) -> bool:
    """The request extends the thread (or repeats it, or the thread is not there yet).
    `read`: the thread's newest turns, read already with its ask lock (`opening`: the whole
    thread, as they are for a request that extends it, is not read again)."""
    try:
        turns = await opening(store, tenant_id, thread_id, len(request) + 1, read, request)
    except NotFoundError:
        return True
    return _common(turns, request) == len(turns)


async def continues(
    store: TurnStore,
    *,
    tenant_id: str,
    found: Found,
    request: Sequence[MessageIn],
    tokenizer: Tokenizer,
    read: NewestRead | None = None,
) -> bool:
    """The request still continues the thread it was found on: it extends it (`extends`),
    or, trimmed, its first turns are still the thread's newest."""
    if found.trimmed is None:
        return await extends(
            store, tenant_id=tenant_id, thread_id=found.thread_id, request=request, read=read
        )
    return await ends_with(
        store,
        tenant_id=tenant_id,
        thread_id=found.thread_id,
        turns=request[: found.trimmed],
        tokenizer=tokenizer,
        read=read,
    )


def _common(thread: Sequence[tuple[int, MessageIn]], request: Sequence[MessageIn]) -> int:
    return common_start([message for _, message in thread], request)
