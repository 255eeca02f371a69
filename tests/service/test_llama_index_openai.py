"""LlamaIndex's own OpenAI LLM (``llama-index-llms-openai``, which pins openai<3), over real
HTTP: a `FunctionAgent` with a tool whose history is a `WorkingMemoryBuffer`, and the same agent
with the gateway as its model. The LLM runs in ``tests/clients/llama-index/.venv`` (made by
``scripts/install dev``): the project's own environment has openai 3."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import workingmem as wm
from workingmem.llm.testing import ScriptedUpstream

from .live import LiveServer, run_async
from .real_clients import run_client
from .test_openai_clients import agent_upstream
from .test_responses_api import turns

CLIENT = Path(__file__).parents[1] / "clients" / "llama-index"
PYTHON = CLIENT / ".venv" / "bin" / "python"
pytestmark = pytest.mark.skipif(
    not PYTHON.exists(),
    reason="LlamaIndex's OpenAI LLM needs its environment: tests/clients/llama-index/.venv "
    "(scripts/install dev)",
)

ANSWERS = ["You said: My name is Ada.", "It is sunny in Lyon there.", "You said: Thanks"]
THREAD = [
    ("user", "My name is Ada."),
    ("assistant", "You said: My name is Ada."),
    ("user", "What is the weather in Lyon?"),
    ("assistant", None),  # the call of get_weather
    ("tool", "sunny in Lyon"),
    ("assistant", "It is sunny in Lyon there."),
    ("user", "Thanks"),
    ("assistant", "You said: Thanks"),
]


def test_the_buffer_keeps_the_runs_of_an_agent_on_llama_index_s_openai_llm(
    upstream: ScriptedUpstream, database_url: str, tenant: str
) -> None:
    upstream.responder = agent_upstream
    command = [str(PYTHON), "agent.py", "memory", upstream.base_url, database_url, tenant]
    ran = run_client(command, cwd=CLIENT)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["answers"] == ANSWERS

    async def stored() -> list[wm.Turn]:
        async with await wm.open_store(database_url) as store:
            return await store.list_turns(tenant_id=tenant, thread_id="support-42")

    thread = run_async(stored)
    assert [(turn.role, turn.content or None) for turn in thread] == THREAD
    assert thread[3].tool_calls[0].id == thread[4].tool_call_id
    # the model read the thread back from the buffer: the last run's request holds it all
    *_, last = upstream.requests
    assert [m["role"] for m in last["messages"] if m["role"] != "system"] == [
        role for role, _ in THREAD[:-1]
    ]


def test_llama_index_s_openai_llm_through_the_gateway_is_one_thread(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    upstream.responder = agent_upstream
    command = [str(PYTHON), "agent.py", "gateway", f"{service.url}/v1", key]
    ran = run_client(command, cwd=CLIENT)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["answers"] == [*ANSWERS, "You said: Streamed hello"]
    stored = [(m["role"], m.get("content")) for m in turns(api, "li-thread")]
    assert stored == [
        *THREAD,
        ("user", "Streamed hello"),
        ("assistant", "You said: Streamed hello"),
    ]
