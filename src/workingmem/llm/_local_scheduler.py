"""The local model's worker process and the queue in front of it.

    scheduler = Scheduler(settings, on_dispatch=None)
    job = scheduler.submit(request, background=False, stream=True)   # from any event loop
    event = await job.events.get()      # TextDelta..., then a Completion or an exception
    scheduler.abandon(job)              # the caller left: skipped, or stopped at its next token
    scheduler.close()                   # blocking: after the queued jobs, the worker ends

One thread (the driver) hands jobs to the worker one at a time, best first: foreground jobs
in the order they came, then background ones. It writes the request to the worker's stdin and
reads its events until the job settles, handing each to the job's own event loop. So the
client belongs to no event loop: a module's tests, or a program that calls ``asyncio.run``
twice, share one loaded model. A background job running when a foreground one arrives is
asked to stop (``cancel``) and goes back in the queue, to run again from its start.

When the worker's stdout ends, the process died: the running job fails with `LLMError`
(its signal and the last lines of its stderr in the message), and the next job starts a new
process. The worker itself is `workingmem.llm._local_worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ._build import REBUILD_COMMAND
from ._text import shortened
from ._weights import LOCAL_MODEL, LocalModelUnavailableError
from .base import Completion, LLMError, TextDelta, Usage

__all__ = ["Job", "LocalModelStats", "Scheduler", "WorkerInfo"]

_FOREGROUND, _BACKGROUND = 0, 1
_STDERR_LINES = 20
_STOP_TIMEOUT = 5.0
JobEvent = TextDelta | Completion | BaseException
_WORKER = Path(__file__).with_name("_local_worker.py")
"""Run as a script, not ``-m``: it imports nothing of the package, so the worker starts
without importing the package (and cannot be broken by it)."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """What the running worker said of itself once its model was loaded."""

    pid: int
    llama_cpp_version: str
    system_info: str
    """llama.cpp's own line of the CPU features it was built with (``AVX2 = 1 | ...``)."""


@dataclass(slots=True)
class LocalModelStats:
    """What the client has done since it was made: for a health check and for tests."""

    generations: int = 0
    """Generations that ran to their end."""
    cancelled: int = 0
    """Generations stopped because their caller left."""
    preempted: int = 0
    """Background generations stopped for a waiting user's call (and run again later)."""
    worker_starts: int = 0
    """Worker processes started, the first one included."""
    worker_crashes: int = 0
    """Worker processes that died: during a call, while loading, or between calls."""


@dataclass(eq=False)
class Job:
    """One generation, from its call to its last event."""

    request: dict[str, Any]
    priority: int
    order: int
    stream: bool
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue[JobEvent] = field(default_factory=asyncio.Queue)
    running: bool = False
    abandoned: bool = False
    """The caller left: skipped if it has not started, stopped if it has."""
    preempted: bool = False
    """A foreground job asked it to stop; it runs again from its start."""
    finished: bool = False
    retried: bool = False
    """Given to a new worker once already, because the last one was found dead."""

    def __lt__(self, other: Job) -> bool:
        return (self.priority, self.order) < (other.priority, other.order)

    def deliver(self, event: JobEvent) -> bool:
        """Hands an event to the caller's loop; False when that loop is gone."""
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            return False
        return True


