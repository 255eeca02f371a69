"""Claude's memory tool kept in workingmem: the anthropic SDK's tool runner over real HTTP
against a scripted Messages upstream, and each command's edge cases against the store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import ToolError
from fastapi import FastAPI, Request

import workingmem as wm
from tests.service.live import LiveServer, run_async
from workingmem.integrations.anthropic_memory import (
    AnthropicMemoryTool,
    AsyncAnthropicMemoryTool,
    MemoryFiles,
)
from workingmem.stores.documents import MEMORY_FILES_PREFIX, DocumentStore


class MessagesUpstream:
    """POST /v1/messages answers with the next scripted content blocks and keeps each request."""

    def __init__(self, script: list[list[dict[str, Any]]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self.app = FastAPI()
        self.app.post("/v1/messages")(self.messages)

    async def messages(self, request: Request) -> dict[str, Any]:
        body = await request.json()
        self.requests.append(body)
        content = self.script.pop(0)
        uses_tool = any(block["type"] == "tool_use" for block in content)
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if uses_tool else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks the runner sent back, in order."""
        return [
            block
            for request in self.requests
            for block in request["messages"][-1]["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]


def use(index: int, **command: Any) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": f"toolu_{index}", "name": "memory", "input": command}]


SCRIPT = [
    use(1, command="view", path="/memories"),
    use(2, command="create", path="/memories/profile.md", file_text="# Ada\n- likes tea\n"),
    use(3, command="str_replace", path="/memories/profile.md", old_str="tea", new_str="coffee"),
    use(4, command="insert", path="/memories/profile.md", insert_line=1, insert_text="- a pilot"),
    use(5, command="view", path="/memories/profile.md", view_range=[2, 3]),
    use(6, command="rename", old_path="/memories/profile.md", new_path="/memories/ada/profile.md"),
    use(7, command="view", path="/memories/../etc/passwd"),
    use(8, command="create", path="/memories/scratch.md", file_text="draft"),
    use(9, command="delete", path="/memories/scratch.md"),
    use(10, command="view", path="/memories"),
    [{"type": "text", "text": "Noted."}],
]


def document_of(store: DocumentStore, tenant: str, user: str) -> wm.WorkingMemoryDocument:
    async def read() -> wm.WorkingMemoryDocument:
        return await store.get_document(
            tenant_id=tenant, scope="user", owner_id=MEMORY_FILES_PREFIX + user
        )

    return run_async(read)


@pytest.fixture
def upstream() -> Iterator[MessagesUpstream]:
    scripted = MessagesUpstream(SCRIPT)
    with LiveServer(scripted.app) as live:
        scripted.url = live.url
        yield scripted


def files_of(content: str | None) -> dict[str, str]:
    assert content is not None
    files: dict[str, str] = json.loads(content)["files"]
    return files


async def test_the_tool_runner_keeps_claudes_memory_files_in_the_store(
    upstream: MessagesUpstream, store: wm.ThreadStore, tenant: str
) -> None:
    assert isinstance(store, DocumentStore)
    tool = AsyncAnthropicMemoryTool(store=store, tenant_id=tenant, user_id="ada")
    client = anthropic.AsyncAnthropic(base_url=upstream.url, api_key="test-key")
    runner = client.beta.messages.tool_runner(
        model="claude-test",
        max_tokens=256,
        tools=[tool],
        messages=[{"role": "user", "content": "Remember that I like tea."}],
    )
    final = await runner.until_done()
    await client.close()
    assert final.content[0].type == "text"
    assert upstream.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]

    results = upstream.tool_results()
    assert [r["tool_use_id"] for r in results] == [f"toolu_{n}" for n in range(1, 11)]
    texts = [json.dumps(r["content"]) for r in results]
    assert "/memories" in texts[0]
    assert "File created successfully at: /memories/profile.md" in texts[1]
    assert "coffee" in texts[2]
    assert "2\\t- a pilot" in texts[4]
    assert "3\\t- likes coffee" in texts[4]
    assert results[6].get("is_error") is True
    assert "escape" in texts[6]
    assert not any(r.get("is_error") for i, r in enumerate(results) if i != 6)
    assert "/memories/ada/profile.md" in texts[9]
    assert "scratch" not in texts[9]

    document = await store.get_document(
        tenant_id=tenant, scope="user", owner_id=MEMORY_FILES_PREFIX + "ada"
    )
    assert files_of(document.content) == {
        "/memories/ada/profile.md": "# Ada\n- a pilot\n- likes coffee\n"
    }
    history = await store.list_document_versions(
        tenant_id=tenant, scope="user", owner_id=MEMORY_FILES_PREFIX + "ada"
    )
    assert len(history) == document.version == 6  # create, replace, insert, rename, create, delete


def test_the_sync_tool_works_with_the_sync_client(
    upstream: MessagesUpstream, tmp_path: Path, tenant: str
) -> None:
    async def open_sqlite() -> wm.ThreadStore:
        return await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}")

    store = run_async(open_sqlite)
    assert isinstance(store, DocumentStore)
    tool = AnthropicMemoryTool(store=store, tenant_id=tenant, user_id="ada")
    client = anthropic.Anthropic(base_url=upstream.url, api_key="test-key")
    final = client.beta.messages.tool_runner(
        model="claude-test",
        max_tokens=256,
        tools=[tool],
        messages=[{"role": "user", "content": "Remember that I like tea."}],
    ).until_done()
    client.close()
    assert final.content[0].type == "text"
    assert upstream.tool_results()[6].get("is_error") is True
    document = document_of(store, tenant, "ada")
    assert "/memories/ada/profile.md" in files_of(document.content)
    run_async(store.aclose)


