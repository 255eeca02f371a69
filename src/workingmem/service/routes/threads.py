"""Threads and what the gateway remembers of them.

    GET    /v1/threads?limit=20&offset=0             the tenant's threads, newest first
    GET    /v1/threads/{thread_id}/messages?after=0   the turns, oldest first, paged by seq
    GET    /v1/threads/{thread_id}/memory             summary, facts, working memory, window
    POST   /v1/threads/{thread_id}/memory/reset       forget (``?working_memory=true``: that too)

A thread of another tenant is answered exactly as a thread that does not exist (404).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from ..auth import Tenant
from ..params import ThreadIdPath
from ..schemas import (
    MessageList,
    MessageOut,
    ResetOut,
    ThreadList,
    ThreadMemoryOut,
    ThreadOut,
    WorkingMemoryOut,
)
from ..state import Services, get_services
from . import BUSY, ERRORS

__all__ = ["deletion", "load_thread_memory", "router"]

router = APIRouter(prefix="/v1/threads", tags=["threads"], responses=ERRORS)

MAX_PAGE = 100
MAX_OFFSET = 1_000_000_000


async def load_thread_memory(
    services: Services, *, tenant_id: str, thread_id: str, profile: str | None = None
) -> ThreadMemoryOut:
    """The thread's memory as the API and the page show it; the working memory is the
    conversation's, or (scope user) its user's."""
    gateway = services.gateway
    memory = await gateway.get_thread_memory(
        tenant_id=tenant_id, thread_id=thread_id, profile=profile
    )
    agent, working = gateway.agent_memory, None
    if agent is not None and agent.config.enabled:
        owner = {"conversation": thread_id, "user": memory.thread.user_id}[agent.config.scope]
        if owner is not None:
            document = await agent.get_working_memory_document(
                tenant_id=tenant_id, conversation_id=thread_id, user_id=memory.thread.user_id
            )
            working = WorkingMemoryOut.of(document, agent.get_working_memory_format())
    return ThreadMemoryOut.of(memory, working)


@router.get("", summary="The tenant's threads, most recently updated first")
async def list_threads(
    request: Request,
    tenant: Tenant,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> ThreadList:
    store = get_services(request).gateway.store
    threads = await store.list_threads(tenant_id=tenant, limit=limit + 1, offset=offset)
    more = len(threads) > limit
    return ThreadList(
        data=[ThreadOut.of(t) for t in threads[:limit]],
        has_more=more,
        next_offset=offset + limit if more else None,
    )


@router.get("/{thread_id:path}/messages", summary="A page of the thread's turns, oldest first")
async def list_messages(
    request: Request,
    tenant: Tenant,
    thread_id: ThreadIdPath,
    after: Annotated[int, Query(ge=0, le=2**53, description="The last seq already read")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> MessageList:
    store = get_services(request).gateway.store
    turns = await store.list_turns(
        tenant_id=tenant, thread_id=thread_id, after_seq=after, limit=limit + 1
    )
    more = len(turns) > limit
    page = turns[:limit]
    return MessageList(
        data=[MessageOut.of(t) for t in page],
        has_more=more,
        next_after=page[-1].seq if more and page else None,
    )


@router.get("/{thread_id:path}/memory", summary="What the gateway remembers of the thread")
async def get_memory(
    request: Request,
    tenant: Tenant,
    thread_id: ThreadIdPath,
    x_profile: Annotated[str | None, Header(alias="X-Profile")] = None,
) -> ThreadMemoryOut:
    return await load_thread_memory(
        get_services(request), tenant_id=tenant, thread_id=thread_id, profile=x_profile
    )


@router.post(
    "/{thread_id:path}/memory/reset",
    summary="Forget the thread's summary and facts (the turns stay)",
    responses=BUSY,
)
async def reset_memory(
    request: Request,
    tenant: Tenant,
    thread_id: ThreadIdPath,
    working_memory: Annotated[
        bool, Query(description="Also erase the conversation's working memory")
    ] = False,
) -> ResetOut:
    """The turns stay; the summary and facts are forgotten, and not rebuilt from the turns
    so far. With ``working_memory=true`` the conversation's working memory goes too. A POST:
    the memory view (``GET .../memory``) still answers afterwards, showing what is left."""
    gateway = get_services(request).gateway
    reset = await gateway.reset_thread_memory(
        tenant_id=tenant, thread_id=thread_id, working_memory=working_memory
    )
    return ResetOut(thread_id=thread_id, working_memory_cleared=reset.agent_memory_cleared)


router.add_api_route(
    "/{thread_id:path}/memory",
    reset_memory,
    methods=["DELETE"],
    include_in_schema=False,  # the view stays readable, which a DELETE in the document denies
)
"""The earlier spelling of the reset, kept for the clients that use it."""


deletion = APIRouter(prefix="/v1/threads", tags=["threads"], responses=ERRORS)
"""The thread's own DELETE: its path matches every path under a thread, so the app includes
this router after every other that serves one (memory, messages, working memory)."""


@deletion.delete(
    "/{thread_id:path}",
    status_code=204,
    summary="Delete the thread and everything of it (turns, memory, its agent memory)",
)
async def delete_thread(request: Request, tenant: Tenant, thread_id: ThreadIdPath) -> Response:
    """For "delete my conversation" and data-protection requests: unlike ``DELETE .../memory``
    (which forgets the summary and keeps the turns), nothing of the thread remains."""
    await get_services(request).gateway.delete_thread(tenant_id=tenant, thread_id=thread_id)
    return Response(status_code=204)
