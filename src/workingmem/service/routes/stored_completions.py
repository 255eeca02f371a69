"""``/v1/chat/completions/{id}``: the chat completions a tenant asked the gateway to keep.

    completion = client.chat.completions.create(
        model="gpt-4o-mini", messages=[...], store=True, metadata={"topic": "trip"}
    )
    client.chat.completions.retrieve(completion.id)
    client.chat.completions.list(metadata={"topic": "trip"}, order="desc")
    client.chat.completions.update(completion.id, metadata={"topic": "done"})
    client.chat.completions.messages.list(completion.id)
    client.chat.completions.delete(completion.id)

OpenAI's stored chat completions, kept by the gateway per tenant (`CompletionStore`): the
completion as it was returned, with its metadata, and the request's messages as the client
sent them. They go with their thread: forgetting a thread forgets its completions.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict

from ...errors import NotFoundError
from ...gateway import AskResult
from ...stores.completions import CompletionStore, StoredCompletion
from ..auth import Tenant
from ..chat_response import completion_body
from ..chat_schemas import ChatCompletionRequest, Metadata
from ..errors import ApiError
from ..params import AfterQuery, CompletionIdPath, LimitQuery
from ..state import Services, get_services
from . import ERRORS

__all__ = ["Keeper", "completions_of", "router"]

router = APIRouter(prefix="/v1/chat/completions", tags=["chat"], responses=ERRORS)

AscendingQuery = Annotated[
    Literal["asc", "desc"], Query(description="Oldest first (the default) or newest first")
]
_METADATA_QUERY = ("metadata[", "]")
"""A list's metadata filter: ``metadata[key]=value``, as OpenAI's SDKs send it."""


class CompletionUpdateRequest(BaseModel):
    """``POST /v1/chat/completions/{id}``: its metadata, the only thing of it that changes."""

    model_config = ConfigDict(extra="forbid")
    metadata: Metadata | None
    """The new metadata (null: none)."""


class Keeper:
    """Keeps a completion asked for with ``store: true``: the body the client gets, under the
    gateway's own id (the upstream's may repeat, and names nothing here), with the request's
    metadata and its messages as the client sent them."""

    def __init__(
        self,
        services: Services,
        tenant: str,
        completion_id: str,
        created: int,
        body: ChatCompletionRequest,
        request: Request,
        custom: frozenset[str] = frozenset(),
    ) -> None:
        self._store = completions_of(services)  # before the ask: a store without them is a 404
        self._tenant, self._request = tenant, request
        self._completion_id, self._created = completion_id, created
        self._metadata = dict(body.metadata or {})
        self._custom = custom  # the request's custom tools (`completion_body`)

    async def __call__(self, result: AskResult) -> dict[str, Any]:
        answer = completion_body(
            result,
            completion_id=self._completion_id,
            created=self._created,
            custom=self._custom,
        )
        answer["id"] = self._completion_id
        sent = await self._request.json()  # as the client sent it (parsed once, by FastAPI)
        await self._store.put_completion(
            tenant_id=self._tenant,
            completion=StoredCompletion(
                completion_id=self._completion_id,
                thread_id=result.thread_id,
                model=str(answer.get("model") or result.model),
                body=answer,
                metadata=self._metadata,
            ),
            messages=sent["messages"],
        )
        return answer


def completions_of(services: Services) -> CompletionStore:
    """The store of chat completions: the gateway's, when it keeps them."""
    store = services.gateway.store
    if not isinstance(store, CompletionStore):
        raise ApiError(404, "this server's store keeps no chat completions", code="not_found")
    return store


def stored_body(record: StoredCompletion) -> dict[str, Any]:
    """The completion as it was returned, with its metadata as it is now."""
    return {**record.body, "metadata": record.metadata}


@router.get("", summary="The tenant's stored chat completions")
async def list_completions(
    request: Request,
    tenant: Tenant,
    order: AscendingQuery = "asc",
    after: AfterQuery = None,
    limit: LimitQuery = 20,
    model: Annotated[
        str | None,
        Query(min_length=1, max_length=256, description="Only the completions of this model"),
    ] = None,
) -> dict[str, Any]:
    """Those made with ``store: true``, in the order they were made; ``metadata[key]=value``
    keeps those with that pair (every pair given must match)."""
    opening, closing = _METADATA_QUERY
    metadata = {
        name[len(opening) : -len(closing)]: value
        for name, value in request.query_params.multi_items()
        if name.startswith(opening) and name.endswith(closing)
    }
    page = await completions_of(get_services(request)).list_completions(
        tenant_id=tenant, order=order, after=after, limit=limit, model=model, metadata=metadata
    )
    return _listed(
        [stored_body(c) for c in page.completions],
        [c.completion_id for c in page.completions],
        page.has_more,
    )


@router.get("/{completion_id}", summary="A stored chat completion")
async def get_completion(
    completion_id: CompletionIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    store = completions_of(get_services(request))
    return stored_body(await store.get_completion(tenant_id=tenant, completion_id=completion_id))


@router.post("/{completion_id}", summary="Replace a stored chat completion's metadata")
async def update_completion(
    completion_id: CompletionIdPath,
    body: CompletionUpdateRequest,
    request: Request,
    tenant: Tenant,
) -> dict[str, Any]:
    updated = await completions_of(get_services(request)).set_completion_metadata(
        tenant_id=tenant, completion_id=completion_id, metadata=body.metadata or {}
    )
    return stored_body(updated)


@router.delete("/{completion_id}", summary="Delete a stored chat completion")
async def delete_completion(
    completion_id: CompletionIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    """Deletes the record; the turns it answered stay the thread's (forget them with the
    thread's own endpoints)."""
    await completions_of(get_services(request)).delete_completion(
        tenant_id=tenant, completion_id=completion_id
    )
    return {"id": completion_id, "object": "chat.completion.deleted", "deleted": True}


@router.get("/{completion_id}/messages", summary="The messages a stored completion answered")
async def list_messages(
    completion_id: CompletionIdPath,
    request: Request,
    tenant: Tenant,
    order: AscendingQuery = "asc",
    after: AfterQuery = None,
    limit: LimitQuery = 20,
) -> dict[str, Any]:
    """The request's messages as the client sent them, each with an id of its own
    (``<completion id>-<index>``)."""
    sent = await completions_of(get_services(request)).completion_messages(
        tenant_id=tenant, completion_id=completion_id
    )
    messages = [store_message(completion_id, i, message) for i, message in enumerate(sent)]
    if order == "desc":
        messages.reverse()
    ids = [message["id"] for message in messages]
    start = 0
    if after is not None:
        if after not in ids:
            raise NotFoundError("message", after)
        start = ids.index(after) + 1
    page = messages[start : start + limit]
    return _listed(page, ids[start : start + limit], start + limit < len(messages))


def store_message(completion_id: str, index: int, message: dict[str, Any]) -> dict[str, Any]:
    """A message as OpenAI lists a stored completion's: as sent, with its id, its text as
    ``content`` and, when it was sent as parts, the parts as ``content_parts``."""
    content = message.get("content")
    shaped = {**message, "id": f"{completion_id}-{index}", "content_parts": None}
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text"]
        shaped["content"] = "\n".join(texts) if texts else None
        shaped["content_parts"] = content
    return shaped


def _listed(data: list[dict[str, Any]], ids: list[str], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": ids[0] if ids else None,
        "last_id": ids[-1] if ids else None,
        "has_more": has_more,
    }
