"""What the parts under a request to our service cost alone, beside what the service costs, in
one run: the floors that no change of ours takes away.

    .venv/bin/python benchmarks/bench_floors.py [--clients 8] [--seconds 3] [--repeat 3]

`bench_service.py` gives the service's CPU a request against LiteLLM's proxy; this says how much
of ours is the web framework, the upstream client and the store. Each figure is CPU time a
request (the median of ``--repeat`` runs, then their spread), on a machine whose cores these
processes share:

- servers under wrk (needs wrk on PATH), a fresh thread a request, one worker each, uvicorn with
  the loop and HTTP parser ``workingmem serve`` gets, the server's CPU from /proc:
  - **ours**: ``workingmem serve``'s app (the defaults, SQLite, a JSON answer) in front of the
    instant upstream (`bench_service.py --serve-service`), its background queue drained;
  - **raw ASGI**: an app that reads the body and answers a fixed chat completion;
  - **FastAPI route**: a FastAPI route that takes the chat body model (the service's
    `ChatCompletionRequest`) and answers the same;
- in this process, against the instant upstream and a fresh SQLite file:
  - **aiohttp POST**: one POST of a chat body and its JSON read, the floor of the upstream
    client (our `OpenAIClient` sends through aiohttp in the service);
  - **our upstream client**: `OpenAIClient.complete` over the same;
  - **our store's part of a fresh ask**: `claim_and_open` with the question, then
    `append_and_release` with the answer (two SQLite transactions), as the gateway makes them.

SQLite only: the store whose work costs no round trip, so the floors are the lowest ours could
reach; on PostgreSQL each of an ask's round trips adds the driver's work on the event loop
(`bench_round_trips.py` counts them). The requests are LoCoMo user turns (see `_data`). It
prints, never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from fastapi import FastAPI
from fastapi.responses import JSONResponse

import workingmem as wm
from _data import default_data_path, read_conversations
from _instant_upstream import ANSWER, completion_json
from _processes import cpu_seconds, server_process, server_socket
from _wrk import run_wrk, wrk_path
from bench_gateway import progress
from bench_service import MODEL_ID, drain, median_of, request_bodies, spread, wait_ready
from workingmem.llm import OpenAIClient
from workingmem.llm.base import CallKind, CallMeta
from workingmem.service.chat_schemas import ChatCompletionRequest

BENCH_SERVICE = str(Path(__file__).resolve().with_name("bench_service.py"))
MARKER = json.dumps(ANSWER).encode()
"""What every answer carries, as wrk checks it."""
CALLS = 2_000
"""Calls a repeat of each in-process floor."""


# -- the floor servers --------------------------------------------------------------------------


def floor_app(kind: str) -> Any:
    """The raw ASGI app or the FastAPI app, each answering a fixed chat completion."""
    body = completion_json(ANSWER, 10, 2)
    if kind == "raw":

        async def raw(scope: dict[str, Any], receive: Any, send: Any) -> None:
            more = scope["type"] == "http"
            while more:
                more = (await receive()).get("more_body", False)
            length = str(len(body)).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", length)]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return raw
    app = FastAPI()
    answer = json.loads(body)

    @app.post("/v1/chat/completions")
    async def chat(body: ChatCompletionRequest) -> JSONResponse:  # a module's name: FastAPI
        # reads the annotation from the module, under `from __future__ import annotations`
        return JSONResponse(answer)

    return app


def serve_floor(kind: str) -> None:
    """A floor app under uvicorn on a free port that it prints, as `serve_service` serves ours."""
    import uvicorn

    sock = server_socket()
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(floor_app(kind), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


# -- measuring ------------------------------------------------------------------------------


async def server_cpu(
    pid: int, url: str, bodies: list[bytes], args: argparse.Namespace, *, drained: bool
) -> float:
    """The server's CPU ms a request over one wrk run of fresh threads (after a warm-up), with
    the queue drained after it when `drained` (ours)."""
    target = f"{url}/v1/chat/completions"
    await run_wrk(target, bodies, {}, clients=args.clients, seconds=1, fresh="warm-", marker=MARKER)
    before = cpu_seconds(pid)
    result = await run_wrk(
        target,
        bodies,
        {},
        clients=args.clients,
        seconds=args.seconds,
        fresh=f"run-{uuid.uuid4().hex[:8]}-",
        marker=MARKER,
    )
    if result.failed:
        raise RuntimeError(f"{url}: {result.failed} failed requests: {result.first_error}")
    if drained:
        async with httpx.AsyncClient(timeout=10) as http:
            await drain(http, url, 1)
    return (cpu_seconds(pid) - before) * 1000 / result.succeeded


async def call_cpu(call: Callable[[int], Awaitable[object]]) -> float:
    """This process's CPU ms a call of `call` (given its index), after a warm-up."""
    for index in range(200):
        await call(-index - 1)
    start = time.process_time()
    for index in range(CALLS):
        await call(index)
    return (time.process_time() - start) * 1000 / CALLS


