"""``/mcp``: the agent memory over MCP's streamable HTTP, behind the service's API keys.

The endpoint is built in the app's lifespan, once the gateway (and so its store and its agent
memory) exists; the route hands each request to it. Without the ``mcp`` extra, or with a store
that keeps no documents, ``/mcp`` answers 404 with the reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ...stores.documents import DocumentStore
from ..errors import ApiError, send_error
from ..state import Services

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["route", "serving"]

_STATE = "mcp_endpoint"


@asynccontextmanager
async def serving(app: FastAPI, services: Services) -> AsyncIterator[None]:
    """Builds and runs the endpoint while the app runs (nothing when it cannot be served)."""
    store = services.gateway.store
    try:
        from ..mcp import McpEndpoint, build_mcp_server, mcp_memory, principal_of_request
    except ImportError:
        app.state.mcp_missing = "this server has no MCP support: pip install 'workingmem[mcp]'"
        yield
        return
    if not isinstance(store, DocumentStore):
        app.state.mcp_missing = "this server's store keeps no working-memory documents"
        yield
        return
    memory = mcp_memory(services.gateway.agent_memory or services.settings.agent_memory, store)
    server = build_mcp_server(memory, principal=principal_of_request)
    endpoint = McpEndpoint(server, default_user=services.settings.mcp_user)
    async with endpoint.run():
        setattr(app.state, _STATE, endpoint)
        try:
            yield
        finally:
            delattr(app.state, _STATE)


class _Dispatch:
    """Hands a request to the running endpoint (an ASGI app, so the route passes it raw)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope["app"].state
        endpoint: ASGIApp | None = getattr(state, _STATE, None)
        if endpoint is not None:
            await endpoint(scope, receive, send)
            return
        reason = getattr(state, "mcp_missing", None)
        error = (
            ApiError(404, reason, code="mcp_not_available", type="not_found_error")
            if reason
            else ApiError(503, "the service is starting", code="starting", type="server_error")
        )
        await send_error(send, error)


route = Route("/mcp", endpoint=_Dispatch(), methods=["GET", "POST", "DELETE"])
"""The route the app adds: MCP's one endpoint path."""
