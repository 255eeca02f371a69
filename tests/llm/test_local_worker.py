"""The local model's worker process: crashes, priorities, cancels, and the build it runs.

The model runs for real in a child process; the crashes are real signals sent to it
(SIGSEGV, as llama.cpp's faulting AMX path sent itself), at points the client's own
`on_dispatch` hook and the stream's first delta mark, never after a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from workingmem.llm import CallKind, CallMeta, LLMError, TextDelta
from workingmem.llm._local_worker import _without_extra_buffers
from workingmem.llm.local import LOCAL_MODEL, LocalModelClient

from .local_model import require_local_model
from .test_local import CAPITAL, META, STORY

BACKGROUND = CallMeta(tenant_id="t1", kind=CallKind.MEMORY_WORKING, model=LOCAL_MODEL)


class Dispatches:
    """The pids the client handed generations to, and an action for the next one."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.next_action: Callable[[int], object] | None = None
        self._seen = threading.Semaphore(0)
        self._gate: threading.Event | None = None

    def hold_next(self, gate: threading.Event) -> None:
        """The next generation is seen (`wait` returns), then held until `gate` is set."""
        self._gate = gate

    def __call__(self, pid: int) -> None:  # on the client's driver thread
        self.pids.append(pid)
        action, self.next_action = self.next_action, None
        gate, self._gate = self._gate, None
        if action is not None:
            action(pid)
        self._seen.release()
        if gate is not None:
            gate.wait(30)

    async def wait(self) -> int:
        """The pid of the next generation handed to the worker."""
        await asyncio.to_thread(self._seen.acquire)
        return self.pids[-1]


@pytest.fixture
def dispatches() -> Dispatches:
    return Dispatches()


@pytest.fixture
def client(dispatches: Dispatches) -> Iterator[LocalModelClient]:
    require_local_model()
    local = LocalModelClient(on_dispatch=dispatches)
    try:
        yield local
    finally:
        asyncio.run(local.aclose())


def crash(pid: int) -> None:
    os.kill(pid, signal.SIGSEGV)


async def test_a_worker_killed_mid_stream_fails_the_call_and_the_next_call_answers(
    client: LocalModelClient,
) -> None:
    events = client.stream(model=LOCAL_MODEL, messages=STORY, meta=META, max_tokens=400)
    async with contextlib.aclosing(events):
        first = await anext(events)
        assert isinstance(first, TextDelta)
        dead = client.worker_pid
        assert dead is not None
        crash(dead)
        with pytest.raises(LLMError, match="SIGSEGV") as caught:
            async for _ in events:
                pass
    assert caught.value.retryable
    assert "next call starts a new worker" in str(caught.value)
    answer = await client.complete(model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=8)
    assert answer.text.strip()
    assert client.worker_pid not in (None, dead)
    assert (client.stats.worker_starts, client.stats.worker_crashes) == (2, 1)


async def test_a_worker_killed_mid_completion_fails_only_that_call(
    client: LocalModelClient, dispatches: Dispatches
) -> None:
    dispatches.next_action = crash
    with pytest.raises(LLMError, match="worker process was killed by SIGSEGV"):
        await client.complete(model=LOCAL_MODEL, messages=STORY, meta=META, max_tokens=400)
    answer = await client.complete(model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=8)
    assert answer.text.strip()
    assert len(set(dispatches.pids)) == 2


async def test_a_worker_that_died_between_calls_is_replaced_without_an_error(
    client: LocalModelClient,
) -> None:
    """Killed while idle and not yet reaped, or long gone: either way the next call is
    handed to a new worker and answers."""
    info = await client.load()
    os.kill(info.pid, signal.SIGKILL)
    answer = await client.complete(model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=8)
    assert answer.text.strip()
    assert client.worker_pid != info.pid
    assert client.stats.worker_starts == 2


async def test_the_waiting_users_call_goes_before_a_running_background_one(
    client: LocalModelClient, dispatches: Dispatches
) -> None:
    """A summary update running when an answer is asked for stops at its next token, the
    answer runs, then the update runs again from its start and completes."""
    finished: list[str] = []

    async def call(name: str, meta: CallMeta, max_tokens: int) -> str:
        completion = await client.complete(
            model=LOCAL_MODEL, messages=STORY, meta=meta, max_tokens=max_tokens
        )
        finished.append(name)
        return completion.text

    background = asyncio.create_task(call("background", BACKGROUND, 300))
    await dispatches.wait()
    answer = await call("answer", META, 8)
    summary = await background
    assert finished == ["answer", "background"]
    assert answer.strip()
    assert summary.strip()
    assert client.stats.preempted == 1
    assert len(dispatches.pids) == 3  # background, answer, background again


