"""The app owns what it builds: the lifespan opens the store and starts the background queue;
shutdown drains the queue, so a memory update still running is finished, not lost."""

from __future__ import annotations

import asyncio
from typing import Any

import openai

import workingmem as wm
from workingmem.llm.testing import Delay, Reply, ScriptedUpstream
from workingmem.service import create_app

from .conftest import answering, settings_for
from .live import LiveServer, create_key


def slow_helper(request: dict[str, Any]) -> Reply | Delay:
    """Answers at once; the summary update takes a while."""
    reply = answering(request)
    return Delay(0.5, then=reply) if "response_format" in request else reply


def test_shutdown_drains_the_background_queue(database_url: str, tenant: str) -> None:
    key = create_key(database_url, tenant).secret
    with ScriptedUpstream(responder=slow_helper) as upstream:
        settings = settings_for(database_url, upstream)
        with (
            LiveServer(create_app(settings)) as live,
            openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as client,
        ):
            for text in ("please remember: I am Ada", "hello"):
                client.chat.completions.create(
                    model="answer-model",
                    messages=[{"role": "user", "content": text}],
                    extra_headers={"X-Thread-Id": "th"},
                )
        # the server has stopped: the update that was due must have been written
        helper_calls = [r for r in upstream.requests if "response_format" in r]
    assert len(helper_calls) == 1

    async def state() -> wm.WorkingMemoryState:
        async with await wm.open_store(database_url) as store:
            return await store.get_memory_state(tenant_id=tenant, thread_id="th")

    written = asyncio.run(state())
    assert written.turn_count == 4
    assert written.facts == ["please remember: I am Ada"]