# -- the commands against the store ----------------------------------------------------------


@pytest.fixture
def files(store: wm.ThreadStore, tenant: str) -> MemoryFiles:
    assert isinstance(store, DocumentStore)
    return MemoryFiles(store=store, tenant_id=tenant, user_id="ada", max_chars=200)


async def stored(files: MemoryFiles) -> tuple[dict[str, str], int]:
    document = await files.store.get_document(
        tenant_id=files.tenant_id, scope="user", owner_id=files.owner_id
    )
    return ({} if document.content is None else files_of(document.content)), document.version


@pytest.mark.parametrize(
    "path",
    [
        "/memories/../etc/passwd",
        "/memories/a/../../x",
        "/memories/./x",
        "/memories//x",
        "/memoriesx/y",
        "/etc/passwd",
        "memories/x",
        "/memories/%2e%2e/x",
        "/memories/a\\..\\x",
        "/memories/a\x00b",
        "",
    ],
)
async def test_a_path_outside_the_memories_is_refused_changing_nothing(
    files: MemoryFiles, path: str
) -> None:
    await files.create("/memories/kept.md", "kept")
    for command in (
        files.create(path, "x"),
        files.view(path),
        files.delete(path),
        files.rename("/memories/kept.md", path),
    ):
        with pytest.raises(ToolError):
            await command
    assert await stored(files) == ({"/memories/kept.md": "kept"}, 1)


async def test_the_commands_refuse_what_they_cannot_do_changing_nothing(
    files: MemoryFiles,
) -> None:
    await files.create("/memories/notes.md", "one\ntwo two")
    refusals = [
        files.create("/memories/notes.md", "again"),
        files.create("/memories/notes.md/inner.md", "under a file"),
        files.str_replace("/memories/notes.md", "three", "3"),
        files.str_replace("/memories/notes.md", "two", "2"),
        files.str_replace("/memories/missing.md", "one", "1"),
        files.insert("/memories/notes.md", 5, "late"),
        files.insert("/memories/notes.md", -1, "early"),
        files.view("/memories/missing.md"),
        files.delete("/memories/missing.md"),
        files.delete("/memories"),
        files.rename("/memories", "/memories/x"),
        files.rename("/memories/missing.md", "/memories/x.md"),
        files.create("/memories/big.md", "x" * 200),  # over the cap with what is there
        files.view("/memories/notes.md", [1]),
    ]
    for refusal in refusals:
        with pytest.raises(ToolError):
            await refusal
    await files.create("/memories/other.md", "other")
    with pytest.raises(ToolError, match="already exists"):
        await files.rename("/memories/notes.md", "/memories/other.md")
    assert await stored(files) == (
        {"/memories/notes.md": "one\ntwo two", "/memories/other.md": "other"},
        2,
    )


