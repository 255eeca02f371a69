"""The service under load: `POST /v1/chat/completions` with memory, beside LiteLLM's proxy and
the upstream called directly, at 1, 8 and 32 concurrent clients, streaming and not, on SQLite
and PostgreSQL; the server's CPU per request from its processes' CPU time.

    .venv/bin/python benchmarks/bench_service.py [--clients 1,8,32] [--seconds 3] [--repeat 3]
    .venv/bin/python benchmarks/bench_service.py --litellm       # LiteLLM's proxy beside ours
    scripts/with-postgres .venv/bin/python benchmarks/bench_service.py --litellm --workers 2

The processes, so that the load generator and the servers never share an event loop or a GIL:

- the load generator: wrk when it is on PATH (`_wrk`: N keep-alive connections driven from C,
  so that the servers get the cores; ``--load httpx`` for the other), else this process: N
  concurrent clients on one event loop, each an `httpx.AsyncClient` with one keep-alive
  connection, which spend more CPU a request than our server does; the messages are LoCoMo
  user turns (see `_data`);
- the instant upstream (`_instant_upstream`, this script with ``--serve-upstream``): a raw
  asyncio HTTP/1.1 keep-alive server that answers "OK." at once (as server-sent events when
  asked to stream);
- our service (this script with ``--serve-service``): uvicorn serving
  ``create_app(ServiceSettings(...))`` as `workingmem serve` builds it (the defaults:
  SUMMARY_BUFFER, gpt-4o-mini at a 128,000-token window, answering and helping through the same
  instant upstream; a profile ``window``, the same under SLIDING_WINDOW), without the access
  log, one worker or ``--workers N`` (the factory path of `workingmem serve --workers N`);
- with ``--litellm``, LiteLLM's proxy (`_litellm`: a virtual environment of its own under
  ``~/.cache/workingmem/bench-litellm``, made on first use: ``pip install 'litellm[proxy]'``),
  one worker, no memory, one model route to the same instant upstream.

The points, for each store, each of streaming off and on, each client count:

- **fresh**: every request opens a new thread (a new ``X-Thread-Id``): the gateway's fixed cost
  (store the turn, read the memory, ask the upstream, store the answer, queue the background
  check), the product's default profile. LiteLLM and the direct path get the same bodies.
- **window**: SLIDING_WINDOW (profile ``window``) over a thread of 1,800 LoCoMo messages (at
  one client by default, ``--window-clients``): the window at the product's default budget for
  gpt-4o-mini, a 128,000-token context (half of it for the history). Each request adds a turn, so
  the window slides and stays at its budget. The upstream counts the messages it receives.

Each point: a warm-up, the background queue drained, the timed run (requests per second, p50 and
p99 latency as the client sees it, each process's user+system CPU time from /proc over the run
and the drain after it), then the queue drained again. The whole sequence runs ``--repeat``
times, interleaved; the report gives the median over the repeats and their spread (min-max).

It prints the ratios and the targets first (PASS/MISS), then the figures; it never asserts.
Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import itertools
import json
import os
import platform
import re
import sqlite3
import statistics
import sys
import tempfile
import textwrap
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

import workingmem as wm
from _cli import POSTGRES_ENV, add_store_options, positive_ints
from _data import read_conversations, thread_messages
from _instant_upstream import ANSWER, serve_upstream
from _litellm import DEFAULT_VENV, ensure_litellm, litellm_version, proxy_command
from _processes import (
    cpu_seconds,
    free_port,
    server_process,
    server_socket,
    stack_of,
    tree_cpu_seconds,
)
from _wrk import WrkResult, run_wrk, wrk_path, wrk_version
from bench_gateway import build_thread, load_average, ms, print_table, progress
from workingmem.gateway_config import GatewayConfig
from workingmem.service import LOCAL_TENANT
from workingmem.stores.keys import ApiKeyStore

Message = dict[str, Any]
Conversations = list[list[Message]]

DEFAULT_CLIENTS = (1, 8, 32)
DEFAULT_SECONDS = 3.0
DEFAULT_REPEAT = 3
WARMUP_SECONDS = 1.0
WINDOW_TURNS = 1_800
WINDOW_PROFILE = "window"
DRAIN_TIMEOUT = 120.0
READY_TIMEOUT = 60.0
DATABASE_ENV = "WORKINGMEM_DATABASE_URL"
SERVICE_DEFAULTS = GatewayConfig()
MODEL_ID = SERVICE_DEFAULTS.default_model
"""The model the clients name: the service's default (its helper calls use the same one)."""
WRK_BODIES = 512
"""The bodies a wrk run cycles through (LoCoMo user turns)."""
TARGET_RPS_RATIO = 10.0
TARGET_FRESH_MS = 2.0
TARGET_PER_MESSAGE_US = 10.0
TARGET_WINDOW_MS = 20.0
_METRIC = re.compile(r'^workingmem_memory_updates_total\{outcome="(\w+)"\} (\d+)$', re.MULTILINE)
_QUEUE = re.compile(r"^workingmem_background_queue_depth (\d+)$", re.MULTILINE)


