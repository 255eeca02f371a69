"""Claude's memory tool kept in workingmem, command by command against a real store (SQLite
and PostgreSQL): paths outside the memories, malformed commands, the cap, each command's
edges, tenants and users apart, concurrent writers, bad settings."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from anthropic.lib.tools import ToolError

import workingmem as wm
from tests.integrations.test_anthropic_memory import tree
from workingmem.integrations import anthropic_memory
from workingmem.integrations.anthropic_memory import (
    AnthropicMemoryTool,
    AsyncAnthropicMemoryTool,
)
from workingmem.messages import MAX_ID_CHARS
from workingmem.stores.documents import DEFAULT_KEEP_VERSIONS, DocumentReason, DocumentStore, Scope

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