class _Worker:
    """One worker process: its pipes, what it said of itself, the tail of its stderr."""

    def __init__(self, settings: dict[str, Any]) -> None:
        environment = dict(os.environ)
        environment.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP threads sleep, not spin
        self.process = subprocess.Popen(
            [sys.executable, str(_WORKER), json.dumps(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
        )
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_LINES)
        self._stderr = threading.Thread(
            target=self._drain_stderr, name="workingmem-llama-stderr", daemon=True
        )
        self._stderr.start()
        self._write_lock = threading.Lock()
        self.info: WorkerInfo | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        """Writes one message; a worker that already died is left to the reader to report."""
        line = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        with self._write_lock, contextlib.suppress(OSError, ValueError):
            stdin = _pipe(self.process.stdin)
            stdin.write(line)
            stdin.flush()

    def read(self) -> dict[str, Any] | None:
        """The next event; None when the worker's stdout ended (it died or exited)."""
        line = _pipe(self.process.stdout).readline()
        if not line:
            return None
        try:
            event = json.loads(line)
        except ValueError:
            return {}
        return event if isinstance(event, dict) else {}

    def death(self) -> str:
        """How the worker ended (its signal or status) and its last words."""
        returncode = self.process.wait()
        self._stderr.join(timeout=1.0)
        if returncode < 0:
            try:
                how = f"was killed by {signal.Signals(-returncode).name}"
            except ValueError:
                how = f"was killed by signal {-returncode}"
        else:
            how = f"exited with status {returncode}"
        said = " | ".join(line for line in self.stderr_tail if line)
        self._close_pipes()
        return how + (f" (its last output: {shortened(said)})" if said else "")

    def stop(self) -> None:
        """Ends the worker: the end of its stdin first (it exits at once), a kill if it lingers."""
        with self._write_lock, contextlib.suppress(OSError, ValueError):
            _pipe(self.process.stdin).close()
        try:
            self.process.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.wait()
        self._stderr.join(timeout=1.0)
        self._close_pipes()

    def _close_pipes(self) -> None:
        with self._write_lock:
            for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError, ValueError):
                        pipe.close()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    def _drain_stderr(self) -> None:
        """Reads stderr to its end (a full pipe would block the worker), keeping the tail."""
        for line in _pipe(self.process.stderr):
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip())


