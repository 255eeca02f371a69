"""Claude's memory tool kept in workingmem: the anthropic SDK's tool runner over real HTTP
against a scripted Messages upstream (each command's edge cases against a real store are in
`test_anthropic_memory_commands.py`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from fastapi import FastAPI, Request

import workingmem as wm
from tests.service.live import LiveServer, run_async
from workingmem.integrations.anthropic_memory import (
    MEMORY_FILES_PREFIX,
    AnthropicMemoryTool,
    AsyncAnthropicMemoryTool,
)
from workingmem.stores.documents import DocumentStore

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