async def in_process(upstream: str, body: bytes, database: Path) -> dict[str, float]:
    """The aiohttp POST, our upstream client and our store's part of a fresh ask, once each,
    each with the question `body` asks."""
    question = json.loads(body)["messages"][0]
    meta = CallMeta(tenant_id="bench", kind=CallKind.ANSWER, model=MODEL_ID)
    tokenizer = wm.tokenizer_for(wm.ModelInfo(id=MODEL_ID, context_window=128_000))
    found: dict[str, float] = {}
    async with aiohttp.ClientSession() as session:

        async def post(_: int) -> object:
            headers = {"content-type": "application/json"}
            async with session.post(
                f"{upstream}/chat/completions", data=body, headers=headers
            ) as r:
                return json.loads(await r.read())

        found["aiohttp POST"] = await call_cpu(post)
    async with OpenAIClient(
        base_url=upstream, api_key="bench", max_retries=0, http="aiohttp"
    ) as llm:

        async def complete(_: int) -> object:
            return await llm.complete(model=MODEL_ID, messages=[question], meta=meta)

        found["our upstream client"] = await call_cpu(complete)
    store = await wm.open_store(str(database))
    run = uuid.uuid4().hex[:8]
    try:

        async def ask(index: int) -> object:
            keys = {"tenant_id": "bench", "thread_id": f"floor-{run}-{index}"}
            owner = uuid.uuid4().hex
            await store.claim_and_open(
                **keys, owner=owner, ttl_seconds=60, tokenizer=tokenizer, limit=64,
                opening=[question],
            )  # fmt: skip
            answer = {"role": "assistant", "content": ANSWER}
            return await store.append_and_release(**keys, messages=[answer], owner=owner)

        found["our store's part of a fresh ask"] = await call_cpu(ask)
    finally:
        await store.aclose()
    return found


async def run_all(args: argparse.Namespace, bodies: list[bytes]) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="workingmem-floors-") as folder:
        database = Path(folder) / "memory.db"
        env = {"WORKINGMEM_DATABASE_URL": str(Path(folder) / "service.db")}
        upstream_cmd = [sys.executable, BENCH_SERVICE, "--serve-upstream"]
        with server_process("upstream", upstream_cmd, {}) as (_, upstream_port):
            upstream = f"http://127.0.0.1:{upstream_port}/v1"
            servers = {
                "ours": [sys.executable, BENCH_SERVICE, "--serve-service", upstream],
                "raw ASGI": [sys.executable, __file__, "--serve", "raw"],
                "FastAPI route": [sys.executable, __file__, "--serve", "route"],
            }
            for repeat in range(args.repeat):
                for name, command in servers.items():
                    progress(f"#{repeat + 1}: {name}")
                    with server_process(name, command, env) as (pid, port):
                        url = f"http://127.0.0.1:{port}"
                        if name == "ours":
                            await wait_ready(f"{url}/healthz")
                        cpu = await server_cpu(pid, url, bodies, args, drained=name == "ours")
                        figures.setdefault(name, []).append(cpu)
                progress(f"#{repeat + 1}: in process")
                for name, cpu in (await in_process(upstream, bodies[0], database)).items():
                    figures.setdefault(name, []).append(cpu)
    return figures


# -- the report -----------------------------------------------------------------------------


SERVER_ROWS = {
    "ours": "ours: `workingmem serve`, fresh thread, JSON answer",
    "raw ASGI": "raw ASGI app under uvicorn, fixed answer",
    "FastAPI route": "FastAPI route taking the chat body model, fixed answer",
}
FLOOR_SUM = ("FastAPI route", "aiohttp POST", "our store's part of a fresh ask")
"""What a fresh ask cannot do without: the framework's route, an upstream call, the store."""


def report(figures: dict[str, list[float]], args: argparse.Namespace) -> None:
    ours = median_of(figures["ours"])
    print(
        f"CPU a request, ms: median of {args.repeat} runs (min-max); servers under wrk, "
        f"{args.clients} connections, {args.seconds:g} s a run, a fresh thread a request"
    )
    print("| part | CPU a request, ms | share of ours |")
    print("| --- | ---: | ---: |")
    for name, values in figures.items():
        label = SERVER_ROWS.get(name, name)
        share = f"{median_of(values) / ours:.0%}"
        print(f"| {label} | {spread(values, 3)} | {share} |")
    floors = sum(median_of(figures[name]) for name in FLOOR_SUM)
    print(
        f"| the FastAPI route, an aiohttp POST and our store's part, together | {floors:.3f} | "
        f"{floors / ours:.0%} |"
    )
    print(
        "\nThe rest of ours is the gateway's own work (the window, the question's count, the "
        "context, the answer's turn, the update queued), our HTTP layer (keys, the thread's "
        "headers, the response), and the loop's work for the upstream's and the store's waits."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="wrk connections (default: 8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="a run's seconds (default: 3)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of everything (default: 3)")
    parser.add_argument("--data", type=Path, default=default_data_path(), help="LoCoMo JSON")
    parser.add_argument("--serve", choices=["raw", "route"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0 or args.repeat < 1:
        parser.error("--clients, --seconds and --repeat must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve_floor(args.serve)
        return 0
    if wrk_path() is None:
        print("bench_floors: needs wrk on PATH (apt-get install wrk)", file=sys.stderr)
        return 2
    conversations = read_conversations(args.data, "bench_floors")
    turns = request_bodies(conversations, "", stream=False)
    bodies = [next(turns) for _ in range(512)]
    report(asyncio.run(run_all(args, bodies)), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