def serve_service(upstream_url: str, workers: int) -> None:
    """Our service as `workingmem serve` runs it, on a free port that it prints; the database
    from ``WORKINGMEM_DATABASE_URL`` (not on the command line, where `ps` would show a
    password). One worker: the app built here; more: uvicorn's supervisor and the factory
    (`create_app()` reading the settings from the environment). SIGTERM stops it; each
    lifespan drains its background queue."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from workingmem.service import ServiceSettings, create_app
    from workingmem.service.app import APP_FACTORY
    from workingmem.service.settings import SETTINGS_ENV

    window = wm.Profile(id=WINDOW_PROFILE, working_memory=wm.Strategy.SLIDING_WINDOW)
    settings = ServiceSettings(
        database_url=os.environ[DATABASE_ENV],
        upstream_base_url=upstream_url,
        upstream_api_key="bench",
        profiles=(window,),
        tune_gc=True,  # as `workingmem serve` runs it
    )
    sock = server_socket()
    print(sock.getsockname()[1], flush=True)
    quiet: dict[str, Any] = {"log_level": "warning", "access_log": False, "lifespan": "on"}
    if workers == 1:
        uvicorn.Server(uvicorn.Config(create_app(settings), **quiet)).run(sockets=[sock])
        return
    os.environ[SETTINGS_ENV] = settings.to_json()
    os.environ["OPENAI_API_KEY"] = "bench"  # the settings carry no key: the workers read it
    config = uvicorn.Config(APP_FACTORY, factory=True, workers=workers, **quiet)
    # uvicorn.run's own path for workers > 1, with our socket (uvicorn 0.36 dropped `target`).
    run: dict[str, Any] = {}
    if "target" in inspect.signature(Multiprocess).parameters:
        run["target"] = uvicorn.Server(config).run
    Multiprocess(config, sockets=[sock], **run).run()


# -- processes ---------------------------------------------------------------------------------


def this_script(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


@dataclass
class Processes:
    upstream_pid: int
    upstream_url: str
    servers: dict[str, int] = field(default_factory=dict)
    """The servers being measured, by path: ``memory`` (ours), ``litellm``."""
    workers: int = 1

    def cpu(self) -> dict[str, float]:
        found = {"client": cpu_seconds(os.getpid()), "upstream": cpu_seconds(self.upstream_pid)}
        found.update({name: tree_cpu_seconds(pid) for name, pid in self.servers.items()})
        return found


# -- measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """Where a path's requests go and what they carry."""

    path: str
    """``direct`` (the upstream), ``memory`` (our service) or ``litellm``."""
    url: str
    headers: dict[str, str]
    server: str
    """The process whose CPU is the server's: ``upstream``, ``memory`` or ``litellm``."""


@dataclass
class Point:
    """One timed run of a path at a number of clients."""

    path: str
    kind: str
    """``fresh`` (a new thread per request) or ``window`` (SLIDING_WINDOW over 1,800)."""
    stream: bool
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
    messages: int = 0
    """Messages those answer calls carried (the system prompt included)."""
    helpers: int = 0
    """Helper calls the upstream received during the run and the drain."""
    backlog: int = 0
    """Background jobs waiting or running when the run ended."""
    drain_s: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    wrk: WrkResult | None = None
    """The run's totals when wrk drove it (then `latencies` is empty)."""

    @property
    def key(self) -> tuple[str, str, bool, int]:
        return (self.path, self.kind, self.stream, self.clients)

    @property
    def succeeded(self) -> int:
        return self.wrk.succeeded if self.wrk is not None else len(self.latencies)

    @property
    def rps(self) -> float:
        return self.succeeded / self.elapsed if self.elapsed else 0.0

    def quantile_ms(self, q: int) -> float:
        """The q-th percentile in ms (q=50: the median; wrk's runs give 50 and 99)."""
        if self.wrk is not None:
            return {50: self.wrk.p50_ms, 99: self.wrk.p99_ms}[q]
        if len(self.latencies) < 2:
            return (self.latencies or [0])[0] / 1e6
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] / 1e6

    def cpu_ms(self, process: str) -> float:
        """CPU ms of `process` per successful request (NaN when not measured)."""
        value = self.cpu.get(process, float("nan"))
        return value * 1000 / self.succeeded if self.succeeded else float("nan")

    @property
    def window(self) -> float:
        """Messages per answer call, the system prompt not counted."""
        return self.messages / self.answers - 1 if self.answers else float("nan")


