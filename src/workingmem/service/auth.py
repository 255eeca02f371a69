"""Who is asking: the tenant of a request, from its API key.

    @router.get("/v1/threads")
    async def threads(tenant: Tenant) -> ...: ...

The key comes from ``Authorization: Bearer <key>``; the web page's login opens a server-side
session instead and its ``wm_session`` cookie carries the session's token, never the key
(HttpOnly, SameSite=Strict: another site's page cannot make a browser send it; logging out or
revoking the key ends it). Tenants come from keys and from nothing else a client sends.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request
from starlette.requests import HTTPConnection

from .errors import ApiError
from .state import get_services

__all__ = [
    "COOKIE",
    "SESSION_SECONDS",
    "Tenant",
    "connection_tenant",
    "presented_key",
    "presented_session",
    "refuse_cross_origin",
    "request_tenant",
]

COOKIE = "wm_session"
"""The web page's session cookie: a session's token (``wms_...``), HttpOnly."""
SESSION_SECONDS = 12 * 3600
"""How long a page session lasts: a working day."""


def presented_key(request: HTTPConnection) -> str | None:
    """The API key a request presents: its Bearer token, else its ``x-api-key`` (where the
    `anthropic` SDK and Claude's clients send it)."""
    header = request.headers.get("authorization")
    if header:
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    key = request.headers.get("x-api-key")
    return key.strip() if key and key.strip() else None


def presented_session(request: HTTPConnection) -> str | None:
    """The page session a request presents: its cookie."""
    return request.cookies.get(COOKIE) or None


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def refuse_cross_origin(request: HTTPConnection) -> None:
    """Refuses a write another site's page made a browser send (CSRF). A browser says where
    a request comes from in ``Origin``, and it must be this server; a client without one is
    not a browser on another site."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    if origin == "null" or urlsplit(origin).netloc != request.headers.get("host", ""):
        raise ApiError(
            403,
            "cross-origin writes are refused without an API key",
            code="cross_origin",
            type="permission_error",
        )


async def request_tenant(request: Request) -> str:
    """The request's tenant, or 401/403 (see `Services.tenant_for`). A write that proves
    nothing itself (no key: a page session's cookie, or a keyless loopback server) must come
    from this server's own pages."""
    return await connection_tenant(request, writes=request.method not in _SAFE_METHODS)


async def connection_tenant(connection: HTTPConnection, *, writes: bool) -> str:
    """The tenant of a request, or of a WebSocket's handshake (a connection that `writes`:
    a browser opens one to any site, so one without a key must come from this server's own
    pages too), or 401/403."""
    if writes and presented_key(connection) is None:
        refuse_cross_origin(connection)
    services = get_services(connection)
    return await services.tenant_for(
        presented_key(connection),
        session=presented_session(connection),
        server=connection.scope.get("server"),
        host=connection.headers.get("host"),
    )


Tenant = Annotated[str, Depends(request_tenant)]
"""A route parameter: the tenant of the request."""