async def test_directories_are_listed_deleted_and_moved_whole(files: MemoryFiles) -> None:
    await files.create("/memories/projects/a/plan.md", "plan")
    await files.create("/memories/projects/b.md", "b")
    await files.create("/memories/top.md", "top")
    listing = await files.view("/memories")
    assert "/memories/projects/\n" in listing + "\n"
    assert "/memories/projects/a/" in listing
    assert "plan.md" not in listing  # two levels deep
    assert "/memories/top.md" in listing
    await files.rename("/memories/projects", "/memories/archive")
    assert set((await stored(files))[0]) == {
        "/memories/archive/a/plan.md",
        "/memories/archive/b.md",
        "/memories/top.md",
    }
    with pytest.raises(ToolError, match="into itself"):
        await files.rename("/memories/archive", "/memories/archive/inner")
    await files.delete("/memories/archive/")
    assert (await stored(files))[0] == {"/memories/top.md": "top"}
    assert await files.clear() == "All memory cleared"
    assert (await stored(files))[0] == {}
    assert "0B\t/memories" in await files.view("/memories")


async def test_tenants_and_users_each_have_their_own_files(
    store: wm.ThreadStore, tenant: str
) -> None:
    assert isinstance(store, DocumentStore)
    ada = MemoryFiles(store=store, tenant_id=tenant, user_id="ada")
    bob = MemoryFiles(store=store, tenant_id=tenant, user_id="bob")
    other = MemoryFiles(store=store, tenant_id=f"{tenant}-other", user_id="ada")
    await ada.create("/memories/secret.md", "ada's")
    for stranger in (bob, other):
        with pytest.raises(ToolError, match="does not exist"):
            await stranger.view("/memories/secret.md")
        assert "secret" not in await stranger.view("/memories")
    # the user's agent memory is another document, which cannot be named like this one
    agent = wm.AgentMemory(store=store, config=wm.AgentMemoryConfig(scope="user"))
    assert await agent.get_working_memory(tenant_id=tenant, user_id="ada") is None


async def test_concurrent_writers_lose_no_file(files: MemoryFiles) -> None:
    big = MemoryFiles(store=files.store, tenant_id=files.tenant_id, user_id="ada")
    await asyncio.gather(*(big.create(f"/memories/f{n}.md", str(n)) for n in range(12)))
    tree, version = await stored(big)
    assert tree == {f"/memories/f{n}.md": str(n) for n in range(12)}
    assert version == 12


async def test_a_document_that_is_not_a_tree_is_a_tool_error(files: MemoryFiles) -> None:
    await files.store.put_document(
        tenant_id=files.tenant_id,
        scope="user",
        owner_id=files.owner_id,
        content="not json",
        expected_version=0,
    )
    with pytest.raises(ToolError, match="not a tree"):
        await files.view("/memories")
    with pytest.raises(ToolError, match="not a tree"):
        await files.create("/memories/x.md", "x")
    assert (
        await files.store.get_document(
            tenant_id=files.tenant_id, scope="user", owner_id=files.owner_id
        )
    ).content == "not json"


def test_bad_settings_are_refused_at_construction(store: wm.ThreadStore) -> None:
    assert isinstance(store, DocumentStore)
    with pytest.raises(wm.ValidationError):
        MemoryFiles(store=store, tenant_id="", user_id="ada")
    with pytest.raises(wm.ValidationError):
        MemoryFiles(store=store, tenant_id="t", user_id="ada", max_chars=0)
