"""`workingmem serve --workers N`: N processes on one port and one database.

The settings reach the workers through the environment (`ServiceSettings.to_json`, read back by
`from_env`, so `create_app()` is the workers' factory) whole, the upstream's key apart. A real
`serve --workers 2` starts two worker processes; each answers alone while the other is stopped,
and every answer lands in the one database.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from functools import partial
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

import workingmem as wm
from workingmem.llm.testing import ScriptedUpstream
from workingmem.service import ServiceSettings
from workingmem.service.settings import SETTINGS_ENV

from .conftest import CONFIG, TEMPLATE
from .live import create_key, free_port, wait_for

READY_SECONDS = 30.0


def test_settings_cross_to_another_process_whole_but_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a worker rebuilds equals what the parent had; the key is not written, the worker
    reads it from its environment as the parent did."""
    settings = ServiceSettings(
        database_url="sqlite:///memory.db",
        upstream_base_url="http://127.0.0.1:9/v1",
        upstream_api_key="sk-secret-not-copied",
        upstream_api="responses",
        upstream_timeout=12.5,
        upstream_max_retries=3,
        gateway=CONFIG,
        profiles=(wm.Profile(id="window", working_memory=wm.Strategy.SLIDING_WINDOW),),
        agent_memory=wm.AgentMemoryConfig(template=TEMPLATE, scope="user", max_chars=900),
        require_keys=True,
        max_body_bytes=1_000,
        recall_ratio=0.4,
        local_model_path="/models/qwen2.5-0.5b-instruct-q4_k_m.gguf",
        local_model_sha256="ab" * 32,
        tune_gc=True,
    )
    written = settings.to_json()
    assert "sk-secret-not-copied" not in written
    monkeypatch.setenv(SETTINGS_ENV, written)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-workers-own")
    assert ServiceSettings.from_env() == ServiceSettings(
        **{**vars(settings), "upstream_api_key": "sk-the-workers-own"}
    )
    schema = wm.AgentMemoryConfig(schema={"type": "object", "properties": {}})
    with_schema = ServiceSettings(agent_memory=schema)
    assert ServiceSettings.from_json(with_schema.to_json()) == with_schema


def test_settings_that_cannot_cross_say_why() -> None:
    from pydantic import BaseModel

    class Notes(BaseModel):
        name: str = ""

    with pytest.raises(wm.ValidationError, match="JSON Schema"):
        ServiceSettings(agent_memory=wm.AgentMemoryConfig(schema=Notes)).to_json()
    with pytest.raises(wm.ValidationError) as caught:
        ServiceSettings.from_json('{"database_url": null}')
    assert caught.value.field == SETTINGS_ENV
    with pytest.raises(wm.ValidationError) as unknown:
        ServiceSettings(upstream_api="soap")  # type: ignore[arg-type]
    assert unknown.value.field == "upstream_api"
    with pytest.raises(wm.ValidationError) as caught:
        ServiceSettings.from_json('{"gateway": {"default_model": ""}, "profiles": []}')
    assert caught.value.field == SETTINGS_ENV


def _workers(pid: int) -> list[int]:
    """The worker processes under a uvicorn supervisor (not multiprocessing's tracker)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with_args = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"spawn_main" in with_args:
                found.append(int(child))
    return sorted(found)


def _loaded(maps: Path, module: str) -> bool:
    """Whether a process has mapped the module's compiled library."""
    return f"/{module}/" in maps.read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, sends SIGSTOP")
def test_serve_with_two_workers_answers_from_both_into_one_database(
    database_url: str, upstream: ScriptedUpstream
) -> None:
    database = database_url
    tenant = f"workers-{uuid.uuid4().hex[:8]}"
    key = create_key(database, tenant).secret
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).with_name("workingmem")), "serve", "--db", database]
    command += ["--upstream", upstream.base_url, "--port", str(port), "--workers", "2"]
    server = subprocess.Popen(
        command,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    threads: list[str] = []
    memory: list[str] = []

    def ask(client: httpx.Client, label: str) -> None:
        thread_id = f"{label}-{len(threads)}"
        response = client.post(
            f"{base}/v1/chat/completions",
            headers={"Authorization": f"Bearer {key}", "X-Thread-Id": thread_id},
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": label}]},
        )
        assert response.status_code == 200, response.text
        threads.append(thread_id)

    def healthy() -> bool:
        return httpx.get(f"{base}/healthz", timeout=0.5).status_code == 200

    def remember(line: str) -> str:
        """Adds `line` to the user's working memory over MCP; returns what was there before."""

        async def call() -> str:
            headers = {"Authorization": f"Bearer {key}", "X-User-Id": "ada"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=4.0) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
            ):
                before = await client.call_tool("get_working_memory", {})
                text = before.content[0].text if isinstance(before.content[0], TextContent) else ""
                known = "" if "empty" in text else text
                saved = await client.call_tool("update_working_memory", {"content": known + line})
                assert not saved.is_error, saved
                return known

        return asyncio.run(call())

    stopped: list[int] = []
    try:
        wait_for(
            lambda: len(_workers(server.pid)) == 2, "two worker processes started", READY_SECONDS
        )
        workers = _workers(server.pid)
        for pid in workers:  # the server extra's; uvicorn's loop="auto", http="auto" pick them
            maps = Path(f"/proc/{pid}/maps")
            wait_for(partial(_loaded, maps, "httptools"), "httptools loaded", READY_SECONDS)
            assert _loaded(maps, "uvloop")
        wait_for(healthy, "the server answering", READY_SECONDS)
        for _ in range(6):  # warm: a worker's first answer loads what answering needs
            with httpx.Client(timeout=10.0) as client:
                ask(client, "warm")
        # A stopped worker is one that uvicorn's supervisor kills and replaces once it misses
        # its health check (5 s): each worker is stopped only for one warm answer of the other.
        for alone in workers:
            others = [pid for pid in workers if pid != alone]
            for pid in others:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            with httpx.Client(timeout=4.0) as client:  # a new connection: any worker may
                ask(client, f"to-{alone}")  # take it, but only one is running
            memory.append(remember(f"seen by {alone}\n"))  # MCP: no session to lose
            for pid in others:
                os.kill(pid, signal.SIGCONT)
                stopped.remove(pid)
            assert _workers(server.pid) == workers  # none was replaced meanwhile
        with httpx.Client(timeout=10.0) as client:  # both running, one connection
            for _ in range(4):
                ask(client, "shared")
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        server.send_signal(signal.SIGTERM)
        try:
            output, _ = server.communicate(timeout=READY_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            output, _ = server.communicate()
    assert server.returncode == 0, output
    assert "Workers: 2 processes" in output
    assert output.count("Application shutdown complete") == 2, output
    # the package's own log on the same console, with its logger's name: a line per model call
    assert output.count("workingmem.llm: llm.call ") >= len(threads), output

    async def stored() -> dict[str, int]:
        async with await wm.open_store(database) as store:
            found = await store.list_threads(tenant_id=tenant, limit=100)
            return {thread.thread_id: thread.turn_count for thread in found}

    assert asyncio.run(stored()) == dict.fromkeys(threads, 2)
    assert memory == ["", f"seen by {workers[0]}\n"]  # the second worker read what the first wrote
    assert len(upstream.requests) == len(threads) == 6 + 2 + 4  # warm, alone, shared
