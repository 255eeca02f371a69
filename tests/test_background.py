"""The background queue: returns at once, one job at a time per key, coalescing, never raising."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from workingmem.background import BackgroundQueue


async def test_submit_returns_at_once_and_when_idle_waits_for_the_job() -> None:
    done = asyncio.Event()

    async def job() -> None:
        await asyncio.sleep(0.05)
        done.set()

    async with BackgroundQueue() as queue:
        queue.submit("k", job)
        assert not done.is_set()
        await queue.when_idle()
        assert done.is_set()
        assert queue.completed == 1


async def test_ten_submits_while_one_runs_give_one_more_run() -> None:
    """Coalescing: the runs of one key never overlap, and a burst costs one extra run."""
    running = 0
    runs = 0
    release = asyncio.Event()

    async def job() -> None:
        nonlocal running, runs
        running += 1
        assert running == 1, "two runs of one key overlapped"
        runs += 1
        await release.wait()
        running -= 1

    async with BackgroundQueue(workers=4) as queue:
        queue.submit("thread", job)
        await asyncio.sleep(0.01)
        for _ in range(10):
            queue.submit("thread", job)
        release.set()
        await queue.when_idle()
    assert runs == 2


async def test_different_keys_run_concurrently() -> None:
    started = 0
    both = asyncio.Event()

    async def job() -> None:
        nonlocal started
        started += 1
        if started == 2:
            both.set()
        await asyncio.wait_for(both.wait(), timeout=2)

    async with BackgroundQueue(workers=2) as queue:
        queue.submit("a", job)
        queue.submit("b", job)
        await queue.when_idle()
    assert queue.failures == 0


async def test_a_failing_job_is_counted_and_logged_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def boom() -> None:
        raise RuntimeError("upstream exploded")

    ok = asyncio.Event()

    async def fine() -> None:
        ok.set()

    async with BackgroundQueue(workers=1) as queue:
        queue.submit("a", boom)
        queue.submit("b", fine)
        await queue.when_idle()
    assert queue.failures == 1
    assert ok.is_set()
    assert "upstream exploded" in caplog.text


async def test_close_drains_queued_jobs() -> None:
    ran: list[str] = []

    def make(name: str):  # type: ignore[no-untyped-def]
        async def job() -> None:
            await asyncio.sleep(0.01)
            ran.append(name)

        return job

    queue = BackgroundQueue(workers=1)
    for name in "abc":
        queue.submit(name, make(name))
    await queue.aclose()
    assert sorted(ran) == ["a", "b", "c"]
    assert not queue.submit("d", make("d"))


async def test_close_with_cancel_drops_waiting_jobs_and_stops() -> None:
    ran: list[str] = []
    gate = asyncio.Event()

    async def slow() -> None:
        await gate.wait()
        ran.append("slow")

    async def later() -> None:
        ran.append("later")

    queue = BackgroundQueue(workers=1)
    queue.submit("a", slow)
    queue.submit("b", later)
    await asyncio.sleep(0.01)
    await asyncio.wait_for(queue.aclose(cancel=True), timeout=2)
    assert ran == []
    assert queue.depth == 0


async def test_a_job_whose_clean_up_swallows_its_cancellation_still_stops_its_worker() -> None:
    """A job cancelled while its store was closed under it raises from its clean-up, and so
    replaces the cancellation with an error that it logs: the worker must still stop, or the
    loop's shutdown waits for it forever."""
    started = asyncio.Event()

    async def job() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            raise RuntimeError("cannot schedule new futures after shutdown")

    async def swallowing() -> None:
        with contextlib.suppress(Exception):  # a memory update reports failures, never raises
            await job()

    queue = BackgroundQueue(workers=1)
    queue.submit("k", swallowing)
    await started.wait()
    [worker] = queue._workers
    worker.cancel()
    await asyncio.wait({worker}, timeout=10)  # a bound on failure: it ends at once, or never
    assert worker.cancelled()
