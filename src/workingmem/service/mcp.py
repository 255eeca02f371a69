"""The agent memory as an MCP server: three tools, a resource and a prompt, per user.

    server = build_mcp_server(agent_memory, principal=fixed(Principal("local", "ada")))
    await run_stdio(server)                                  # `workingmem mcp`
    app.mount("/mcp", McpEndpoint(server, services))         # `workingmem serve`, behind its keys

MCP clients send no conversation id, and a tool argument is the model's to choose, so the
document is always the *user's* (scope ``user``) and the user is the principal the transport
authenticated: over stdio the one the command was started for (``--tenant``, ``--user``); over
HTTP the API key's tenant and the ``X-User-Id`` header, else the server's configured user. No
tool takes an id. The tools are the library's own (`agent_memory.tools`): the same validation,
merge rules, caps and versions; a bad call is a tool error (``isError``) and changes nothing.

The HTTP endpoint is stateless (no MCP session kept between requests): each POST is answered
by itself, so several workers behind one port serve the same client, and a request's key is
checked on every request rather than once per session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

try:
    from mcp import types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.stdio import stdio_server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the MCP server needs the mcp extra: pip install 'workingmem[mcp]'") from exc
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from .. import __version__
from ..agent_memory import AgentMemory, AgentMemoryConfig
from ..agent_memory.instructions import render_instructions
from ..agent_memory.tools import run_tool, tool_specs
from ..errors import ValidationError
from ..messages import check_id
from .auth import request_tenant
from .errors import ApiError, send_error

__all__ = [
    "MEMORY_URI",
    "PROMPT_NAME",
    "McpEndpoint",
    "Principal",
    "build_mcp_server",
    "fixed",
    "mcp_memory",
    "run_stdio",
]

MEMORY_URI = "workingmem://working-memory"
"""The resource that holds the user's current working memory."""
PROMPT_NAME = "working_memory"
"""The prompt that gives the instruction block (the memory and how to keep it)."""
USER_HEADER = "x-user-id"

_INSTRUCTIONS = (
    "A working memory of the user, kept across conversations and clients: read it with "
    "get_working_memory at the start of a conversation, and save what you learn about the user "
    "with update_working_memory."
)


@dataclass(frozen=True, slots=True)
class Principal:
    """Whose working memory a request reads and writes: a user inside a tenant."""

    tenant_id: str
    user_id: str

    def __post_init__(self) -> None:
        check_id("tenant_id", self.tenant_id)
        check_id("user_id", self.user_id)


PrincipalOf = Callable[[ServerRequestContext[Any, Any]], Principal]
"""How a request's principal is found: from the transport, never from the request's body."""


def fixed(principal: Principal) -> PrincipalOf:
    """Every request is `principal`'s (stdio: one process, one user)."""
    return lambda _ctx: principal


def mcp_memory(memory: AgentMemory | AgentMemoryConfig | None, store: Any = None) -> AgentMemory:
    """The user-scoped memory MCP serves: the same mode (template, schema or free-form), caps,
    history and switch (``enabled=False``: every tool says so) as the gateway's, in the user
    scope; a free-form one when none is configured.
    A gateway whose memory is per user shares its documents with MCP clients."""
    if isinstance(memory, AgentMemory):
        config, store = memory.config, memory.store
    else:
        config = memory or AgentMemoryConfig()
    if store is None:
        raise ValidationError("store", "the MCP server needs the store of its documents")
    if config.scope != "user":
        config = dataclasses.replace(config, scope="user")
    return AgentMemory(store=store, config=config)


