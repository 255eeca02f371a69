"""The working memory over MCP: the official `mcp` client against `workingmem serve`'s /mcp
(streamable HTTP, behind the API keys) and against `workingmem mcp` (stdio)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    GetPromptResult,
    ReadResourceResult,
    TextContent,
    TextResourceContents,
)

import workingmem as wm
from tests.service.conftest import settings_for
from tests.service.live import LiveServer, create_key, revoke_key, run_async
from workingmem.llm.testing import ScriptedUpstream
from workingmem.service import create_app
from workingmem.stores.documents import DocumentStore

NOTES_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "likes": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


@asynccontextmanager
async def mcp_client(
    service: LiveServer, key: str | None, user: str | None = None
) -> AsyncIterator[Client]:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    if user is not None:
        headers["X-User-Id"] = user
    async with (
        httpx2.AsyncClient(headers=headers, timeout=10) as http,
        Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
    ):
        yield client


def text_of(result: CallToolResult | ReadResourceResult | GetPromptResult) -> str:
    """The one text block a tool result, a resource or a prompt of this server has."""
    if isinstance(result, CallToolResult):
        block: object = result.content[0]
    elif isinstance(result, ReadResourceResult):
        block = result.contents[0]
    else:
        block = result.messages[0].content
    assert isinstance(block, TextContent | TextResourceContents)
    return block.text


def stored(database_url: str, tenant: str, user: str) -> wm.WorkingMemoryDocument:
    """The user's document as the store has it."""

    async def read() -> wm.WorkingMemoryDocument:
        async with await wm.open_store(database_url) as store:
            assert isinstance(store, DocumentStore)
            return await store.get_document(tenant_id=tenant, scope="user", owner_id=user)

    return run_async(read)


async def test_the_tools_say_what_they_do_and_when_to_call_them(
    service: LiveServer, key: str
) -> None:
    async with mcp_client(service, key) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        instructions = client.instructions
    assert list(tools) == list(wm.agent_memory.TOOL_NAMES)
    descriptions = {name: tool.description or "" for name, tool in tools.items()}
    assert "at the start of a conversation" in descriptions["get_working_memory"]
    assert "as soon as you learn something" in descriptions["update_working_memory"]
    assert "asks you to forget" in descriptions["clear_working_memory"]
    update = tools["update_working_memory"].input_schema
    assert update["required"] == ["content"]
    assert update["properties"]["content"]["type"] == "string"
    assert tools["get_working_memory"].input_schema["properties"] == {}
    assert instructions is not None
    assert "get_working_memory" in instructions


async def test_update_get_resource_prompt_and_clear_are_the_users_document(
    service: LiveServer, key: str, database_url: str, tenant: str
) -> None:
    async with mcp_client(service, key, user="ada") as client:
        empty = await client.call_tool("get_working_memory", {})
        assert "empty" in text_of(empty)
        assert "# User" in text_of(empty)  # the template to start from
        saved = await client.call_tool(
            "update_working_memory",
            # a model's ids are ignored: the principal is the key's tenant and the header's user
            {"content": "# User\n- Name: Ada\n", "user_id": "bob", "tenant_id": "other"},
        )
        assert not saved.is_error
        assert "version 1" in text_of(saved)
        assert text_of(await client.call_tool("get_working_memory", {})) == "# User\n- Name: Ada\n"
        resource = await client.read_resource("workingmem://working-memory")
        assert text_of(resource) == "# User\n- Name: Ada\n"
        assert resource.contents[0].mime_type == "text/markdown"
        prompt = await client.get_prompt("working_memory")
        assert "- Name: Ada" in text_of(prompt)
        assert "update_working_memory" in text_of(prompt)
        assert stored(database_url, tenant, "ada").content == "# User\n- Name: Ada\n"
        assert stored(database_url, tenant, "bob").version == 0

        cleared = await client.call_tool("clear_working_memory", {})
        assert not cleared.is_error
        assert "empty" in text_of(await client.call_tool("get_working_memory", {}))
    document = stored(database_url, tenant, "ada")
    assert (document.content, document.version, document.reason) == (None, 2, "clear")


