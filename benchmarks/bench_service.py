"""The service under load: `POST /v1/chat/completions` with memory, against the same client
calling the upstream directly, at 1, 16 and 64 concurrent clients, on SQLite and PostgreSQL.

    .venv/bin/python benchmarks/bench_service.py [--clients 1,16,64] [--seconds 8]
    scripts/with-postgres .venv/bin/python benchmarks/bench_service.py    # PostgreSQL too

Three processes share the machine, so the load generator and the server never share an event
loop or a GIL:

- this one, the load generator: N concurrent clients on one event loop, each an
  `httpx.AsyncClient` with one keep-alive connection and a thread of its own (``X-Thread-Id``)
  that grows as a conversation does; the messages are LoCoMo user turns (see `_data`);
- the instant upstream (this script with ``--serve-upstream``): a raw asyncio HTTP/1.1
  keep-alive server that answers "OK." at once, and answers a helper call (a request with
  ``response_format``) with a summary of realistic size built from the turns it is given;
- the service (this script with ``--serve-service``): uvicorn, one worker, serving
  ``create_app(ServiceSettings(...))`` as ``workingmem serve`` builds it (the defaults:
  SUMMARY_BUFFER, gpt-4o-mini answering and helping, both through the same instant upstream),
  without the access log.

`ScriptedUpstream` is not used: it speaks HTTP/1.0 (a new connection per request) and starts
a thread per connection, so at 16 clients and more it, not the service, would set the pace.

For each store and each client count, two points, back to back: "direct" (the client posts
the same body straight to the upstream) and "memory" (the client posts it to the service,
which stores the turn, reads the memory, asks the upstream, stores the answer and submits the
background update). Each point: a warm-up, the background queue drained, then the timed run
(requests per second, p50 and p99 latency as the client sees it), then the queue drained
again (timed): the background work that the answers caused is counted in the point's
helper calls and CPU. Threads are pre-seeded, untimed, with LoCoMo turns and a summary through
their 4th-newest turn (the steady state of a SUMMARY_BUFFER thread).

It prints the figures and the ratios memory / direct; it never asserts. Progress goes to
stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import itertools
import json
import os
import platform
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

import workingmem as wm
from _cli import POSTGRES_ENV, add_store_options, positive_ints
from _data import load_conversations, thread_messages
from bench_gateway import (
    build_thread,
    catch_up_summary,
    load_average,
    ms,
    print_table,
    progress,
    scripted_summary,
)
from workingmem.gateway_config import GatewayConfig
from workingmem.service import LOCAL_TENANT
from workingmem.stores.keys import ApiKeyStore

Message = dict[str, Any]
Conversations = list[list[Message]]

DEFAULT_CLIENTS = (1, 16, 64)
DEFAULT_SECONDS = 8.0
WARMUP_SECONDS = 1.5
SEED_TURNS = 200
DRAIN_TIMEOUT = 120.0
DATABASE_ENV = "WORKINGMEM_DATABASE_URL"
ANSWER = "OK."
SERVICE_DEFAULTS = GatewayConfig()
MODEL_ID = SERVICE_DEFAULTS.default_model
"""The model the clients name: the service's default (its helper calls use the same one)."""
_METRIC = re.compile(r'^workingmem_memory_updates_total\{outcome="(\w+)"\} (\d+)$', re.MULTILINE)
_QUEUE = re.compile(r"^workingmem_background_queue_depth (\d+)$", re.MULTILINE)


# -- the instant upstream (its own process) ----------------------------------------------------