@dataclass
class StoreRun:
    name: str
    points: list[Point] = field(default_factory=list)
    note: str = ""
    seed_s: float = 0.0
    auth: str = ""
    stacks: dict[str, str] = field(default_factory=dict)
    """The loop and parser of each server, as loaded."""


async def drive(
    clients: Sequence[httpx.AsyncClient],
    url: str,
    threads: Sequence[str],
    bodies: Iterator[bytes],
    seconds: float,
    headers: dict[str, str],
    point: Point | None,
    fresh: bool,
) -> None:
    """Each client posts one message after another until `seconds` have passed: on its own
    thread, or (`fresh`) on a new thread each time."""
    deadline = time.perf_counter() + seconds
    answer = json.dumps(ANSWER).encode()

    async def one_client(client: httpx.AsyncClient, thread_id: str) -> None:
        sent = {**headers, "Content-Type": "application/json", "X-Thread-Id": thread_id}
        for count in itertools.count():
            if time.perf_counter() >= deadline:
                return
            body = next(bodies)
            if fresh:
                sent["X-Thread-Id"] = f"{thread_id}-{uuid.uuid4().hex[:8]}-{count}"
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
    """One worker's background queue depth and update outcomes so far (its /metrics), on a
    connection of its own (so that, with several workers, any of them may answer)."""
    response = await http.get(f"{service_url}/metrics", headers={"Connection": "close"})
    depth = _QUEUE.search(response.text)
    outcomes = Counter({name: int(count) for name, count in _METRIC.findall(response.text)})
    return int(depth.group(1)) if depth else 0, outcomes


async def drain(http: httpx.AsyncClient, service_url: str, workers: int) -> float:
    """Waits for the background queue to empty; the seconds it took. With several workers
    (each its own queue and /metrics) it takes 4 x workers empty readings in a row, each
    from whichever worker accepted a new connection."""
    start = time.perf_counter()
    needed = 1 if workers == 1 else 4 * workers
    empty = 0
    while empty < needed:
        if time.perf_counter() - start > DRAIN_TIMEOUT:
            raise RuntimeError(f"the background queue did not drain in {DRAIN_TIMEOUT:.0f} s")
        depth = (await service_state(http, service_url))[0]
        empty = empty + 1 if depth == 0 else 0
        if depth:
            await asyncio.sleep(0.02)
    return time.perf_counter() - start


async def upstream_stats(http: httpx.AsyncClient, procs: Processes) -> dict[str, int]:
    """The answers (and their messages) and helper calls the instant upstream has received."""
    stats: dict[str, int] = (await http.get(f"{procs.upstream_url}/stats")).json()
    return stats


async def drive_wrk(
    route: Route,
    threads: Sequence[str],
    bodies: list[bytes],
    seconds: float,
    point: Point | None,
    fresh: bool,
) -> None:
    """`drive`, with wrk's connections for the clients (`_wrk`): a new thread a request
    (`fresh`), else the one thread (one client)."""
    name = (
        {"fresh": f"{threads[0]}-{uuid.uuid4().hex[:8]}-"} if fresh else {"thread_id": threads[0]}
    )
    result = await run_wrk(
        route.url,
        bodies,
        route.headers,
        clients=len(threads),
        seconds=seconds,
        marker=json.dumps(ANSWER).encode(),
        **name,
    )
    if point is not None:
        point.wrk, point.elapsed = result, result.seconds
        point.errors, point.first_error = result.failed, result.first_error