async def test_a_bad_call_is_a_tool_error_and_changes_nothing(
    service: LiveServer, key: str, database_url: str, tenant: str
) -> None:
    async with mcp_client(service, key, user="ada") as client:
        await client.call_tool("update_working_memory", {"content": "kept"})
        for arguments in ({}, {"content": None}, {"content": "x" * 9_000}):
            result = await client.call_tool("update_working_memory", arguments)
            assert result.is_error, arguments
            assert text_of(result).startswith("Error: ")
        unknown = await client.call_tool("forget_everything", {})
        assert unknown.is_error
        assert "get_working_memory" in text_of(unknown)
    document = stored(database_url, tenant, "ada")
    assert (document.content, document.version) == ("kept", 1)


async def test_users_and_tenants_are_kept_apart(
    service: LiveServer, key: str, database_url: str, tenant: str
) -> None:
    other_key = create_key(database_url, f"{tenant}-other").secret
    async with mcp_client(service, key, user="ada") as ada:
        await ada.call_tool("update_working_memory", {"content": "Ada's notes"})
    async with mcp_client(service, key, user="bob") as bob:
        assert "empty" in text_of(await bob.call_tool("get_working_memory", {}))
    async with mcp_client(service, key) as default_user:  # no header: the configured user
        await default_user.call_tool("update_working_memory", {"content": "the default's"})
    async with mcp_client(service, other_key, user="ada") as other_tenant:
        assert "empty" in text_of(await other_tenant.call_tool("get_working_memory", {}))
        resource = await other_tenant.read_resource("workingmem://working-memory")
        assert "Ada" not in text_of(resource)
    assert stored(database_url, tenant, "ada").content == "Ada's notes"
    assert stored(database_url, tenant, "default").content == "the default's"
    assert stored(database_url, f"{tenant}-other", "ada").version == 0


def _initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


async def test_a_request_without_a_valid_key_is_refused_before_mcp(
    service: LiveServer, key: str, database_url: str, tenant: str
) -> None:
    accept = {"Accept": "application/json, text/event-stream"}
    revoked = create_key(database_url, tenant, "to revoke")
    revoke_key(database_url, revoked.key.key_id)
    async with httpx.AsyncClient(base_url=service.url, headers=accept) as http:
        missing = await http.post("/mcp", json=_initialize())
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "missing_api_key"
        for secret in (revoked.secret, "wm_" + "A" * 43):
            refused = await http.post(
                "/mcp", json=_initialize(), headers={"Authorization": f"Bearer {secret}"}
            )
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "invalid_api_key"
        bad_user = await http.post(
            "/mcp",
            json=_initialize(),
            headers={"Authorization": f"Bearer {key}", "X-User-Id": "ada/../bob"},
        )
        assert bad_user.status_code == 400
        assert "x-user-id" in bad_user.json()["error"]["message"]
        accepted = await http.post(
            "/mcp", json=_initialize(), headers={"Authorization": f"Bearer {key}"}
        )
        assert accepted.status_code == 200
        assert accepted.json()["result"]["serverInfo"]["name"] == "workingmem"


async def test_a_schema_memory_merges_and_refuses_what_breaks_the_schema(
    tmp_path: Path, upstream: ScriptedUpstream
) -> None:
    database_url = f"sqlite:///{tmp_path / 'memory.db'}"
    settings = settings_for(
        database_url, upstream, agent_memory=wm.AgentMemoryConfig(schema=NOTES_SCHEMA)
    )
    with LiveServer(create_app(settings)) as service:
        async with mcp_client(service, None, user="ada") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            content = tools["update_working_memory"].input_schema["properties"]["content"]
            assert content["properties"]["likes"]["type"] == "array"
            await client.call_tool("update_working_memory", {"content": {"name": "Ada"}})
            merged = await client.call_tool(
                "update_working_memory", {"content": {"likes": ["tea"]}}
            )
            assert not merged.is_error
            wrong = await client.call_tool("update_working_memory", {"content": {"name": 7}})
            assert wrong.is_error
            assert "schema" in text_of(wrong)
            resource = await client.read_resource("workingmem://working-memory")
            assert resource.contents[0].mime_type == "application/json"
    document = stored(database_url, wm.service.settings.LOCAL_TENANT, "ada")
    assert document.content == '{"name":"Ada","likes":["tea"]}'
    assert document.version == 2


