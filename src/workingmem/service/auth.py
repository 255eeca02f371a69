"""Who is asking: the tenant of a request, from its API key.

    @router.get("/v1/threads")
    async def threads(tenant: Tenant) -> ...: ...

The key comes from ``Authorization: Bearer <key>``, or from the ``wm_key`` cookie that the web
page's login sets (HttpOnly, SameSite=Strict: another site's page cannot make a browser send
it). Tenants come from keys and from nothing else a client sends.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from .state import get_services

__all__ = ["COOKIE", "Tenant", "presented_key", "request_tenant"]

COOKIE = "wm_key"
"""The web page's session cookie: the API key itself, HttpOnly."""


def presented_key(request: Request) -> str | None:
    """The key a request presents: the Bearer token, else the page's cookie."""
    header = request.headers.get("authorization")
    if header:
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return request.cookies.get(COOKIE) or None


async def request_tenant(request: Request) -> str:
    """The request's tenant, or 401/403 (see `Services.tenant_for`)."""
    services = get_services(request)
    return await services.tenant_for(
        presented_key(request),
        server=request.scope.get("server"),
        host=request.headers.get("host"),
    )


Tenant = Annotated[str, Depends(request_tenant)]
"""A route parameter: the tenant of the request."""