def build_mcp_server(memory: AgentMemory, *, principal: PrincipalOf) -> Server[Any]:
    """An MCP server of `memory` (user scope), whose requests belong to `principal(ctx)`."""
    if memory.config.scope != "user":
        raise ValidationError("scope", "an MCP server serves user-scoped memory only")
    mode = memory.config.mode
    tools = [
        types.Tool(name=name, description=description, input_schema=parameters)
        for name, description, parameters in tool_specs(mode)
    ]
    mime = {"markdown": "text/markdown", "json": "application/json"}.get(
        mode.format or "", "text/plain"
    )

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        who = principal(ctx)
        outcome = await run_tool(
            memory,
            params.name,
            params.arguments or {},
            tenant_id=who.tenant_id,
            conversation_id=None,
            user_id=who.user_id,
        )
        return types.CallToolResult(
            content=[types.TextContent(text=outcome.text)], is_error=outcome.is_error
        )

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        resource = types.Resource(
            uri=MEMORY_URI,
            name="working-memory",
            title="Working memory",
            description="What you keep about the user: the current version of the document "
            "the working-memory tools edit.",
            mime_type=mime,
        )
        return types.ListResourcesResult(resources=[resource])

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        if str(params.uri) != MEMORY_URI:
            raise _not_found(f"no resource {str(params.uri)[:200]!r}; this server has {MEMORY_URI}")
        who = principal(ctx)
        content = await memory.get_working_memory(tenant_id=who.tenant_id, user_id=who.user_id)
        text = content if content is not None else _empty_text(memory)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=MEMORY_URI, mime_type=mime, text=text)]
        )

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        prompt = types.Prompt(
            name=PROMPT_NAME,
            title="Working memory",
            description="The working memory and how to keep it, for the system prompt.",
        )
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != PROMPT_NAME:
            raise _not_found(f"no prompt {params.name[:200]!r}; this server has {PROMPT_NAME}")
        who = principal(ctx)
        content = await memory.get_working_memory(tenant_id=who.tenant_id, user_id=who.user_id)
        block = render_instructions(mode=mode, scope="user", content=content)
        return types.GetPromptResult(
            description="The working memory and how to keep it.",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=block))],
        )

    return Server(
        "workingmem",
        version=__version__,
        title="workingmem working memory",
        instructions=_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def _empty_text(memory: AgentMemory) -> str:
    mode = memory.config.mode
    if mode.format == "json":
        return "{}"
    return mode.template or ""


def _not_found(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


async def run_stdio(server: Server[Any]) -> None:
    """Serves `server` over this process's stdin and stdout until the client closes them."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


_PRINCIPAL = "workingmem.principal"


def principal_of_request(ctx: ServerRequestContext[Any, Any]) -> Principal:
    """The principal `McpEndpoint` authenticated for this HTTP request."""
    request = ctx.request
    found = request.scope.get("state", {}).get(_PRINCIPAL) if isinstance(request, Request) else None
    if not isinstance(found, Principal):  # pragma: no cover - every request passes the endpoint
        raise RuntimeError("an MCP request reached the server without its principal")
    return found


class McpEndpoint:
    """The streamable HTTP endpoint, behind the service's API keys (an ASGI app to mount).

    Each request is authenticated as the rest of ``/v1`` is (`request_tenant`: the key's tenant,
    or the local tenant on loopback without keys; cross-site writes refused), its user taken
    from ``X-User-Id`` or the configured `default_user`; a refusal is the service's JSON error
    with its status (401, 403, 400), before the MCP layer sees the request.
    """

    def __init__(self, server: Server[Any], *, default_user: str) -> None:
        check_id("mcp_user", default_user)
        self.default_user = default_user
        self.manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)

    def run(self) -> AbstractAsyncContextManager[None]:
        """The manager's task group: enter it in the app's lifespan."""
        return self.manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - mounted under the HTTP app only
            return
        request = Request(scope, receive)
        try:
            tenant = await request_tenant(request)
            user = check_id("user_id", request.headers.get(USER_HEADER) or self.default_user)
        except ValidationError as error:
            message = f"the {USER_HEADER} header {error.reason}"
            await send_error(send, ApiError(400, message, code="invalid_user", param=USER_HEADER))
            return
        except ApiError as error:
            await send_error(send, error)
            return
        scope.setdefault("state", {})[_PRINCIPAL] = Principal(tenant, user)
        await self.manager.handle_request(scope, receive, send)