def completion_json(text: str, prompt_tokens: int, completion_tokens: int) -> bytes:
    """An OpenAI chat-completion body (not streamed) answering `text`."""
    body = {
        "id": "chatcmpl-instant",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return json.dumps(body).encode()


def http_response(status: int, body: bytes) -> bytes:
    """A whole HTTP/1.1 response with a JSON body, written in one send (keep-alive)."""
    reason = {200: "OK", 404: "Not Found"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


class InstantUpstream:
    """An OpenAI-compatible chat-completion server that answers at once, over HTTP/1.1 with
    keep-alive, on one asyncio loop. ``GET /stats`` gives the answers and helper calls so far.
    """

    def __init__(self) -> None:
        self.answers = 0
        self.helpers = 0
        self._answer = http_response(200, completion_json(ANSWER, 1_000, 2))

    async def serve(self) -> None:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        async with server:
            await server.serve_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = content_length(head)
                body = await reader.readexactly(length) if length else b""
                writer.write(self._respond(head, body))
                await writer.drain()
                if b"connection: close" in head.lower():
                    return
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return
        finally:
            writer.close()

    def _respond(self, head: bytes, body: bytes) -> bytes:
        line = head.split(b"\r\n", 1)[0]
        if line.startswith(b"POST ") and b"/chat/completions" in line:
            if b'"response_format"' not in body:
                self.answers += 1
                return self._answer
            self.helpers += 1
            prompt = json.loads(body)["messages"][-1]["content"]
            text = json.dumps(scripted_summary(prompt))
            return http_response(200, completion_json(text, len(prompt) // 4, len(text) // 4))
        if line.startswith(b"GET ") and b"/stats" in line:
            stats = {"answers": self.answers, "helpers": self.helpers}
            return http_response(200, json.dumps(stats).encode())
        return http_response(404, b'{"error": {"message": "no such route", "type": "not_found"}}')


def serve_upstream() -> None:
    """The instant upstream until SIGTERM (or SIGINT); it prints its port first."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(InstantUpstream().serve())


def serve_service(upstream_url: str) -> None:
    """The service as `workingmem serve` runs it (one uvicorn worker), on a free port that it
    prints; the database from ``WORKINGMEM_DATABASE_URL`` (not on the command line, where `ps`
    would show a password). SIGTERM stops it; the lifespan drains the background queue."""
    import uvicorn

    from workingmem.service import ServiceSettings, create_app

    settings = ServiceSettings(
        database_url=os.environ[DATABASE_ENV],
        upstream_base_url=upstream_url,
        upstream_api_key="bench",
    )
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets accepted from a socket of
    # that proto; without it every keep-alive request waits ~40 ms (Nagle + delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(
        create_app(settings), log_level="warning", access_log=False, lifespan="on"
    )
    uvicorn.Server(config).run(sockets=[sock])


@contextlib.contextmanager
def child(name: str, *args: str, env: dict[str, str] | None = None) -> Iterator[tuple[int, int]]:
    """This script in another process, in one of its server modes: (pid, port)."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.isdigit():
            raise RuntimeError(f"the {name} did not start (exit status {proc.poll()})")
        yield proc.pid, int(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class Point:
    """One timed run: a path (direct or memory) at a number of clients."""

    path: str
    clients: int
    latencies: list[int] = field(default_factory=list)
    """Nanoseconds per successful request, as the client saw it."""
    elapsed: float = 0.0
    errors: int = 0
    first_error: str = ""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds per process over the run and the drain after it."""
    answers: int = 0
    """Answer calls the upstream received during the run."""
    helpers: int = 0
    """Helper calls the upstream received during the run and the drain."""
    backlog: int = 0
    """Background jobs waiting or running when the run ended."""
    drain_s: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    def quantile_ms(self, q: int) -> float:
        """The q-th percentile in ms (q=50: the median)."""
        if len(self.latencies) < 2:
            return (self.latencies or [0])[0] / 1e6
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] / 1e6


@dataclass
class Processes:
    upstream_pid: int
    upstream_url: str
    service_pid: int | None = None
    service_url: str = ""

    def cpu(self) -> dict[str, float]:
        found = {"client": cpu_seconds(os.getpid()), "upstream": cpu_seconds(self.upstream_pid)}
        if self.service_pid is not None:
            found["service"] = cpu_seconds(self.service_pid)
        return found


@dataclass
class StoreRun:
    name: str
    points: list[Point] = field(default_factory=list)
    note: str = ""
    seed_s: float = 0.0
    auth: str = ""


async def drive(
    clients: Sequence[httpx.AsyncClient],
    url: str,
    threads: Sequence[str],
    bodies: Iterator[bytes],
    seconds: float,
    headers: dict[str, str],
    point: Point | None,
) -> None:
    """Each thread's client posts one message after another until `seconds` have passed."""
    deadline = time.perf_counter() + seconds
    answer = json.dumps(ANSWER).encode()

    async def one_client(client: httpx.AsyncClient, thread_id: str) -> None:
        sent = {**headers, "Content-Type": "application/json", "X-Thread-Id": thread_id}
        while time.perf_counter() < deadline:
            body = next(bodies)
            t0 = time.perf_counter_ns()
            try:
                response = await client.post(url, content=body, headers=sent)
                ok = response.status_code == 200 and answer in response.content
                failure = "" if ok else f"{response.status_code} {response.text[:200]}"
            except httpx.HTTPError as exc:
                failure = repr(exc)
            t1 = time.perf_counter_ns()
            if point is None:
                continue
            if failure:
                point.errors += 1
                point.first_error = point.first_error or failure
            else:
                point.latencies.append(t1 - t0)

    start = time.perf_counter()
    await asyncio.gather(*map(one_client, clients, threads))
    if point is not None:
        point.elapsed = time.perf_counter() - start


async def service_state(http: httpx.AsyncClient, service_url: str) -> tuple[int, Counter[str]]:
    """The service's background queue depth and its update outcomes so far (/metrics)."""
    text = (await http.get(f"{service_url}/metrics")).text
    depth = _QUEUE.search(text)
    outcomes = Counter({name: int(count) for name, count in _METRIC.findall(text)})
    return int(depth.group(1)) if depth else 0, outcomes


async def drain(http: httpx.AsyncClient, service_url: str) -> float:
    """Waits for the background queue to empty; the seconds it took."""
    start = time.perf_counter()
    while (await service_state(http, service_url))[0] > 0:
        if time.perf_counter() - start > DRAIN_TIMEOUT:
            raise RuntimeError(f"the background queue did not drain in {DRAIN_TIMEOUT:.0f} s")
        await asyncio.sleep(0.02)
    return time.perf_counter() - start


async def upstream_stats(http: httpx.AsyncClient, procs: Processes) -> tuple[int, int]:
    """The answers and helper calls the instant upstream has received so far."""
    stats = (await http.get(f"{procs.upstream_url}/stats")).json()
    return stats["answers"], stats["helpers"]


async def measure_point(
    procs: Processes,
    path: str,
    threads: Sequence[str],
    bodies: Iterator[bytes],
    seconds: float,
    headers: dict[str, str],
) -> Point:
    point = Point(path, len(threads))
    memory = path == "memory"
    base = f"{procs.service_url}/v1" if memory else procs.upstream_url
    url = f"{base}/chat/completions"
    # A client of its own per thread: one httpx pool of N connections costs O(N) per request
    # (it checks every idle connection), which at 64 made the load generator the bottleneck.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(limits=limits, timeout=60.0))
            for _ in threads
        ]
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=10.0))
        await drive(clients, url, threads, bodies, WARMUP_SECONDS, headers, None)
        if memory:
            await drain(http, procs.service_url)
            outcomes_before = (await service_state(http, procs.service_url))[1]
        answers_before, helpers_before = await upstream_stats(http, procs)
        cpu_before = procs.cpu()
        await drive(clients, url, threads, bodies, seconds, headers, point)
        answers_after, _ = await upstream_stats(http, procs)
        if memory:
            point.backlog = (await service_state(http, procs.service_url))[0]
            point.drain_s = await drain(http, procs.service_url)
            point.outcomes = (await service_state(http, procs.service_url))[1] - outcomes_before
        cpu_after = procs.cpu()
        _, helpers_after = await upstream_stats(http, procs)
    point.cpu = {name: cpu_after[name] - cpu_before[name] for name in cpu_after}
    point.answers = answers_after - answers_before
    point.helpers = helpers_after - helpers_before
    return point


def request_bodies(conversations: Conversations, skip: str) -> Iterator[bytes]:
    """The clients' requests: LoCoMo user turns, cycled, one new message each."""
    texts = [
        m["content"]
        for messages in conversations
        for m in messages
        if m["role"] == "user" and m["content"] != skip
    ]
    bodies = [
        json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": t}]}).encode()
        for t in texts
    ]
    return itertools.cycle(bodies)


async def seed(
    database_url: str, run_id: str, threads: Sequence[str], messages: list[Message]
) -> tuple[str, dict[str, str], str]:
    """Builds the threads (untimed): LoCoMo turns, then a summary through the 4th-newest turn.

    A database without API keys is served as the local tenant (as `workingmem serve` serves
    it); one that has keys gets a key of the run's own tenant (revoked by `cleanup`).
    Returns the tenant, the clients' headers and the key's id ("" for none).
    """
    model = SERVICE_DEFAULTS.model_info(MODEL_ID)
    async with await wm.open_store(database_url) as store:
        if not isinstance(store, ApiKeyStore):
            raise RuntimeError("the store keeps no API keys")
        tenant, headers, key_id = LOCAL_TENANT, {}, ""
        if await store.has_api_keys():
            tenant = f"bench-{run_id}"
            created = await store.create_api_key(tenant_id=tenant, label="bench_service")
            headers = {"Authorization": f"Bearer {created.secret}"}
            key_id = created.key.key_id
        for thread_id in threads:
            await build_thread(store, tenant, thread_id, messages, model)
            await catch_up_summary(store, tenant, thread_id)
    return tenant, headers, key_id


async def cleanup(url: str, tenant: str, threads: Sequence[str], key_id: str) -> None:
    """Removes the run's threads (their turns and states cascade) and revokes its key from a
    PostgreSQL database that outlives the run; best effort."""
    import psycopg

    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                "DELETE FROM threads WHERE tenant_id = %s AND thread_id = ANY(%s)",
                (tenant, list(threads)),
            )
        if key_id:
            async with await wm.open_store(url) as store:
                assert isinstance(store, ApiKeyStore)
                await store.revoke_api_key(key_id=key_id)
    except (psycopg.Error, wm.WorkingMemoryError) as exc:
        progress(f"PostgreSQL: cleanup failed: {exc}")


async def wait_ready(url: str) -> None:
    """Polls ``/healthz`` until the service answers (its lifespan opened the store)."""
    async with httpx.AsyncClient(timeout=2.0) as http:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.05)
    raise RuntimeError("the service did not become ready in 30 s")


