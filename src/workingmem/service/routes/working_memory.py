"""The agent's working memory (spec 003), read and written by the application.

    GET|PUT|DELETE /v1/threads/{thread_id}/working-memory   scope "conversation"
    GET|PUT|DELETE /v1/users/{user_id}/working-memory       scope "user"

404 when the server has no agent working memory configured, or when its scope is the other one
(the message names the right endpoint): the OpenAPI document lists only the endpoints served.
A PUT is validated against the mode (template, schema, free-form): invalid content is a 400
and changes nothing; with `expected_version`, a concurrent write is a 409.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request

from ...agent_memory import AgentMemory
from ..auth import Tenant
from ..errors import ApiError
from ..params import ThreadIdPath, UserIdPath
from ..schemas import WorkingMemoryOut, WorkingMemoryPut, WorkingMemoryUpdateOut
from ..state import get_services
from . import BUSY, ERRORS

__all__ = ["router"]

router = APIRouter(tags=["working memory"], responses=ERRORS)

Scope = Literal["conversation", "user"]
_PATHS = {
    "conversation": "/v1/threads/{thread_id}/working-memory",
    "user": "/v1/users/{user_id}/working-memory",
}


def _agent(request: Request, scope: Scope) -> AgentMemory:
    agent = get_services(request).gateway.agent_memory
    if agent is None:
        raise ApiError(
            404,
            "this server has no agent working memory configured "
            "(ServiceSettings.agent_memory is None)",
            code="working_memory_not_configured",
            type="not_found_error",
        )
    if agent.config.scope != scope:  # not served here: the OpenAPI document omits it too
        raise ApiError(
            404,
            f"this server's working memory is per {agent.config.scope}: use "
            f"{_PATHS[agent.config.scope]}",
            code="working_memory_scope",
            type="not_found_error",
        )
    return agent


def _ids(scope: Scope, owner: str) -> dict[str, str]:
    return {"conversation_id": owner} if scope == "conversation" else {"user_id": owner}


async def _get(request: Request, tenant: str, scope: Scope, owner: str) -> WorkingMemoryOut:
    """The document; 404 while it has no content (never written, or cleared): a DELETE
    removes it, as HTTP means (its versions stay for a roll back unless erased)."""
    agent = _agent(request, scope)
    document = await agent.get_working_memory_document(tenant_id=tenant, **_ids(scope, owner))
    if document.content is None:
        raise ApiError(
            404,
            f"no working memory for {scope} {owner!r} (never written, or cleared): PUT one",
            code="working_memory_empty",
            type="not_found_error",
        )
    return WorkingMemoryOut.of(document, agent.get_working_memory_format())


async def _put(
    request: Request, tenant: str, scope: Scope, owner: str, body: WorkingMemoryPut
) -> WorkingMemoryUpdateOut:
    agent = _agent(request, scope)
    update = await agent.update_working_memory(
        tenant_id=tenant,
        content=body.content,
        replace=body.replace,
        expected_version=body.expected_version,
        **_ids(scope, owner),
    )
    shown = WorkingMemoryOut.of(update.document, agent.get_working_memory_format())
    return WorkingMemoryUpdateOut(
        **shown.model_dump(), changed=update.changed, ignored_nulls=list(update.ignored_nulls)
    )


async def _delete(
    request: Request, tenant: str, scope: Scope, owner: str, erase_history: bool
) -> WorkingMemoryOut:
    agent = _agent(request, scope)
    ids = _ids(scope, owner)
    await agent.clear_working_memory(tenant_id=tenant, erase_history=erase_history, **ids)
    document = await agent.get_working_memory_document(tenant_id=tenant, **ids)
    return WorkingMemoryOut.of(document, agent.get_working_memory_format())  # its version


EraseHistory = Annotated[
    bool, Query(description="Also delete every kept version (no roll back possible)")
]


@router.get(
    "/v1/threads/{thread_id:path}/working-memory", summary="A conversation's working memory"
)
async def get_thread_working_memory(
    request: Request, tenant: Tenant, thread_id: ThreadIdPath
) -> WorkingMemoryOut:
    return await _get(request, tenant, "conversation", thread_id)


@router.put(
    "/v1/threads/{thread_id:path}/working-memory",
    summary="Update a conversation's working memory",
    responses=BUSY,
)
async def put_thread_working_memory(
    request: Request, tenant: Tenant, thread_id: ThreadIdPath, body: WorkingMemoryPut
) -> WorkingMemoryUpdateOut:
    return await _put(request, tenant, "conversation", thread_id, body)


@router.delete(
    "/v1/threads/{thread_id:path}/working-memory",
    summary="Clear a conversation's working memory",
    responses=BUSY,
)
async def delete_thread_working_memory(
    request: Request, tenant: Tenant, thread_id: ThreadIdPath, erase_history: EraseHistory = False
) -> WorkingMemoryOut:
    return await _delete(request, tenant, "conversation", thread_id, erase_history)


@router.get("/v1/users/{user_id:path}/working-memory", summary="A user's working memory")
async def get_user_working_memory(
    request: Request, tenant: Tenant, user_id: UserIdPath
) -> WorkingMemoryOut:
    return await _get(request, tenant, "user", user_id)


@router.put(
    "/v1/users/{user_id:path}/working-memory",
    summary="Update a user's working memory",
    responses=BUSY,
)
async def put_user_working_memory(
    request: Request, tenant: Tenant, user_id: UserIdPath, body: WorkingMemoryPut
) -> WorkingMemoryUpdateOut:
    return await _put(request, tenant, "user", user_id, body)


@router.delete(
    "/v1/users/{user_id:path}/working-memory",
    summary="Clear a user's working memory",
    responses=BUSY,
)
async def delete_user_working_memory(
    request: Request, tenant: Tenant, user_id: UserIdPath, erase_history: EraseHistory = False
) -> WorkingMemoryOut:
    return await _delete(request, tenant, "user", user_id, erase_history)