async def measure_point(
    procs: Processes,
    route: Route,
    point: Point,
    threads: Sequence[str],
    bodies: Iterator[bytes],
    seconds: float,
    load: str = "httpx",
) -> Point:
    memory = route.path == "memory"
    service_url = route.url.removesuffix("/v1/chat/completions")
    fresh = point.kind == "fresh"
    use_wrk = load == "wrk" and (fresh or len(threads) == 1)
    wrk_bodies = list(itertools.islice(bodies, WRK_BODIES)) if use_wrk else []
    # A client of its own per thread: one httpx pool of N connections costs O(N) per request
    # (it checks every idle connection), which at 64 made the load generator the bottleneck.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(limits=limits, timeout=60.0))
            for _ in threads
        ]
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=10.0))
        args = (clients, route.url, threads, bodies)
        if use_wrk:
            await drive_wrk(route, threads, wrk_bodies, WARMUP_SECONDS, None, fresh)
        else:
            await drive(*args, WARMUP_SECONDS, route.headers, None, fresh)
        if memory:
            await drain(http, service_url, procs.workers)
            outcomes_before = (await service_state(http, service_url))[1]
        before = await upstream_stats(http, procs)
        cpu_before = procs.cpu()
        if use_wrk:
            await drive_wrk(route, threads, wrk_bodies, seconds, point, fresh)
        else:
            await drive(*args, seconds, route.headers, point, fresh)
        after = await upstream_stats(http, procs)
        if memory:
            point.backlog = (await service_state(http, service_url))[0]
            point.drain_s = await drain(http, service_url, procs.workers)
            if procs.workers == 1:  # several workers: each counts its own
                point.outcomes = (await service_state(http, service_url))[1] - outcomes_before
        cpu_after = procs.cpu()
        helpers_after = (await upstream_stats(http, procs))["helpers"]
    point.cpu = {name: cpu_after[name] - cpu_before[name] for name in cpu_after}
    if point.wrk is not None:
        point.cpu["client"] += point.wrk.cpu_seconds
    point.answers = after["answers"] - before["answers"]
    point.messages = after["messages"] - before["messages"]
    point.helpers = helpers_after - before["helpers"]
    return point


def request_bodies(conversations: Conversations, skip: str, stream: bool) -> Iterator[bytes]:
    """The clients' requests: LoCoMo user turns, cycled, one new message each."""
    texts = [
        m["content"]
        for messages in conversations
        for m in messages
        if m["role"] == "user" and m["content"] != skip
    ]
    extra = {"stream": True} if stream else {}
    bodies = [
        json.dumps(
            {"model": MODEL_ID, "messages": [{"role": "user", "content": t}], **extra}
        ).encode()
        for t in texts
    ]
    return itertools.cycle(bodies)