async def test_a_gateway_with_user_scope_shares_the_document_with_mcp_clients(
    tmp_path: Path, upstream: ScriptedUpstream
) -> None:
    database_url = f"sqlite:///{tmp_path / 'memory.db'}"
    agent = wm.AgentMemoryConfig(template="# User\n- Name:\n", scope="user")
    with LiveServer(
        create_app(settings_for(database_url, upstream, agent_memory=agent))
    ) as service:
        async with mcp_client(service, None, user="ada") as client:
            await client.call_tool("update_working_memory", {"content": "# User\n- Name: Ada\n"})
        async with httpx.AsyncClient(base_url=service.url) as http:
            rest = await http.get("/v1/users/ada/working-memory")
            # a keyless server's tenant: never for another site's page, nor a rebound Host
            accept = {"Accept": "application/json, text/event-stream"}
            for header in ({"Origin": "http://evil.example"}, {"Host": "evil.example"}):
                refused = await http.post("/mcp", json=_initialize(), headers=accept | header)
                assert refused.status_code == 403, header
    assert rest.status_code == 200
    assert rest.json()["content"] == "# User\n- Name: Ada\n"


def _stdio(database: Path, user: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(Path(sys.executable).parent / "workingmem"),
        args=["mcp", "--db", str(database), "--user", user, *extra],
    )


async def test_workingmem_mcp_serves_one_user_over_stdio(tmp_path: Path) -> None:
    database = tmp_path / "memory.db"
    template = tmp_path / "profile.md"
    template.write_text("# Profile\n- Name:\n", encoding="utf-8")
    async with Client(_stdio(database, "ada", "--working-memory-template", str(template))) as ada:
        assert [t.name for t in (await ada.list_tools()).tools] == list(wm.agent_memory.TOOL_NAMES)
        assert "# Profile" in text_of(await ada.call_tool("get_working_memory", {}))
        saved = await ada.call_tool(
            "update_working_memory", {"content": "# Profile\n- Name: Ada\n"}
        )
        assert not saved.is_error
        prompt = await ada.get_prompt("working_memory")
        assert "- Name: Ada" in text_of(prompt)
    async with Client(_stdio(database, "bob")) as bob:
        assert "empty" in text_of(await bob.call_tool("get_working_memory", {}))
    document = stored(f"sqlite:///{database}", wm.service.settings.LOCAL_TENANT, "ada")
    assert (document.content, document.version) == ("# Profile\n- Name: Ada\n", 1)


async def test_a_disabled_working_memory_stays_off_for_mcp_clients(
    tmp_path: Path, upstream: ScriptedUpstream
) -> None:
    database_url = f"sqlite:///{tmp_path / 'memory.db'}"
    agent = wm.AgentMemoryConfig(enabled=False)
    with LiveServer(
        create_app(settings_for(database_url, upstream, agent_memory=agent))
    ) as service:
        async with mcp_client(service, None, user="ada") as client:
            refused = await client.call_tool("update_working_memory", {"content": "x"})
    assert refused.is_error
    assert "disabled" in text_of(refused)
    assert stored(database_url, wm.service.settings.LOCAL_TENANT, "ada").version == 0


async def test_a_server_without_the_mcp_extra_says_how_to_install_it(
    tmp_path: Path, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everything else serves; /mcp answers 404 with the command that adds it."""
    monkeypatch.setitem(sys.modules, "workingmem.service.mcp", None)  # not installed
    database_url = f"sqlite:///{tmp_path / 'memory.db'}"
    with LiveServer(create_app(settings_for(database_url, upstream))) as service:
        async with httpx.AsyncClient(base_url=service.url) as api:
            missing = await api.post("/mcp", json={"jsonrpc": "2.0", "id": 1})
            served = await api.get("/v1/threads")
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["code"] == "mcp_not_available"
    assert "pip install 'workingmem[mcp]'" in error["message"]
    assert served.status_code == 200


async def test_the_resource_and_the_prompt_are_listed_and_nothing_else_is_served(
    service: LiveServer, key: str
) -> None:
    """Before anything is written, the resource is the template to start from; asking for a
    resource or a prompt the server does not have is the client's error."""
    async with mcp_client(service, key, user="new-user") as client:
        resources = (await client.list_resources()).resources
        prompts = (await client.list_prompts()).prompts
        assert [(str(r.uri), r.mime_type) for r in resources] == [
            ("workingmem://working-memory", "text/markdown")
        ]
        assert [p.name for p in prompts] == ["working_memory"]
        fresh = await client.read_resource("workingmem://working-memory")
        assert text_of(fresh).startswith("# User")  # the template, nothing written yet
        with pytest.raises(MCPError, match="no resource"):
            await client.read_resource("workingmem://other")
        with pytest.raises(MCPError, match="no prompt"):
            await client.get_prompt("other")