async def measure_store(
    run: StoreRun,
    database_url: str,
    procs: Processes,
    conversations: Conversations,
    clients: list[int],
    seconds: float,
) -> None:
    """Seeds the threads, starts the service on the database, runs every point."""
    run_id = uuid.uuid4().hex[:8]
    groups = {n: [f"bench-{run_id}-{n}c-{i}" for i in range(n)] for n in clients}
    every = [thread_id for group in groups.values() for thread_id in group]
    messages = thread_messages(conversations, SEED_TURNS)
    progress(f"{run.name}: seeding {len(every)} threads x {SEED_TURNS} turns")
    start = time.perf_counter()
    tenant, headers, key_id = await seed(database_url, run_id, every, messages)
    run.seed_s = time.perf_counter() - start
    run.auth = "an API key per request" if headers else "none (the local tenant, loopback)"
    bodies = request_bodies(conversations, skip=messages[-1]["content"])
    try:
        service = child(
            "service", "--serve-service", procs.upstream_url, env={DATABASE_ENV: database_url}
        )
        with service as (pid, port):
            procs.service_pid, procs.service_url = pid, f"http://127.0.0.1:{port}"
            await wait_ready(procs.service_url)
            for n in clients:
                for path in ("direct", "memory"):
                    progress(f"{run.name}: {path}, {n} clients, {seconds:g} s")
                    point = await measure_point(procs, path, groups[n], bodies, seconds, headers)
                    run.points.append(point)
            procs.service_pid = None
    finally:
        if database_url.startswith(("postgresql://", "postgres://")):
            await cleanup(database_url, tenant, every, key_id)


