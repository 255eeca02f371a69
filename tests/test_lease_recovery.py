"""A crashed updater blocks a thread's summary for seconds, not minutes; a live one keeps it.

The updater's lease is short (`update_lease_seconds`) and renewed while it works. Killed with
SIGKILL mid-update (a real process, in the middle of its helper call), its lease runs out
within that time and the next update goes through. The waits here are for a lease to expire
or to outlive its time: time is what is tested, so they are bounded loops on the clock.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import workingmem as wm
from tests.helpers import DEFAULT_PROFILE, assistant, summarizing_responder, user
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream

CONFIG = wm.WorkingMemoryConfig(recent_turns=6, update_every_turns=6)
LEASE = 2.0

UPDATER = """
import asyncio, sys
import workingmem as wm

async def main(db: str, url: str, lease: float) -> None:
    async with await wm.open_store(db) as store, wm.OpenAIClient(
        base_url=url, api_key="k", max_retries=0, timeout=600
    ) as llm:
        memory = wm.WorkingMemory(
            store=store,
            config=wm.WorkingMemoryConfig(recent_turns=6, update_every_turns=6),
            llm=llm,
            update_lease_seconds=lease,
        )
        await memory.update_summary(
            tenant_id="t", thread_id="th", user_id=None,
            profile=wm.Profile(id="default"), cheap_model_id="cheap",
        )

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""


class FirstCallHeld:
    """A cheap model whose first call never answers (until released); the rest summarize."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()
        self._first = True

    def __call__(self, request: dict[str, Any]) -> Reply:
        if self._first:
            self._first = False
            self.held.set()
            self.release.wait(120)
        return summarizing_responder(request)


async def _seed(db: str) -> None:
    async with await wm.open_store(db) as store:
        await store.append(
            tenant_id="t",
            thread_id="th",
            messages=[m for i in range(6) for m in (user(f"q{i}"), assistant(f"a{i}"))],
        )


async def _update(memory: wm.WorkingMemory) -> wm.UpdateReport:
    return await memory.update_summary(
        tenant_id="t", thread_id="th", user_id=None, profile=DEFAULT_PROFILE, cheap_model_id="cheap"
    )


async def test_an_updater_killed_mid_update_blocks_the_thread_for_seconds_only(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "memory.db")
    await _seed(db)
    model = FirstCallHeld()
    with ScriptedUpstream(responder=model) as upstream:
        dying = await asyncio.create_subprocess_exec(
            sys.executable, "-c", UPDATER, db, upstream.base_url, str(LEASE)
        )
        try:
            assert await asyncio.to_thread(model.held.wait, 60), "the updater never called"
        finally:
            os.kill(dying.pid, signal.SIGKILL)
            await dying.wait()
        killed = time.monotonic()
        async with (
            OpenAIClient(base_url=upstream.base_url, api_key="k", max_retries=0) as llm,
            await wm.open_store(db) as store,
        ):
            memory = wm.WorkingMemory(store=store, config=CONFIG, llm=llm)
            outcomes = []
            while (report := await _update(memory)).outcome is wm.UpdateOutcome.BUSY:
                outcomes.append(report.outcome)
                assert time.monotonic() - killed < LEASE + 10, "the dead updater's lease held"
                await asyncio.sleep(0.1)  # until the lease's time is up: time is the subject
            recovered = time.monotonic() - killed
            state = await memory.get_state(tenant_id="t", thread_id="th")
        model.release.set()
    assert report.outcome is wm.UpdateOutcome.UPDATED, report.detail
    assert state.summary
    assert outcomes, "the lease was free at once: the kill did not land mid-update"
    assert recovered <= LEASE + 5


async def test_a_live_updater_keeps_its_lease_past_its_time(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    await _seed(db)
    model = FirstCallHeld()
    with ScriptedUpstream(responder=model) as upstream:
        async with (
            OpenAIClient(base_url=upstream.base_url, api_key="k", max_retries=0) as llm,
            await wm.open_store(db) as store,
        ):
            slow = wm.WorkingMemory(store=store, config=CONFIG, llm=llm, update_lease_seconds=1.0)
            other = wm.WorkingMemory(store=store, config=CONFIG, llm=llm)
            first = asyncio.create_task(_update(slow))
            assert await asyncio.to_thread(model.held.wait, 30)
            await asyncio.sleep(2.5)  # more than twice the lease's time: it must be renewed
            busy = await _update(other)
            model.release.set()
            done = await first
    assert busy.outcome is wm.UpdateOutcome.BUSY
    assert done.outcome is wm.UpdateOutcome.UPDATED, done.detail