async def seed(
    database_url: str, run_id: str, threads: Sequence[str], messages: list[Message]
) -> tuple[str, dict[str, str], str]:
    """Builds the window threads (untimed) of LoCoMo turns.

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
    return tenant, headers, key_id


async def cleanup(url: str, tenant: str, prefix: str, key_id: str) -> None:
    """Removes the run's threads (their turns and states cascade) and revokes its key from a
    PostgreSQL database that outlives the run; best effort."""
    import psycopg

    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                "DELETE FROM threads WHERE tenant_id = %s AND thread_id LIKE %s",
                (tenant, f"{prefix}%"),
            )
        if key_id:
            async with await wm.open_store(url) as store:
                assert isinstance(store, ApiKeyStore)
                await store.revoke_api_key(key_id=key_id)
    except (psycopg.Error, wm.WorkingMemoryError) as exc:
        progress(f"PostgreSQL: cleanup failed: {exc}")


async def wait_ready(url: str) -> None:
    """Polls `url` until it answers 200 (a service's lifespan has opened its store)."""
    deadline = time.perf_counter() + READY_TIMEOUT
    async with httpx.AsyncClient(timeout=2.0) as http:
        while time.perf_counter() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not answer in {READY_TIMEOUT:.0f} s")


@dataclass
class Plan:
    """What one store's run measures, from the command line."""

    clients: list[int]
    window_clients: list[int]
    streams: list[bool]
    seconds: float
    repeat: int
    load: str = "httpx"
    """The load generator: ``wrk`` or ``httpx``."""
    litellm: Route | None = None


async def measure_store(
    run: StoreRun,
    database_url: str,
    procs: Processes,
    conversations: Conversations,
    plan: Plan,
) -> None:
    """Seeds the window threads, starts the service on the database, runs every point."""
    run_id = uuid.uuid4().hex[:8]
    prefix = f"bench-{run_id}-"
    # A thread of its own per window point: each starts at 1,800 messages (each request adds 2).
    windows = {
        (repeat, stream, n): [f"{prefix}window-{repeat}-{stream:d}-{n}c-{i}" for i in range(n)]
        for repeat, stream, n in itertools.product(
            range(plan.repeat), plan.streams, plan.window_clients
        )
    }
    messages = thread_messages(conversations, WINDOW_TURNS)
    every = [thread_id for group in windows.values() for thread_id in group]
    progress(f"{run.name}: seeding {len(every)} threads x {WINDOW_TURNS:,} turns")
    start = time.perf_counter()
    tenant, headers, key_id = await seed(database_url, run_id, every, messages)
    run.seed_s = time.perf_counter() - start
    run.auth = "an API key per request" if headers else "none (the local tenant, loopback)"
    bodies = {
        stream: request_bodies(conversations, messages[-1]["content"], stream)
        for stream in plan.streams
    }
    command = this_script("--serve-service", procs.upstream_url, "--workers", str(procs.workers))
    try:
        with server_process("service", command, {DATABASE_ENV: database_url}) as (pid, port):
            url = f"http://127.0.0.1:{port}"
            await wait_ready(f"{url}/healthz")
            procs.servers["memory"] = pid
            run.stacks["memory"] = stack_of(pid)
            if plan.litellm is not None:
                run.stacks["litellm"] = stack_of(procs.servers["litellm"])
            ours = Route("memory", f"{url}/v1/chat/completions", headers, "memory")
            direct = Route("direct", f"{procs.upstream_url}/chat/completions", {}, "upstream")
            window = Route("memory", ours.url, {**headers, "X-Profile": WINDOW_PROFILE}, "memory")
            routes = [direct, ours, *([plan.litellm] if plan.litellm else [])]
            for repeat, stream in itertools.product(range(plan.repeat), plan.streams):
                mode = "streaming" if stream else "not streaming"
                for n, route in itertools.product(plan.clients, routes):
                    progress(f"{run.name} #{repeat + 1}: {route.path}, fresh, {mode}, {n} clients")
                    threads = [f"{prefix}fresh-{n}c-{i}" for i in range(n)]
                    point = Point(route.path, "fresh", stream, n)
                    await measure_point(
                        procs, route, point, threads, bodies[stream], plan.seconds, plan.load
                    )
                    run.points.append(point)
                for n in plan.window_clients:
                    progress(f"{run.name} #{repeat + 1}: memory, window, {mode}, {n} clients")
                    point = Point("memory", "window", stream, n)
                    await measure_point(
                        procs,
                        window,
                        point,
                        windows[repeat, stream, n],
                        bodies[stream],
                        plan.seconds,
                        plan.load,
                    )
                    run.points.append(point)
            del procs.servers["memory"]
    finally:
        if database_url.startswith(("postgresql://", "postgres://")):
            await cleanup(database_url, tenant, prefix, key_id)


@contextlib.asynccontextmanager
async def litellm_route(
    args: argparse.Namespace, procs: Processes, folder: Path
) -> AsyncIterator[Route | None]:
    """LiteLLM's proxy on the instant upstream, when asked (``--litellm``): its route."""
    if not args.litellm:
        yield None
        return
    executable = ensure_litellm(args.litellm_venv, progress)
    port = free_port()
    command, env, key = proxy_command(executable, procs.upstream_url, MODEL_ID, port, folder)
    progress(f"LiteLLM {litellm_version(executable)}: starting its proxy")
    with server_process("LiteLLM proxy", command, env, port=port) as (pid, _):
        url = f"http://127.0.0.1:{port}"
        await wait_ready(f"{url}/health/liveliness")
        procs.servers["litellm"] = pid
        yield Route(
            "litellm", f"{url}/v1/chat/completions", {"Authorization": f"Bearer {key}"}, "litellm"
        )
        del procs.servers["litellm"]


async def run_all(args: argparse.Namespace, conversations: Conversations) -> list[StoreRun]:
    runs = [StoreRun("SQLite"), StoreRun("PostgreSQL")]
    plan = Plan(
        clients=args.clients,
        window_clients=args.window_clients,
        streams=[False, True] if args.stream == "both" else [args.stream == "on"],
        seconds=args.seconds,
        repeat=args.repeat,
        load=args.load,
    )
    with (
        server_process("upstream", this_script("--serve-upstream"), {}) as (pid, port),
        tempfile.TemporaryDirectory(prefix="workingmem-bench-") as folder,
    ):
        procs = Processes(pid, f"http://127.0.0.1:{port}/v1", workers=args.workers)
        async with litellm_route(args, procs, Path(folder)) as litellm:
            plan.litellm = litellm  # measured beside the SQLite run (it keeps no memory)
            url = str(Path(folder) / "service.db")
            await measure_store(runs[0], url, procs, conversations, plan)
        plan.litellm = None
        if not args.postgres:
            runs[1].note = (
                f"not measured: no database URL ({POSTGRES_ENV} is unset and no --postgres "
                "URL); run under scripts/with-postgres for a throwaway PostgreSQL 15"
            )
            return runs
        try:
            await measure_store(runs[1], args.postgres, procs, conversations, plan)
        except (ImportError, wm.WorkingMemoryError, OSError) as exc:
            runs[1].note = f"not measured: {exc}"
    return runs


# -- the report --------------------------------------------------------------------------------


Key = tuple[str, str, bool, int]


def grouped(points: Sequence[Point]) -> dict[Key, list[Point]]:
    """The repeats of each point, by (path, kind, stream, clients), in the order measured."""
    found: defaultdict[Key, list[Point]] = defaultdict(list)
    for point in points:
        found[point.key].append(point)
    return dict(found)


def median_of(values: Sequence[float]) -> float:
    real = [v for v in values if v == v]
    return statistics.median(real) if real else float("nan")


def spread(values: Sequence[float], digits: int) -> str:
    """``median (min-max)``; just the value when there is one."""
    real = [v for v in values if v == v]
    if not real:
        return "-"
    middle = f"{statistics.median(real):,.{digits}f}"
    if len(real) == 1:
        return middle
    return f"{middle} ({min(real):,.{digits}f}-{max(real):,.{digits}f})"


def verdict(value: float, target: float, at_most: bool) -> str:
    if value != value:
        return "-"
    return "PASS" if (value <= target if at_most else value >= target) else "MISS"


def mode_name(stream: bool) -> str:
    return "stream" if stream else "json"


def litellm_points(runs: Sequence[StoreRun]) -> dict[Key, list[Point]]:
    return {k: v for run in runs for k, v in grouped(run.points).items() if k[0] == "litellm"}


def print_targets(runs: Sequence[StoreRun], workers: int) -> None:
    """The ratios against LiteLLM and the CPU targets, first."""
    peers = litellm_points(runs)
    rows = []
    for run in runs:
        for (path, kind, stream, n), points in grouped(run.points).items():
            peer = peers.get(("litellm", kind, stream, n))
            if path != "memory" or kind != "fresh" or not peer:
                continue
            ratios = [p.rps / q.rps for p, q in zip(points, peer, strict=False) if q.rps]
            ratio = median_of(ratios)
            rows.append(
                [
                    f"{n}",
                    f"{run.name}, {mode_name(stream)}",
                    spread([p.rps for p in points], 0),
                    spread([q.rps for q in peer], 0),
                    f"{spread(ratios, 1)}x",
                    f">= {TARGET_RPS_RATIO:g}x",
                    verdict(ratio, TARGET_RPS_RATIO, at_most=False) if workers == 1 else "n/a",
                ]
            )
    if rows:
        print_table(
            f"Requests per second, ours ({workers} worker{'s' if workers > 1 else ''}) / "
            "LiteLLM's proxy (1 worker), fresh threads (ratio per repeat, then its median)",
            [
                "clients",
                "store, mode",
                "ours req/s",
                "LiteLLM req/s",
                "ours / LiteLLM",
                "target",
                "",
            ],
            rows,
        )
    else:
        print("\nours / LiteLLM: not measured (run with --litellm)")
    rows = []
    for run in runs:
        groups = grouped(run.points)
        for (path, kind, stream, n), points in groups.items():
            if path != "memory":
                continue
            cpu = [p.cpu_ms("memory") for p in points]
            peer = peers.get(("litellm", kind, stream, n)) or []
            peer_cpu = spread([q.cpu_ms("litellm") for q in peer], 2) if peer else "-"
            if kind == "fresh":
                target, what = TARGET_FRESH_MS, "fresh thread"
            else:
                target, what = (
                    TARGET_WINDOW_MS,
                    f"window of {median_of([p.window for p in points]):,.0f} msgs",
                )
            rows.append(
                [
                    f"{n}",
                    f"{run.name}, {mode_name(stream)}",
                    what,
                    spread(cpu, 2),
                    peer_cpu,
                    f"<= {target:g}",
                    verdict(median_of(cpu), target, at_most=True),
                ]
            )
            fresh = groups.get(("memory", "fresh", stream, n))
            if kind == "window" and fresh:
                per = [
                    (p.cpu_ms("memory") - median_of([f.cpu_ms("memory") for f in fresh]))
                    * 1000
                    / p.window
                    for p in points
                ]
                rows.append(
                    [
                        f"{n}",
                        f"{run.name}, {mode_name(stream)}",
                        "  on top, µs per message",
                        spread(per, 1),
                        "-",
                        f"<= {TARGET_PER_MESSAGE_US:g}",
                        verdict(median_of(per), TARGET_PER_MESSAGE_US, at_most=True),
                    ]
                )
    print_table(
        "Server CPU per request, ms (user+system CPU of the server's processes over the run "
        "and its drain / requests answered)",
        ["clients", "store, mode", "point", "ours", "LiteLLM", "target", ""],
        rows,
    )


def print_store(run: StoreRun, seconds: float, workers: int) -> None:
    if not run.points:
        print(f"\n{run.name}: {run.note}")
        return
    rows = []
    for (path, kind, stream, n), points in grouped(run.points).items():
        server = {"memory": "memory", "litellm": "litellm"}.get(path, "upstream")
        outcomes: Counter[str] = sum((p.outcomes for p in points), Counter())
        rows.append(
            [
                f"{n}",
                f"{path}, {kind}, {mode_name(stream)}",
                f"{sum(p.succeeded for p in points):,}",
                spread([p.rps for p in points], 0),
                ms(median_of([p.quantile_ms(50) for p in points])),
                ms(median_of([p.quantile_ms(99) for p in points])),
                spread([p.cpu_ms(server) for p in points], 2),
                ms(median_of([p.cpu_ms("client") for p in points])),
                ms(median_of([p.cpu_ms("upstream") for p in points])) if path != "direct" else "-",
                f"{median_of([p.window for p in points]):,.0f}" if path == "memory" else "-",
                f"{sum(p.helpers for p in points)}",
                f"{max(p.backlog for p in points)}",
                ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "-",
                str(sum(p.errors for p in points)),
            ]
        )
    stacks = "; ".join(f"{'ours' if k == 'memory' else k}: {v}" for k, v in run.stacks.items())
    print_table(
        f"{run.name}: {seconds:g} s per point after a {WARMUP_SECONDS:g} s warm-up, "
        f"{len(next(iter(grouped(run.points).values())))} repeats (window threads seeded in "
        f"{run.seed_s:.1f} s; auth: {run.auth}; ours: {workers} worker(s); {stacks})",
        [
            "clients",
            "path, thread, mode",
            "requests",
            "req/s",
            "p50 ms",
            "p99 ms",
            "CPU ms/req: server",
            "client",
            "upstream",
            "window msgs",
            "helper calls",
            "queue at end",
            "update outcomes",
            "errors",
        ],
        rows,
    )
    for point in run.points:
        if point.errors:
            print(
                f"  errors at {point.clients} clients ({point.path}, {point.kind}, "
                f"{mode_name(point.stream)}): {point.first_error}"
            )
    if run.note:
        print(f"  note: {run.note}")


def print_header(
    args: argparse.Namespace, conversations: Conversations, load: str, litellm: str
) -> None:
    import uvicorn

    flat = sum(len(messages) for messages in conversations)
    print(
        f"workingmem {wm.__version__}: POST /v1/chat/completions through our service (memory), "
        "LiteLLM's proxy and straight to the upstream (direct), same client, same bodies"
    )
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores shared by every process "
        f"(load generator, servers, upstream), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}"
    )
    print(f"load average (1 min): {load} before the run, {load_average()} after")
    print(
        f"ours: uvicorn {uvicorn.__version__}, {args.workers} worker(s), no access log; the "
        f"defaults of ServiceSettings/GatewayConfig ({MODEL_ID}: 128,000-token window, answers "
        "and helps, SUMMARY_BUFFER) and the profile 'window' (the same, SLIDING_WINDOW)"
    )
    print(f"LiteLLM: {litellm}")
    if args.load == "wrk":
        print(
            f"clients: {wrk_version()}, N keep-alive connections on one wrk thread (a Lua script "
            "picks each request's body and thread; a window point of several clients: httpx); "
            "a request is one new LoCoMo user turn"
        )
    else:
        print(
            f"clients: httpx {httpx.__version__} AsyncClient each (one keep-alive connection), "
            "all on one event loop; a request is one new LoCoMo user turn"
        )
    print(
        f"threads: fresh (a new thread per request) and window ({WINDOW_TURNS:,} LoCoMo turns "
        f"before the run; LoCoMo CC BY-NC 4.0, {args.data.name}, {len(conversations)} "
        f"conversations, {flat:,} turns cycled)"
    )
    if args.postgres:
        where = urlsplit(args.postgres)  # no user or password in the report
        print(f"PostgreSQL: {where.hostname}:{where.port}{where.path}")