async def run_all(args: argparse.Namespace, conversations: Conversations) -> list[StoreRun]:
    runs = [StoreRun("SQLite"), StoreRun("PostgreSQL")]
    with child("upstream", "--serve-upstream") as (pid, port):
        procs = Processes(upstream_pid=pid, upstream_url=f"http://127.0.0.1:{port}/v1")
        with tempfile.TemporaryDirectory(prefix="workingmem-bench-") as folder:
            url = str(Path(folder) / "service.db")
            await measure_store(runs[0], url, procs, conversations, args.clients, args.seconds)
        if not args.postgres:
            runs[1].note = (
                f"not measured: no database URL ({POSTGRES_ENV} is unset and no --postgres "
                "URL); run under scripts/with-postgres for a throwaway PostgreSQL 15"
            )
            return runs
        try:
            await measure_store(
                runs[1], args.postgres, procs, conversations, args.clients, args.seconds
            )
        except (ImportError, wm.WorkingMemoryError, OSError) as exc:
            runs[1].note = f"not measured: {exc}"
    return runs


# -- the report --------------------------------------------------------------------------------


def cpu_ms(point: Point, process: str) -> str:
    value = point.cpu.get(process)
    if value is None or value != value or not point.latencies:
        return "-"
    return f"{value * 1000 / len(point.latencies):.2f}"