class Scheduler:
    """One worker process and the queue of jobs in front of it."""

    def __init__(
        self, settings: dict[str, Any], *, on_dispatch: Callable[[int], None] | None = None
    ) -> None:
        self._settings = settings
        self._on_dispatch = on_dispatch
        self.stats = LocalModelStats()
        self._lock = threading.Condition()
        self._pending: list[Job] = []
        self._running: Job | None = None
        self._worker: _Worker | None = None
        self._driver: threading.Thread | None = None
        self._starting = threading.Lock()
        """Held while a worker starts: one start at a time, outside the queue's lock."""
        self._closing = False
        self._order = itertools.count()

    @property
    def worker(self) -> WorkerInfo | None:
        """The running worker; None before the first job and after a crash."""
        worker = self._worker
        return worker.info if worker is not None and worker.alive() else None

    def submit(self, request: dict[str, Any], *, background: bool, stream: bool) -> Job:
        """Queues a generation; its events arrive on the calling event loop."""
        job = Job(
            request=request,
            priority=_BACKGROUND if background else _FOREGROUND,
            order=next(self._order),
            stream=stream,
            loop=asyncio.get_running_loop(),
        )
        with self._lock:
            self._closing = False
            heapq.heappush(self._pending, job)
            running = self._running
            if (
                running is not None
                and running.priority > job.priority
                and not running.stream
                and not running.preempted
                and self._worker is not None
            ):
                running.preempted = True
                self._worker.send({"op": "cancel", "id": running.order})
            if self._driver is None or not self._driver.is_alive():
                self._driver = threading.Thread(
                    target=self._drive, name="workingmem-llama", daemon=True
                )
                self._driver.start()
            self._lock.notify_all()
        return job

    def abandon(self, job: Job) -> None:
        """The caller left: the job is skipped, or its generation stopped at the next token."""
        with self._lock:
            if job.finished or job.abandoned:
                return
            job.abandoned = True
            if job.running and self._worker is not None:
                self._worker.send({"op": "cancel", "id": job.order})

    def start(self) -> WorkerInfo:
        """Starts the worker now (blocking) and says what it found."""
        info = self._ensure_worker().info
        assert info is not None  # set before a worker is handed out
        return info

    def close(self) -> None:
        """Blocking: waits for the queued jobs, then ends the worker and the driver."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
            driver = self._driver
        if driver is not None and driver is not threading.current_thread():
            driver.join()
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()

    # On the driver thread.

    def _drive(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    self._lock.wait()
                if not self._pending:
                    self._driver = None
                    return
                job = heapq.heappop(self._pending)
                if job.abandoned:
                    continue
            try:
                worker = self._ensure_worker()
            except LLMError as exc:
                job.finished = True
                job.deliver(exc)
                continue
            with self._lock:
                job.running, job.preempted = True, False
                self._running = job
            worker.send(
                {"op": "generate", "id": job.order, "request": job.request, "stream": job.stream}
            )
            self._follow(worker, job)
            with self._lock:
                self._running, job.running = None, False
                if not job.finished and not job.abandoned:  # preempted: again, later
                    heapq.heappush(self._pending, job)

    def _follow(self, worker: _Worker, job: Job) -> None:
        """Reads the worker's events until the job settles, or the worker dies."""
        started = False
        while (event := worker.read()) is not None:
            if event.get("id") != job.order:
                continue  # a late event of an earlier job
            kind = event.get("event")
            if kind == "started":
                started = True
                if self._on_dispatch is not None:
                    self._on_dispatch(worker.pid)
            elif kind == "delta":
                if not job.abandoned and not job.deliver(TextDelta(str(event["text"]))):
                    self.abandon(job)
            elif kind == "done":
                self.stats.generations += 1
                job.finished = True
                job.deliver(_completion(event.get("completion") or {}))
                return
            elif kind == "error":
                job.finished = True
                job.deliver(_generation_error(event))
                return
            elif kind == "cancelled":
                if job.preempted and not job.abandoned:
                    self.stats.preempted += 1
                else:
                    self.stats.cancelled += 1
                    job.finished = True
                return
        how = worker.death()
        with self._lock:
            if self._worker is worker:
                self._worker = None
        self.stats.worker_crashes += 1
        if not started and not job.retried:
            job.retried = True  # it died before it took the job (between calls): a new one
            return
        job.finished = True
        job.deliver(
            LLMError(
                f"the local model's worker process {how}, during this call; the next call "
                "starts a new worker. If this repeats, run 'workingmem doctor'.",
                retryable=True,
            )
        )

    def _ensure_worker(self) -> _Worker:
        """The live worker, started (and its model loaded) when there is none.

        Raises:
            LocalModelUnavailableError: llama.cpp cannot load the model file.
            LLMError: The worker died while loading.
        """
        with self._starting:
            current = self._worker
            if current is not None:
                if current.alive():
                    return current
                current.death()  # it died between calls: nothing to report, its pipes to close
            return self._start_worker()

    def _start_worker(self) -> _Worker:
        worker = _Worker(self._settings)
        self.stats.worker_starts += 1
        first = worker.read()
        if first is not None and first.get("event") == "ready":
            worker.info = WorkerInfo(
                pid=worker.pid,
                llama_cpp_version=str(first.get("llama_cpp_version", "")),
                system_info=str(first.get("system_info", "")),
            )
            with self._lock:
                self._worker = worker
            return worker
        if first is not None:
            worker.stop()
            raise LocalModelUnavailableError(
                f"llama.cpp cannot load {self._settings['model_path']}: "
                f"{shortened(str(first.get('message')))}"
            )
        self.stats.worker_crashes += 1
        raise LLMError(
            f"the local model's worker process {worker.death()} while loading the model; if "
            f"this repeats, run 'workingmem doctor' (a portable build of llama-cpp-python: "
            f"{REBUILD_COMMAND})",
            retryable=True,
        )


def _generation_error(event: dict[str, Any]) -> LLMError:
    status = event.get("status_code")
    message = shortened(str(event.get("message")))
    if status == 400:  # the caller's: a prompt over the window, a grammar llama.cpp refuses
        return LLMError(f"the local model cannot take this request: {message}", status_code=400)
    return LLMError(f"the local model failed: {message}")


def _completion(fields: dict[str, Any]) -> Completion:
    return Completion(
        text=str(fields.get("text") or ""),
        usage=Usage(
            prompt_tokens=int(fields.get("prompt_tokens") or 0),
            completion_tokens=int(fields.get("completion_tokens") or 0),
        ),
        model=LOCAL_MODEL,
        finish_reason=fields.get("finish_reason"),
    )


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    if stream is None:  # pragma: no cover - every pipe is opened by Popen
        raise ValueError("the worker's pipe is not open")
    return stream
