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
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import NotFoundError
from .messages import common_start, said
from .placement import NewestRead, opening
from .stores.base import TurnStore
from .types import MessageIn

__all__ = ["FAMILY_PREFIX", "Found", "extends", "family_of", "find_conversation"]

FAMILY_PREFIX = "conv-"


@dataclass(frozen=True, slots=True)
class Found:
    """The thread a request without an id continues."""

    thread_id: str
    fork: tuple[str, int] | None = None
    """(source thread, seq): the thread is new, and starts as the source's turns up to seq."""


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
    parts = [tenant_id, user_id, system_prompt, said(first)]
    if session is not None:
        parts.append(session)
    key = json.dumps(parts, ensure_ascii=False)
    return FAMILY_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


async def find_conversation(
    store: TurnStore,
    *,
    tenant_id: str,
    user_id: str | None,
    system_prompt: str | None,
    request: Sequence[MessageIn],
    session: str | None = None,
) -> Found:
    """The member of the request's family it continues, or the fork it starts. Check it again
    under the member's ask lock (`extends`): another request may have moved it meanwhile."""
    family = family_of(
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
    if best is None:
        return Found(family)
    return Found(f"{family}-{members}", fork=(best[1], best[2]))


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
        turns = await opening(store, tenant_id, thread_id, len(request) + 1, read)
    except NotFoundError:
        return True
    return _common(turns, request) == len(turns)


def _common(thread: Sequence[tuple[int, MessageIn]], request: Sequence[MessageIn]) -> int:
    return common_start([message for _, message in thread], request)