NOTES = [
    "direct: the client posts the very body it sends the servers (one new user message) to "
    "the instant upstream. memory: the same body, with X-Thread-Id, to our service, which "
    "stores the turn, reads the thread's memory, asks the upstream through the openai SDK, "
    "stores the answer and queues the background update. litellm: the same body to LiteLLM's "
    "proxy (its master key; no database, no memory), which forwards it to the same upstream.",
    "req/s: successful requests / the run's wall time. p50, p99: per request as the client "
    "saw it, from send to the whole body (wrk: its percentiles). The direct path is bound by "
    "the load generator (with httpx: its CPU a request, on one event loop).",
    "CPU ms/req: each process's user+system CPU (from /proc; a server's worker processes "
    "included) over the run and the drain after it, per successful request: the server's CPU "
    "includes the background work the answers caused. With 2 cores, a sum near 2 x (1000 / "
    "req/s) means the machine was saturated: the clients and the upstream take cores from the "
    "server.",
    "µs per message: (CPU per request at the window - CPU per request on a fresh thread, same "
    "store and mode) / the window's messages, as the upstream received them.",
    "Spread: median over the repeats (min-max). The ratio ours / LiteLLM is taken per repeat "
    "(the two measured back to back), then its median.",
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
        help="concurrent clients of the fresh points, comma-separated (default: 1,8,32)",
    )
    parser.add_argument(
        "--window-clients",
        type=positive_ints,
        default=[1],
        help=f"clients of the {WINDOW_TURNS:,}-message window point (default: 1)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_SECONDS,
        help=f"timed seconds per point (default: {DEFAULT_SECONDS:g})",
    )
    parser.add_argument(
        "--repeat", type=int, default=DEFAULT_REPEAT, help="runs of every point (default: 3)"
    )
    parser.add_argument(
        "--stream", choices=["both", "off", "on"], default="both", help="default: both"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="our service's worker processes (default: 1)"
    )
    parser.add_argument(
        "--litellm",
        action="store_true",
        help="measure LiteLLM's proxy too (its own virtual environment, made on first use)",
    )
    parser.add_argument(
        "--litellm-venv",
        type=Path,
        default=DEFAULT_VENV,
        metavar="PATH",
        help="where LiteLLM's virtual environment is (default: ~/.cache/workingmem/bench-litellm)",
    )
    parser.add_argument(
        "--load",
        choices=["auto", "wrk", "httpx"],
        default="auto",
        help="the load generator: wrk (in C: the servers get the cores) or httpx clients on "
        "this script's loop; auto: wrk when it is on PATH (default)",
    )
    add_store_options(parser)
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-service", metavar="UPSTREAM_URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.repeat < 1 or args.workers < 1:
        parser.error("--seconds, --repeat and --workers must be positive")
    if args.load == "auto":
        args.load = "wrk" if wrk_path() else "httpx"
    elif args.load == "wrk" and not wrk_path():
        parser.error("--load wrk: wrk is not on PATH (apt-get install wrk)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_upstream:
        serve_upstream()
        return 0
    if args.serve_service:
        serve_service(args.serve_service, args.workers)
        return 0
    conversations = read_conversations(args.data, "bench_service")
    load_before = load_average()
    runs = asyncio.run(run_all(args, conversations))
    litellm = "not measured (--litellm)"
    if args.litellm:
        version = litellm_version(ensure_litellm(args.litellm_venv, progress))
        litellm = f"{version}, 1 worker, in {args.litellm_venv.name}'s virtual environment"
    print_header(args, conversations, load_before, litellm)
    print_targets(runs, args.workers)
    for run in runs:
        print_store(run, args.seconds, args.workers)
    print_notes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
