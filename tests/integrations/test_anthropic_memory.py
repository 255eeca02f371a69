"""Claude's memory tool kept in workingmem: the anthropic SDK's tool runner over real HTTP
against a scripted Messages upstream, and each command's edge cases against a real store."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import ToolError
from fastapi import FastAPI, Request

import workingmem as wm
from tests.service.live import LiveServer, run_async
from workingmem.integrations import anthropic_memory
from workingmem.integrations.anthropic_memory import (
    MEMORY_FILES_PREFIX,
    AnthropicMemoryTool,
    AsyncAnthropicMemoryTool,
)
from workingmem.messages import MAX_ID_CHARS
from workingmem.stores.documents import DEFAULT_KEEP_VERSIONS, DocumentReason, DocumentStore, Scope

# -- the tool runner over HTTP ---------------------------------------------------------------


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
    use(10, command="create", path="/memories/no-text.md"),
    use(11, command="view", path="/memories"),
    [{"type": "text", "text": "Noted."}],
]
ERRORS = {7: "would escape /memories", 10: "create.file_text): Field required"}
"""The scripted calls that must come back as errors, and what their text says."""


@pytest.fixture
def upstream() -> Iterator[MessagesUpstream]:
    scripted = MessagesUpstream(SCRIPT)
    with LiveServer(scripted.app) as live:
        scripted.url = live.url
        yield scripted


def check_the_scripted_run(upstream: MessagesUpstream) -> None:
    results = upstream.tool_results()
    assert [r["tool_use_id"] for r in results] == [f"toolu_{n}" for n in range(1, 12)]
    texts = {n: json.dumps(r["content"]) for n, r in enumerate(results, start=1)}
    errors = {n: texts[n] for n, r in enumerate(results, start=1) if r.get("is_error")}
    assert errors.keys() == ERRORS.keys()
    for n, text in ERRORS.items():
        assert text in errors[n]
    assert "0B\\t/memories" in texts[1]
    assert "File created successfully at: /memories/profile.md" in texts[2]
    assert "     2\\t- likes coffee" in texts[3]
    assert "Here's the content of /memories/profile.md with line numbers:" in texts[5]
    assert "     2\\t- a pilot\\n     3\\t- likes coffee" in texts[5]
    assert "     1\\t# Ada" not in texts[5]
    assert "Successfully renamed /memories/profile.md to /memories/ada/profile.md" in texts[6]
    assert "Successfully deleted /memories/scratch.md" in texts[9]
    assert "\\t/memories/ada/\\n" in texts[11]
    assert "\\t/memories/ada/profile.md" in texts[11]
    assert "scratch" not in texts[11]


def tree(content: str | None) -> dict[str, str]:
    assert content is not None
    files: dict[str, str] = json.loads(content)["files"]
    return files


async def test_the_tool_runner_keeps_claudes_memory_files_in_the_store(
    upstream: MessagesUpstream, store: wm.ThreadStore, tenant: str
) -> None:
    """Every scripted command reaches the store through the SDK's own runner and HTTP: the
    model reads the texts it expects, a traversal and a malformed command come back flagged
    is_error, and each change is one version of the user's one document."""
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
    check_the_scripted_run(upstream)

    key: dict[str, Any] = {"tenant_id": tenant, "scope": "user"}
    document = await store.get_document(**key, owner_id=MEMORY_FILES_PREFIX + "ada")
    assert tree(document.content) == {
        "/memories/ada/profile.md": "# Ada\n- a pilot\n- likes coffee\n"
    }
    history = await store.list_document_versions(**key, owner_id=MEMORY_FILES_PREFIX + "ada")
    assert [v.version for v in history] == [6, 5, 4, 3, 2, 1]  # the reads and refusals wrote none
    first = await store.get_document_version(**key, owner_id=MEMORY_FILES_PREFIX + "ada", version=1)
    assert tree(first.content) == {"/memories/profile.md": "# Ada\n- likes tea\n"}
    assert tree(history[1].content) == {
        "/memories/ada/profile.md": "# Ada\n- a pilot\n- likes coffee\n",
        "/memories/scratch.md": "draft",
    }


