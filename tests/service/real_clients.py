"""What the tests of real clients (the AI SDK, Claude Code, the Codex CLI, aider) share: running the
client in a process of its own, reading a message's text in any API's shape, and the one
thread a client's session must be."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

__all__ = ["run_client", "text_of", "the_thread"]


def run_client(
    command: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The client's run to its end (two minutes at most), its output captured."""
    return subprocess.run(
        list(command),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def text_of(content: Any) -> str:
    """A message's text: its string, or its blocks' (or parts') texts."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or () if isinstance(b, dict))


def the_thread(url: str, key: str) -> list[dict[str, Any]]:
    """The messages of the tenant's only thread (the REST API's view), asserting it is one."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as rest:
        threads = rest.get("/v1/threads").json()["data"]
        assert len(threads) == 1, threads
        page = rest.get(f"/v1/threads/{threads[0]['id']}/messages", params={"limit": 100})
        found: list[dict[str, Any]] = page.json()["data"]
        return found


def images_sent(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The URLs of the images a chat request's messages carry (a chat model reads them)."""
    return [
        part["image_url"]["url"]
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]