async def test_queued_calls_run_foreground_first(
    client: LocalModelClient, dispatches: Dispatches
) -> None:
    await client.load()
    gate = threading.Event()
    dispatches.hold_next(gate)  # the driver is held on the first call until both are queued
    finished: list[str] = []

    async def call(name: str, meta: CallMeta) -> None:
        await client.complete(model=LOCAL_MODEL, messages=CAPITAL, meta=meta, max_tokens=4)
        finished.append(name)

    first = asyncio.create_task(call("first answer", META))
    await dispatches.wait()
    later = [
        asyncio.create_task(call("summary", BACKGROUND)),
        asyncio.create_task(call("second answer", META)),
    ]
    await asyncio.sleep(0)  # let both submit (no ordering depends on time: the gate holds)
    gate.set()
    await asyncio.gather(first, *later)
    assert finished == ["first answer", "second answer", "summary"]


async def test_a_cancelled_call_stops_its_generation(
    client: LocalModelClient, dispatches: Dispatches
) -> None:
    task = asyncio.create_task(
        client.complete(model=LOCAL_MODEL, messages=STORY, meta=META, max_tokens=800)
    )
    await dispatches.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answer = await asyncio.wait_for(
        client.complete(model=LOCAL_MODEL, messages=CAPITAL, meta=META, max_tokens=8), 60
    )
    assert answer.text.strip()
    assert client.stats.cancelled == 1
    assert client.stats.generations == 1


async def test_the_worker_sleeps_instead_of_spin_waiting(client: LocalModelClient) -> None:
    info = await client.load()
    environment = (await asyncio.to_thread(Path(f"/proc/{info.pid}/environ").read_bytes)).split(
        b"\0"
    )
    expected = os.environ.get("OMP_WAIT_POLICY", "PASSIVE").encode()
    assert b"OMP_WAIT_POLICY=" + expected in environment
    assert client.n_threads == 1


async def test_the_installed_llama_cpp_is_the_portable_build(client: LocalModelClient) -> None:
    """scripts/install builds for the x86-64 baseline: AVX2, never AMX or AVX-512, which a
    virtual machine may advertise and fault on."""
    info = await client.load()
    features = {
        name.strip(): value.strip()
        for name, _, value in (part.partition("=") for part in info.system_info.split("|"))
        if value
    }
    if os.uname().machine == "x86_64":
        assert features.get("AVX2") == "1", info.system_info
    assert not {name for name, on in features.items() if on == "1"} & {
        "AMX_INT8",
        "AMX_BF16",
        "AVX512",
        "AVX512_VBMI",
        "AVX512_VNNI",
        "AVX512_BF16",
    }, info.system_info


def test_models_load_without_extra_buffer_types() -> None:
    """The worker's llama.cpp parameters: no repacking buffers (where AMX code runs)."""
    require_local_model()
    import llama_cpp.llama_cpp as native

    class Namespace:
        llama_model_default_params = staticmethod(native.llama_model_default_params)

    assert native.llama_model_default_params().use_extra_bufts
    _without_extra_buffers(Namespace)
    assert Namespace.llama_model_default_params().use_extra_bufts is False


async def test_a_summary_update_whose_worker_dies_is_reported_and_the_next_one_succeeds(
    client: LocalModelClient, dispatches: Dispatches, tmp_path: Path
) -> None:
    """The background update fails with the state untouched; the next due call retries it
    on a new worker and writes the summary."""
    import workingmem as wm
    from workingmem.embedded import LOCAL_GATEWAY_CONFIG, local_templates
    from workingmem.types import UpdateOutcome

    reports: list[wm.UpdateReport] = []
    async with await wm.open_store(str(tmp_path / "memory.db")) as store:
        memory = wm.WorkingMemory(
            store=store,
            config=LOCAL_GATEWAY_CONFIG.working_memory,
            llm=client,
            templates=local_templates(),
            on_report=reports.append,
        )
        # Dated turns: the helper's prompt shows each turn's time, so the same prompt (and,
        # seeded, the same answer) on every run rather than one that changes by the minute.
        start = datetime(2026, 12, 3, 9, 7, tzinfo=UTC)
        for index in range(3):
            await store.append(
                tenant_id="t1",
                thread_id="th1",
                messages=[
                    {"role": "user", "content": f"I'm Ada from Lyon; message {index}."},
                    {"role": "assistant", "content": "Noted, Ada."},
                ],
                created_at=[
                    start + timedelta(minutes=index),
                    start + timedelta(minutes=index, seconds=5),
                ],
            )
        update = {
            "tenant_id": "t1",
            "thread_id": "th1",
            "user_id": None,
            "profile": wm.Profile(id="default"),
            "cheap_model_id": LOCAL_MODEL,
        }
        dispatches.next_action = crash
        failed = await memory.update_summary(**update)  # type: ignore[arg-type]
        assert failed.outcome is UpdateOutcome.UPSTREAM_ERROR
        assert "SIGSEGV" in failed.detail
        assert (await memory.get_state(tenant_id="t1", thread_id="th1")).version == 0
        retried = await memory.update_summary(**update)  # type: ignore[arg-type]
        assert retried.outcome is UpdateOutcome.UPDATED, retried.detail
        assert (await memory.get_state(tenant_id="t1", thread_id="th1")).summary
    assert [report.outcome for report in reports] == [
        UpdateOutcome.UPSTREAM_ERROR,
        UpdateOutcome.UPDATED,
    ]