def test_the_sync_tool_works_with_the_sync_client(
    upstream: MessagesUpstream, tmp_path: Path, tenant: str
) -> None:
    """The sync client's runner calls the sync tool, which runs the same work on a loop
    thread of its own; `close` stops that thread."""

    async def open_sqlite() -> wm.ThreadStore:
        return await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}")

    store = run_async(open_sqlite)
    assert isinstance(store, DocumentStore)
    before = set(threading.enumerate())
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
    check_the_scripted_run(upstream)
    assert "Successfully deleted" in tool.delete(
        anthropic.types.beta.BetaMemoryTool20250818DeleteCommand(
            command="delete", path="/memories/ada/"
        )
    )
    assert tool.clear_all_memory() == "All memory cleared"
    tool.close()
    assert not [t for t in set(threading.enumerate()) - before if "memory-loop" in t.name]

    async def read() -> wm.WorkingMemoryDocument:
        document = await store.get_document(
            tenant_id=tenant, scope="user", owner_id=MEMORY_FILES_PREFIX + "ada"
        )
        await store.aclose()
        return document

    document = run_async(read)
    assert (tree(document.content), document.version) == ({}, 7)


# -- each command against the store ----------------------------------------------------------


@pytest.fixture
def tool(store: wm.ThreadStore, tenant: str) -> AsyncAnthropicMemoryTool:
    assert isinstance(store, DocumentStore)
    return AsyncAnthropicMemoryTool(store=store, tenant_id=tenant, user_id="ada", max_chars=200)


async def run(tool: AsyncAnthropicMemoryTool, **command: object) -> str:
    """One command as the model sends it: a JSON object, checked by the tool."""
    result = await tool.call(command)
    assert isinstance(result, str)
    return result


async def stored(tool: AsyncAnthropicMemoryTool) -> tuple[dict[str, str], int]:
    document = await tool.store.get_document(
        tenant_id=tool.tenant_id, scope="user", owner_id=tool.owner_id
    )
    return ({} if document.content is None else tree(document.content)), document.version


async def refused(tool: AsyncAnthropicMemoryTool, match: str, **command: object) -> None:
    with pytest.raises(ToolError, match=match):
        await run(tool, **command)