def print_store(run: StoreRun, seconds: float) -> None:
    if not run.points:
        print(f"\n{run.name}: {run.note}")
        return
    rows = []
    for point in run.points:
        rows.append(
            [
                str(point.clients),
                point.path,
                f"{len(point.latencies):,}",
                f"{point.rps:,.0f}",
                ms(point.quantile_ms(50)),
                ms(point.quantile_ms(99)),
                cpu_ms(point, "client"),
                cpu_ms(point, "service") if point.path == "memory" else "-",
                cpu_ms(point, "upstream"),
                str(point.errors),
            ]
        )
    print_table(
        f"{run.name}: {seconds:g} s per point after a {WARMUP_SECONDS:g} s warm-up (threads "
        f"seeded in {run.seed_s:.1f} s; auth: {run.auth})",
        [
            "clients",
            "path",
            "requests",
            "req/s",
            "p50 ms",
            "p99 ms",
            "CPU ms/req: client",
            "service",
            "upstream",
            "errors",
        ],
        rows,
    )
    errors = [p for p in run.points if p.errors]
    for point in errors:
        print(f"  errors at {point.clients} clients ({point.path}): {point.first_error}")
    print_background(run)
    if run.note:
        print(f"  note: {run.note}")


def print_ratios(runs: list[StoreRun]) -> None:
    rows = []
    for run in runs:
        direct = {p.clients: p for p in run.points if p.path == "direct" and p.latencies}
        for memory in run.points:
            base = direct.get(memory.clients)
            if memory.path != "memory" or base is None or not memory.latencies:
                continue
            rows.append(
                [
                    str(memory.clients),
                    run.name,
                    f"{memory.rps / base.rps:.3f}x",
                    f"{memory.quantile_ms(50) / base.quantile_ms(50):.1f}x",
                    f"{memory.quantile_ms(99) / base.quantile_ms(99):.1f}x",
                    ms(memory.quantile_ms(50) - base.quantile_ms(50)),
                ]
            )
    if rows:
        headers = ["clients", "store", "req/s", "p50", "p99", "p50 added ms"]
        print_table(
            "Ratios memory / direct (same client count, measured back to back)", headers, rows
        )


