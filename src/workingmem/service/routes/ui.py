"""The web page: the tenant's threads, and what the gateway remembers of each.

    GET  /ui/                      the threads, newest first
    GET  /ui/threads/{thread_id}   notes, facts linked to their turns, working memory, window,
                                   versions, and the conversation itself (its newest turns)
    GET  /ui/login, POST /ui/login, POST /ui/logout

Server-rendered (Jinja2, autoescaped); the Forget button asks for confirmation, then calls
``POST /v1/threads/{thread_id}/memory/reset`` and reloads; the Delete button, after saying what
goes with the thread (its stored responses and chat completions), ``DELETE
/v1/threads/{thread_id}``, and goes back to the threads. With API keys in the database the page
needs one: the login form opens a server-side session whose token is an HttpOnly,
SameSite=Strict cookie (never the key; a Bearer header works too). Without keys, the page
shows the local tenant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from ...errors import NotFoundError, ValidationError
from ...stores.records import RecordStore
from ...transcript import label
from ..auth import (
    COOKIE,
    SESSION_SECONDS,
    presented_key,
    presented_session,
    refuse_cross_origin,
)
from ..errors import ApiError
from ..state import Services, get_services
from .threads import MAX_OFFSET, load_thread_memory

__all__ = ["router"]

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).parent.parent / "templates"))
templates.env.filters["segment"] = lambda value: quote(str(value), safe="")
templates.env.filters["part_label"] = label  # an attachment by its name: [file: report.pdf]
"""An id as one URL path segment: its slashes encoded too, so no browser resolves a part of
it (urlencode keeps "/")."""

PAGE_SIZE = 50
CONVERSATION_TURNS = 200
"""The newest turns the thread's page shows, so that a fact can be checked against the turns
it names; the messages endpoint pages through all of them."""
_MAX_FORM_BYTES = 4096


async def _tenant(request: Request, services: Services) -> str | Response:
    """The page's tenant, or the answer to give instead (the login form, an error page)."""
    try:
        return await services.tenant_for(
            presented_key(request),
            session=presented_session(request),
            server=request.scope.get("server"),
            host=request.headers.get("host"),
        )
    except ApiError as exc:
        if exc.status == 401:
            return RedirectResponse("/ui/login", status_code=303)
        return _error(request, exc.status, "Not available", exc.message)


def _error(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    context = {"status": status, "title": title, "message": message, "tenant": None}
    return templates.TemplateResponse(request, "error.html", context, status_code=status)


async def _page(
    request: Request, services: Services, tenant: str, name: str, context: dict[str, Any]
) -> HTMLResponse:
    context = {**context, "tenant": tenant, "keys_required": await services.keys_required()}
    return templates.TemplateResponse(request, name, context)


@router.get("")
async def root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/")
async def threads_page(
    request: Request, offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0
) -> Response:
    services = get_services(request)
    tenant = await _tenant(request, services)
    if isinstance(tenant, Response):
        return tenant
    store = services.gateway.store
    threads = await store.list_threads(tenant_id=tenant, limit=PAGE_SIZE + 1, offset=offset)
    context = {
        "threads": threads[:PAGE_SIZE],
        "has_more": len(threads) > PAGE_SIZE,
        "offset": offset,
        "limit": PAGE_SIZE,
    }
    return await _page(request, services, tenant, "threads.html", context)


@router.get("/threads/{thread_id:path}")
async def thread_page(request: Request, thread_id: str) -> Response:
    services = get_services(request)
    tenant = await _tenant(request, services)
    if isinstance(tenant, Response):
        return tenant
    store = services.gateway.store
    try:
        memory = await load_thread_memory(services, tenant_id=tenant, thread_id=thread_id)
        kept = (
            await store.count_records(tenant_id=tenant, thread_id=thread_id)
            if isinstance(store, RecordStore)  # a host's store may keep none
            else None
        )
    except NotFoundError:
        return _error(request, 404, "No such thread", f"There is no thread {thread_id!r}.")
    except ValidationError as exc:
        return _error(request, 400, "Bad thread id", str(exc))
    turns = await store.list_turns(
        tenant_id=tenant,
        thread_id=thread_id,
        after_seq=max(0, memory.turn_count - CONVERSATION_TURNS),
        limit=CONVERSATION_TURNS,
    )
    context = {
        "memory": memory,
        "kept": kept,
        "turns": turns,
        "conversation_turns": CONVERSATION_TURNS,
    }
    return await _page(request, services, tenant, "thread.html", context)


@router.get("/login")
async def login_form(request: Request) -> Response:
    services = get_services(request)
    if not await services.keys_required():
        return RedirectResponse("/ui/", status_code=303)
    context = {"tenant": None, "error": None}
    return templates.TemplateResponse(request, "login.html", context)


@router.post("/login")
async def login(request: Request) -> Response:
    """Checks the key of the form and keeps it in the page's cookie."""
    refuse_cross_origin(request)
    services = get_services(request)
    raw = await request.body()
    fields = parse_qs(raw[:_MAX_FORM_BYTES].decode("utf-8", "replace"))
    secret = (fields.get("key") or [""])[0].strip()
    token = (
        await services.keys.open_page_session(secret, ttl_seconds=SESSION_SECONDS)
        if secret
        else None
    )
    if token is None:
        context = {"tenant": None, "error": "That key is unknown or was revoked."}
        return templates.TemplateResponse(request, "login.html", context, status_code=401)
    response = RedirectResponse("/ui/", status_code=303)
    response.set_cookie(
        COOKIE,
        token,  # the session's, never the key: logging out or revoking the key ends it
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> RedirectResponse:
    refuse_cross_origin(request)
    token = presented_session(request)
    if token:
        await get_services(request).keys.close_page_session(token)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response