OUTSIDE = [
    pytest.param("/memories/../etc/passwd", id="dot-dot"),
    pytest.param("/memories/a/../../x", id="dot-dot-deeper"),
    pytest.param("/memories/x/..", id="dot-dot-last"),
    pytest.param("/memories/./x", id="dot"),
    pytest.param("/memories//x", id="empty-segment"),
    pytest.param("/memories//", id="empty-segment-at-the-root"),
    pytest.param("/memoriesX/y", id="memories-prefix"),
    pytest.param("/etc/passwd", id="elsewhere"),
    pytest.param("memories/x", id="relative"),
    pytest.param("/memories/%2e%2e/x", id="url-encoded"),
    pytest.param("/memories/%2E%2E%2Fetc", id="url-encoded-slash"),
    pytest.param("/memories/a\\..\\x", id="backslash"),
    pytest.param("/memories/a\x00b", id="nul"),
    pytest.param("/memories/a\nb", id="newline"),
    pytest.param("/memories/\x85x", id="c1-control"),
    pytest.param("/memories/\u202ex.md", id="bidi-override"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("path", OUTSIDE)
async def test_a_path_outside_the_memories_is_refused_changing_nothing(
    tool: AsyncAnthropicMemoryTool, path: str
) -> None:
    """No command reads or writes anything for a path that is not plainly inside /memories:
    nothing is normalised into one that is."""
    await run(tool, command="create", path="/memories/kept.md", file_text="kept")
    kept = "/memories/kept.md"
    for command in (
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "str_replace", "path": path, "old_str": "k", "new_str": "x"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": kept, "new_path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/new.md"},
    ):
        with pytest.raises(ToolError):
            await tool.call(command)
    assert await stored(tool) == ({kept: "kept"}, 1)


MALFORMED = [
    pytest.param("view /memories", "valid dictionary", id="not-an-object"),
    pytest.param({"path": "/memories"}, "discriminator 'command'", id="no-command"),
    pytest.param({"command": "format", "path": "/memories"}, "'format'", id="unknown-command"),
    pytest.param({"command": ["view"], "path": "/memories"}, "expected tags", id="command-list"),
    pytest.param({"command": "view"}, "view.path", id="no-path"),
    pytest.param({"command": "view", "path": 7}, "view.path", id="path-number"),
    pytest.param(
        {"command": "view", "path": "/memories/a.md", "view_range": [1, "two"]},
        "view_range.1",
        id="view-range-text",
    ),
    pytest.param(
        {"command": "view", "path": "/memories/a.md", "view_range": [1]},
        "two line numbers",
        id="view-range-one-number",
    ),
    pytest.param(
        {"command": "create", "path": "/memories/b.md", "file_text": 12},
        "file_text",
        id="file-text-number",
    ),
    pytest.param(
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": None},
        "new_str",
        id="new-str-null",
    ),
    pytest.param(
        {"command": "insert", "path": "/memories/a.md", "insert_line": "x", "insert_text": "t"},
        "insert_line",
        id="insert-line-text",
    ),
    pytest.param(
        {"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": ["t"]},
        "insert_text",
        id="insert-text-list",
    ),
    pytest.param({"command": "rename", "old_path": "/memories/a.md"}, "new_path", id="no-new-path"),
]


@pytest.mark.parametrize(("command", "match"), MALFORMED)
async def test_a_malformed_command_is_a_tool_error_changing_nothing(
    tool: AsyncAnthropicMemoryTool, command: object, match: str
) -> None:
    """What the model sends is checked before it is used: a wrong shape or type is a
    ToolError that says what is wrong (never a TypeError, never a half-done change)."""
    await run(tool, command="create", path="/memories/a.md", file_text="a")
    with pytest.raises(ToolError, match=match):
        await tool.call(command)
    assert await stored(tool) == ({"/memories/a.md": "a"}, 1)


async def test_create_refuses_an_existing_file_a_directory_and_a_path_under_a_file(
    tool: AsyncAnthropicMemoryTool,
) -> None:
    """A file is created only where nothing is: never over a file, nor a directory, nor
    inside something that is a file."""
    await run(tool, command="create", path="/memories/notes.md", file_text="one")
    await run(tool, command="create", path="/memories/dir/inner.md", file_text="two")
    for path, match in [
        ("/memories/notes.md", "already exists"),
        ("/memories/dir", "already exists"),
        ("/memories/notes.md/inner.md", "is a file"),
        ("/memories", "not a file"),
        ("/memories/dir/", "empty part"),
    ]:
        await refused(tool, match, command="create", path=path, file_text="again")
    assert await stored(tool) == (
        {"/memories/notes.md": "one", "/memories/dir/inner.md": "two"},
        2,
    )


async def test_the_cap_refuses_growth_past_it_but_never_a_shrink(
    tool: AsyncAnthropicMemoryTool,
) -> None:
    """The total stays within max_chars: a change past it is refused with the size and the
    cap, nothing written; a change that shrinks the total is allowed even above the cap (one
    lowered since the files were written)."""
    await run(tool, command="create", path="/memories/a.md", file_text="a" * 150)
    await refused(
        tool,
        "would hold 201 characters, over its cap of 200",
        command="create",
        path="/memories/b.md",
        file_text="b" * 51,
    )
    replace = {"command": "str_replace", "path": "/memories/a.md", "old_str": "a" * 150}
    await refused(tool, "over its cap", **replace, new_str="c" * 201)
    await run(tool, command="create", path="/memories/b.md", file_text="b" * 50)
    assert (await stored(tool))[1] == 2
    lower = AsyncAnthropicMemoryTool(
        store=tool.store, tenant_id=tool.tenant_id, user_id="ada", max_chars=100
    )
    await run(lower, **replace, new_str="a" * 100)  # 150 characters, over 100 but fewer
    await refused(lower, "would hold 152", command="create", path="/memories/c.md", file_text="cc")
    assert await stored(tool) == ({"/memories/a.md": "a" * 100, "/memories/b.md": "b" * 50}, 3)


async def test_str_replace_needs_exactly_one_occurrence(tool: AsyncAnthropicMemoryTool) -> None:
    """Zero or several occurrences change nothing (the lines of several are named); one is
    replaced, and the lines around it are shown."""
    await run(tool, command="create", path="/memories/a.md", file_text="one\ntwo\nthree two\n")
    edit = {"command": "str_replace", "path": "/memories/a.md"}
    await refused(tool, "did not appear verbatim", **edit, old_str="four", new_str="4")
    await refused(tool, "did not appear verbatim", **edit, old_str="", new_str="4")
    await refused(tool, "appears in lines 2, 3 of", **edit, old_str="two", new_str="2")
    await refused(
        tool, "does not exist", **edit | {"path": "/memories/b.md"}, old_str="o", new_str=""
    )
    assert await stored(tool) == ({"/memories/a.md": "one\ntwo\nthree two\n"}, 1)
    snippet = await run(tool, **edit, old_str="three", new_str="3")
    assert snippet.endswith("     1\tone\n     2\ttwo\n     3\t3 two\n     4\t")
    assert await stored(tool) == ({"/memories/a.md": "one\ntwo\n3 two\n"}, 2)


async def test_insert_takes_a_line_from_0_to_the_number_of_lines(
    tool: AsyncAnthropicMemoryTool,
) -> None:
    """Line 0 puts the text first, the line count puts it last; outside that range nothing
    changes."""
    await run(tool, command="create", path="/memories/a.md", file_text="one\ntwo\n")
    insert = {"command": "insert", "path": "/memories/a.md"}
    await refused(tool, r"in \[0, 2\]", **insert, insert_line=3, insert_text="x")
    await refused(tool, r"in \[0, 2\]", **insert, insert_line=-1, insert_text="x")
    await refused(
        tool, "not a file", **insert | {"path": "/memories"}, insert_line=0, insert_text="x"
    )
    assert (await stored(tool))[1] == 1
    await run(tool, **insert, insert_line=0, insert_text="zero\n")
    await run(tool, **insert, insert_line=3, insert_text="three\nfour")
    assert await stored(tool) == ({"/memories/a.md": "zero\none\ntwo\nthree\nfour\n"}, 3)


async def test_view_lists_two_levels_and_numbers_the_lines_of_a_file(
    tool: AsyncAnthropicMemoryTool,
) -> None:
    """A directory shows what is up to two levels below it (hidden names left out), a file
    its numbered lines, within view_range when given."""
    for path in ("/memories/p/a/deep.md", "/memories/p/b.md", "/memories/top.md", "/memories/.h"):
        await run(tool, command="create", path=path, file_text="x\ny\nz")
    listing = await run(tool, command="view", path="/memories")
    assert listing.splitlines()[1:] == [
        "20B\t/memories",
        "10B\t/memories/p/",
        "5B\t/memories/p/a/",
        "5B\t/memories/p/b.md",
        "5B\t/memories/top.md",
    ]
    assert await run(tool, command="view", path="/memories/p/") == await run(
        tool, command="view", path="/memories/p"
    )
    view = {"command": "view", "path": "/memories/top.md"}
    assert (await run(tool, **view)).splitlines()[1:] == ["     1\tx", "     2\ty", "     3\tz"]
    assert (await run(tool, **view, view_range=[2, -1])).splitlines()[1:] == [
        "     2\ty",
        "     3\tz",
    ]
    assert (await run(tool, **view, view_range=[0, 1])).splitlines()[1:] == ["     1\tx"]
    await refused(tool, "does not exist", command="view", path="/memories/nothing")


async def test_delete_and_rename_work_on_files_and_whole_directories(
    tool: AsyncAnthropicMemoryTool,
) -> None:
    """A directory is deleted or moved with everything in it; a move never lands on
    something that exists, nor into itself, and /memories itself stays put."""
    for path in ("/memories/p/a/plan.md", "/memories/p/b.md", "/memories/top.md"):
        await run(tool, command="create", path=path, file_text="x")
    move = {"command": "rename", "old_path": "/memories/p"}
    await refused(tool, "already exists", **move, new_path="/memories/top.md")
    await refused(
        tool,
        "already exists",
        command="rename",
        old_path="/memories/top.md",
        new_path="/memories/p",
    )
    await refused(tool, "into itself", **move, new_path="/memories/p/q")
    await refused(
        tool, "does not exist", command="rename", old_path="/memories/x", new_path="/memories/y"
    )
    await refused(
        tool, "directory itself", command="rename", old_path="/memories", new_path="/memories/y"
    )
    await refused(tool, "directory itself", command="delete", path="/memories/")
    await refused(tool, "does not exist", command="delete", path="/memories/x")
    assert (await stored(tool))[1] == 3
    await run(tool, **move, new_path="/memories/archive/p")
    await run(tool, command="rename", old_path="/memories/top.md", new_path="/memories/t/top.md")
    assert set((await stored(tool))[0]) == {
        "/memories/archive/p/a/plan.md",
        "/memories/archive/p/b.md",
        "/memories/t/top.md",
    }
    await run(tool, command="delete", path="/memories/archive/")
    await run(tool, command="delete", path="/memories/t/top.md")
    assert await stored(tool) == ({}, 7)


async def test_clear_all_memory_writes_an_empty_tree_as_a_version(
    tool: AsyncAnthropicMemoryTool,
) -> None:
    """The application's reset is a version like any other: the tree before it can still be
    read from the history (and rolled back)."""
    await run(tool, command="create", path="/memories/a.md", file_text="a")
    assert await tool.clear_all_memory() == "All memory cleared"
    assert await stored(tool) == ({}, 2)
    assert await tool.clear_all_memory() == "All memory cleared"  # already empty: no version
    key: dict[str, Any] = {"tenant_id": tool.tenant_id, "scope": "user", "owner_id": tool.owner_id}
    history = await tool.store.list_document_versions(**key)
    assert [(v.version, v.reason) for v in history] == [(2, "clear"), (1, "update")]
    assert tree(history[1].content) == {"/memories/a.md": "a"}


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("# Profile\n- likes tea", id="markdown"),
        pytest.param("[]", id="json-list"),
        pytest.param('{"notes": {}}', id="no-files"),
        pytest.param('{"files": ["/memories/a.md"]}', id="files-list"),
        pytest.param('{"files": {"/memories/a.md": 1}}', id="content-number"),
        pytest.param('{"files": {"/etc/passwd": "x"}}', id="path-outside"),
        pytest.param('{"files": {"/memories/../x": "x"}}', id="path-traversal"),
    ],
)
async def test_a_document_that_is_not_a_tree_is_a_tool_error(
    tool: AsyncAnthropicMemoryTool, content: str
) -> None:
    """Content someone else wrote there is neither read as files nor overwritten."""
    await tool.store.put_document(
        tenant_id=tool.tenant_id,
        scope="user",
        owner_id=tool.owner_id,
        content=content,
        expected_version=0,
    )
    for command in (
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/b.md", "file_text": "b"},
        {"command": "delete", "path": "/memories/a.md"},
    ):
        with pytest.raises(ToolError, match="not a tree of files"):
            await tool.call(command)
    with pytest.raises(ToolError, match="not a tree of files"):
        await tool.clear_all_memory()
    document = await tool.store.get_document(
        tenant_id=tool.tenant_id, scope="user", owner_id=tool.owner_id
    )
    assert (document.content, document.version) == (content, 1)