def print_background(run: StoreRun) -> None:
    rows = []
    for point in run.points:
        if point.path != "memory":
            continue
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(point.outcomes.items())) or "-"
        rows.append(
            [
                str(point.clients),
                f"{point.answers:,}",
                f"{point.helpers:,}",
                f"{100 * point.helpers / max(point.answers, 1):.1f}",
                str(point.backlog),
                f"{point.drain_s:.2f}",
                outcomes,
            ]
        )
    headers = ["clients", "answers", "helper calls", "/100 answers", "queue at end", "drain s"]
    print_table(
        f"{run.name}: background updates (SUMMARY_BUFFER defaults: due every 6 turns, i.e. every "
        "3rd answer of a thread)",
        [*headers, "update outcomes (run + drain)"],
        rows,
    )


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def print_header(data: Path, conversations: Conversations, url: str | None, load: str) -> None:
    import uvicorn

    flat = sum(len(messages) for messages in conversations)
    print(
        f"workingmem {wm.__version__}: POST /v1/chat/completions through the service (memory) "
        "and straight to the upstream (direct), same client, same bodies"
    )
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores shared by three processes "
        f"(load generator, service, upstream), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}"
    )
    print(f"load average (1 min): {load} before the run, {load_average()} after")
    loop = "uvloop" if installed("uvloop") else "asyncio"
    parser = "httptools" if installed("httptools") else "h11"
    print(
        f"service: uvicorn {uvicorn.__version__}, 1 worker, {loop} loop, {parser} parser, no "
        f"access log; the defaults of ServiceSettings/GatewayConfig ({MODEL_ID} answers and "
        "helps, SUMMARY_BUFFER: recent 12 turns, update every 6)"
    )
    print(
        f"clients: httpx {httpx.__version__} AsyncClient each (one keep-alive connection), all on "
        "one event loop, each on a thread of its own; a request is one new LoCoMo user turn"
    )
    print(
        f"threads: {SEED_TURNS} LoCoMo turns each before the run (LoCoMo CC BY-NC 4.0, "
        f"{data.name}, {len(conversations)} conversations, {flat:,} turns cycled), fresh "
        "threads per client count"
    )
    if url:
        where = urlsplit(url)  # no user or password in the report
        print(f"PostgreSQL: {where.hostname}:{where.port}{where.path}")


NOTES = [
    "direct: the client posts the very body it sends the service (one new user message) to "
    "the instant upstream's /v1/chat/completions. memory: the same body, with X-Thread-Id, to "
    "the service, which stores the turn, reads the thread's memory (summary, facts, the newest "
    "12 turns), asks the upstream through the openai SDK, stores the answer and queues the "
    "background update. Both go over loopback with keep-alive; the difference is the service "
    "hop and the memory's work.",
    "req/s: successful requests / the run's wall time (until the last request in flight "
    "returned). p50, p99: per request as the client saw it, from send to the whole body. The "
    "direct path is bound by the load generator (httpx takes ~0.6 ms of CPU a request, on one "
    "event loop): beyond one client its req/s is the client's ceiling, and its latency is "
    "mostly the clients queueing for their own event loop, not the upstream.",
    "CPU ms/req: each process's user+system CPU (from /proc) over the run and the drain "
    "after it, per successful request. The service's figure therefore includes the background "
    "updates the answers caused. With 2 cores, a sum near 2 x (1000 / req/s) means the machine "
    "was saturated: the clients and the upstream take cores from the service.",
    "background: helper calls the upstream received during the run and the drain, per 100 "
    "answers; 'queue at end' is the service's queue depth when the run ended (work deferred, "
    "not done), 'drain s' how long it then took to empty. Every answer queues a job that "
    "checks whether an update is due ('not_due'); 'busy' means another updater held the lease.",
    "The instant upstream answers a helper call with a summary of about 1,500 characters and "
    "10 facts (as benchmarks/bench_gateway.py does), so the notes in each request keep a "
    "realistic size.",
]


def print_notes() -> None:
    print("\nWhat each figure times")
    for note in NOTES:
        print(textwrap.fill(note, width=100, initial_indent="  ", subsequent_indent="    "))


# -- entry point -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--clients",
        type=positive_ints,
        default=list(DEFAULT_CLIENTS),
        help="concurrent clients, comma-separated (default: 1,16,64)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_SECONDS,
        help=f"timed seconds per point (default: {DEFAULT_SECONDS:g})",
    )
    add_store_options(parser)
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-service", metavar="UPSTREAM_URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_upstream:
        serve_upstream()
        return 0
    if args.serve_service:
        serve_service(args.serve_service)
        return 0
    try:
        conversations = load_conversations(args.data)
    except (OSError, ValueError) as exc:
        print(f"bench_service: {exc}", file=sys.stderr)
        return 2
    load_before = load_average()
    runs = asyncio.run(run_all(args, conversations))
    print_header(args.data, conversations, args.postgres, load_before)
    for run in runs:
        print_store(run, args.seconds)
    print_ratios(runs)
    print_notes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
