"""The app owns what it builds: the lifespan opens the store and starts the background queue;
shutdown drains the queue, so a memory update still running is finished, not lost."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import workingmem as wm
from workingmem.llm.testing import Delay, Reply, ScriptedUpstream
from workingmem.service import create_app
from workingmem.service.collector import YOUNG_THRESHOLD

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


@pytest.fixture
def collector() -> Iterator[None]:
    """The process's collector as it was, after the test (the suite shares the process)."""
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("collector")
@pytest.mark.parametrize("tune_gc", [True, False])
def test_a_server_of_its_own_sets_its_startup_out_of_the_collectors_reach(
    tmp_path: Path, tune_gc: bool
) -> None:
    """`workingmem serve`'s process (tune_gc): once started, what startup built is frozen and
    the young generation is collected every YOUNG_THRESHOLD objects; an app that shares its
    process leaves the collector as it was."""
    gc.unfreeze()
    before = gc.get_threshold()
    with ScriptedUpstream(responder=answering) as upstream:
        settings = replace(
            settings_for(f"sqlite:///{tmp_path / 'm.db'}", upstream), tune_gc=tune_gc
        )
        with LiveServer(create_app(settings)) as live:
            assert httpx.get(f"{live.url}/healthz").status_code == 200
            frozen, threshold = gc.get_freeze_count(), gc.get_threshold()
    if tune_gc:
        assert frozen > 10_000  # the modules, schemas and routes a started server holds
        assert threshold == (YOUNG_THRESHOLD, *before[1:])
    else:
        assert (frozen, threshold) == (0, before)