async def test_tenants_and_users_each_have_their_own_tree(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The same path of another user, or of the same user id in another tenant, is another
    file; and the user's agent memory is another document."""
    assert isinstance(store, DocumentStore)
    tools = {
        (t, u): AsyncAnthropicMemoryTool(store=store, tenant_id=t, user_id=u)
        for t in (tenant, f"{tenant}-b")
        for u in ("ada", "bob")
    }
    for (t, u), one in tools.items():
        await run(one, command="create", path="/memories/me.md", file_text=f"{u}@{t}")
    for (t, u), one in tools.items():
        assert await stored(one) == ({"/memories/me.md": f"{u}@{t}"}, 1)
    await run(tools[tenant, "ada"], command="delete", path="/memories/me.md")
    assert (await stored(tools[f"{tenant}-b", "ada"]))[0] == {"/memories/me.md": f"ada@{tenant}-b"}
    agent = wm.AgentMemory(store=store, config=wm.AgentMemoryConfig(scope="user"))
    assert await agent.get_working_memory(tenant_id=tenant, user_id="ada") is None


class WatchedStore:
    """A real store that counts the writes asked of it; with a `rival`, the first one loses
    the race: the rival writes first."""

    def __init__(
        self, store: DocumentStore, rival: Callable[[], Awaitable[object]] | None = None
    ) -> None:
        self.store, self.rival, self.writes = store, rival, 0

    async def get_document(
        self, *, tenant_id: str, scope: Scope, owner_id: str
    ) -> wm.WorkingMemoryDocument:
        return await self.store.get_document(tenant_id=tenant_id, scope=scope, owner_id=owner_id)

    async def put_document(
        self,
        *,
        tenant_id: str,
        scope: Scope,
        owner_id: str,
        content: str | None,
        expected_version: int | None,
        reason: DocumentReason = "update",
        keep_versions: int = DEFAULT_KEEP_VERSIONS,
    ) -> wm.WorkingMemoryDocument:
        self.writes += 1
        if self.writes == 1 and self.rival is not None:
            await self.rival()
        return await self.store.put_document(
            tenant_id=tenant_id,
            scope=scope,
            owner_id=owner_id,
            content=content,
            expected_version=expected_version,
            reason=reason,
            keep_versions=keep_versions,
        )

    async def delete_document(self, *, tenant_id: str, scope: Scope, owner_id: str) -> None:
        await self.store.delete_document(tenant_id=tenant_id, scope=scope, owner_id=owner_id)

    async def list_document_versions(
        self, *, tenant_id: str, scope: Scope, owner_id: str, limit: int = 20
    ) -> list[wm.WorkingMemoryDocument]:
        return await self.store.list_document_versions(
            tenant_id=tenant_id, scope=scope, owner_id=owner_id, limit=limit
        )

    async def get_document_version(
        self, *, tenant_id: str, scope: Scope, owner_id: str, version: int
    ) -> wm.WorkingMemoryDocument:
        return await self.store.get_document_version(
            tenant_id=tenant_id, scope=scope, owner_id=owner_id, version=version
        )


async def test_concurrent_creates_through_one_tool_lose_no_file(
    tool: AsyncAnthropicMemoryTool,
) -> None:
    """Many calls of one tool at once (the runner of one conversation, or several sharing
    the tool) take turns: every file is there, one version and one write each (none lost to
    a race)."""
    watched = WatchedStore(tool.store)
    many = AsyncAnthropicMemoryTool(store=watched, tenant_id=tool.tenant_id, user_id="ada")
    await asyncio.gather(
        *(
            run(many, command="create", path=f"/memories/f{n}.md", file_text=str(n))
            for n in range(40)
        )
    )
    assert await stored(many) == ({f"/memories/f{n}.md": str(n) for n in range(40)}, 40)
    assert watched.writes == 40


async def test_concurrent_creates_through_several_tools_lose_no_file(
    tool: AsyncAnthropicMemoryTool,
) -> None:
    """Tools that do not share a lock (as in several processes) race on the version: the
    losers re-read and re-apply, so every file is there."""
    tools = [
        AsyncAnthropicMemoryTool(store=tool.store, tenant_id=tool.tenant_id, user_id="ada")
        for _ in range(4)
    ]
    await asyncio.gather(
        *(
            run(tools[n % 4], command="create", path=f"/memories/f{n}.md", file_text=str(n))
            for n in range(16)
        )
    )
    assert await stored(tool) == ({f"/memories/f{n}.md": str(n) for n in range(16)}, 16)


async def test_a_lost_race_is_re_read_and_re_applied(tool: AsyncAnthropicMemoryTool) -> None:
    """The write that loses to another writer's is applied again to what that writer left:
    both files stay, two versions."""
    rival = AsyncAnthropicMemoryTool(store=tool.store, tenant_id=tool.tenant_id, user_id="ada")
    losing = WatchedStore(
        tool.store,
        lambda: run(rival, command="create", path="/memories/theirs.md", file_text="theirs"),
    )
    ours = AsyncAnthropicMemoryTool(store=losing, tenant_id=tool.tenant_id, user_id="ada")
    await run(ours, command="create", path="/memories/ours.md", file_text="ours")
    assert losing.writes == 2
    assert await stored(tool) == ({"/memories/theirs.md": "theirs", "/memories/ours.md": "ours"}, 2)


def test_bad_settings_are_refused_at_construction(store: wm.ThreadStore) -> None:
    """The ids come from the application and are checked like every other id."""
    assert isinstance(store, DocumentStore)
    settings: dict[str, Any]
    for settings in (
        {"tenant_id": "", "user_id": "ada"},
        {"tenant_id": "t", "user_id": "a" * MAX_ID_CHARS},  # with the prefix, over the limit
        {"tenant_id": "t", "user_id": " "},
        {"tenant_id": "t", "user_id": "ada", "max_chars": 0},
        {"tenant_id": "t", "user_id": "ada", "max_chars": True},
        {"tenant_id": "t", "user_id": "ada", "keep_versions": 0},
    ):
        with pytest.raises(wm.ValidationError):
            AsyncAnthropicMemoryTool(store=store, **settings)
        with pytest.raises(wm.ValidationError):
            AnthropicMemoryTool(store=store, **settings)


def test_the_module_exports_its_public_names() -> None:
    """__all__ resolves, and the prefix is the store module's own (one definition, which the
    agent memory refuses as a user id)."""
    for name in anthropic_memory.__all__:
        assert hasattr(anthropic_memory, name), name
    assert anthropic_memory.MEMORY_FILES_PREFIX is wm.stores.documents.MEMORY_FILES_PREFIX
