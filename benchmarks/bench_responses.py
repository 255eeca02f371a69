"""`/v1/responses` beside `/v1/chat/completions` on the same conversation, and the input a
long `previous_response_id` chain sends upstream with the memory against the whole chain.

    .venv/bin/python benchmarks/bench_responses.py [--turns 200] [--requests 100] [--rounds 3]

`workingmem serve` runs in a process of its own (SQLite in a temporary folder), in front of the
instant upstream (`_instant_upstream`, another process): every answer is "OK." at once, so what
is timed is the gateway. The messages are LoCoMo user turns.

- **overhead**: one client, one request at a time, alternating: a chat completion that sends
  only the new message with an ``X-Thread-Id``, then a response that continues its own thread
  with ``previous_response_id``; the same messages, both threads growing alike. Latency as the
  client sees it (median, p99), per endpoint, and the difference.
- **input**: a chain of `--turns` turns (`--turns / 2` requests, each continuing from the one
  before) through ``/v1/responses``: what the upstream is sent per request (its request's
  bytes / 4, as the instant upstream counts them), against the same chain replayed whole (what
  a server that replays the chain sends: the whole input, passed through), counted the same
  way. The profile: the service's default (SUMMARY_BUFFER, gpt-4o-mini, a 128,000-token
  window: the memory's budget is half of it, so a chain shorter than that is sent whole).

- **socket**: one client, alternating, two chains of `--requests` turns each continuing the
  one before by ``previous_response_id``: one of streamed POSTs (a keep-alive connection), one
  of ``response.create`` events on one WebSocket (the Responses API's WebSocket mode). Latency
  to the ``response.completed`` event as the client reads it (median, p99), and the ratio.

Each round runs all three parts; the report gives the median over the rounds and their spread
(min-max). It prints figures, never asserts. Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from _data import default_data_path, load_conversations, thread_messages
from _processes import server_process
from bench_gateway import progress
from bench_service import wait_ready

SERVICE = Path(__file__).resolve().parent / "bench_service.py"
DATABASE_ENV = "WORKINGMEM_DATABASE_URL"


def user_texts(count: int) -> Iterator[str]:
    """LoCoMo's user turns, in order, as many as asked (the data cycles if short)."""
    messages = thread_messages(load_conversations(default_data_path()), count * 2)
    texts = [str(m["content"]) for m in messages if m["role"] == "user"]
    for index in range(count):
        yield texts[index % len(texts)]


def chat(client: httpx.Client, thread: str, text: str) -> float:
    started = time.perf_counter()
    answer = client.post(
        "/v1/chat/completions",
        headers={"X-Thread-Id": thread},
        json={"messages": [{"role": "user", "content": text}]},
    )
    elapsed = time.perf_counter() - started
    answer.raise_for_status()
    return elapsed


def respond(
    client: httpx.Client, previous: str | None, text: str
) -> tuple[float, dict[str, object]]:
    body: dict[str, object] = {"input": text}
    if previous is not None:
        body["previous_response_id"] = previous
    started = time.perf_counter()
    answer = client.post("/v1/responses", json=body)
    elapsed = time.perf_counter() - started
    answer.raise_for_status()
    return elapsed, answer.json()


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def overhead(client: httpx.Client, requests: int) -> dict[str, float]:
    """Alternating chat and responses requests on two threads of the same messages."""
    thread = f"chat-{uuid.uuid4().hex}"
    previous: str | None = None
    chats: list[float] = []
    responses: list[float] = []
    for text in user_texts(requests):
        chats.append(chat(client, thread, text))
        elapsed, body = respond(client, previous, text)
        responses.append(elapsed)
        previous = str(body["id"])
    return {
        "chat_p50": statistics.median(chats) * 1000,
        "chat_p99": p99(chats) * 1000,
        "responses_p50": statistics.median(responses) * 1000,
        "responses_p99": p99(responses) * 1000,
    }


def sent_bytes(upstream: httpx.Client) -> int:
    """The bytes of the answer requests the upstream received so far."""
    return int(upstream.get("/stats").json()["answer_bytes"])


def chain_input(client: httpx.Client, upstream: httpx.Client, turns: int) -> dict[str, float]:
    """Tokens the upstream is sent per request (request bytes / 4, JSON included) along a
    `previous_response_id` chain with the memory, and along the same chain replayed whole
    (``store: false``, the whole input each call, ``X-Workingmem-History: client``: the
    gateway passes it through as a server that replays the chain does)."""
    previous: str | None = None
    history: list[dict[str, object]] = []
    memory: list[float] = []
    whole: list[float] = []
    replay = {"X-Workingmem-History": "client", "X-Thread-Id": f"replay-{uuid.uuid4().hex}"}
    for text in user_texts(turns // 2):
        before = sent_bytes(upstream)
        _, body = respond(client, previous, text)
        memory.append((sent_bytes(upstream) - before) / 4)
        previous = str(body["id"])
        history.append({"role": "user", "content": text})
        before = sent_bytes(upstream)
        answer = client.post(
            "/v1/responses", json={"input": history, "store": False}, headers=replay
        )
        answer.raise_for_status()
        whole.append((sent_bytes(upstream) - before) / 4)
        output = answer.json()["output"]
        history += [{"role": "assistant", "content": item["content"][0]["text"]} for item in output]
    return {
        "memory_last": memory[-1],
        "whole_last": whole[-1],
        "memory_mean": statistics.mean(memory),
        "whole_mean": statistics.mean(whole),
    }


def streamed(client: httpx.Client, previous: str | None, text: str) -> tuple[float, str]:
    """A streamed POST continuing `previous`: its time to the last event, and its id."""
    body: dict[str, object] = {"input": text, "stream": True}
    if previous is not None:
        body["previous_response_id"] = previous
    started = time.perf_counter()
    with client.stream("POST", "/v1/responses", json=body) as answer:
        answer.raise_for_status()
        last = ""
        for line in answer.iter_lines():
            if line.startswith("data: "):
                last = line
    elapsed = time.perf_counter() - started
    return elapsed, str(json.loads(last.removeprefix("data: "))["response"]["id"])


def socket_turn(socket: Connection, previous: str | None, text: str) -> tuple[float, str]:
    """A ``response.create`` event continuing `previous`: its time to ``response.completed``."""
    event: dict[str, object] = {"type": "response.create", "input": text}
    if previous is not None:
        event["previous_response_id"] = previous
    started = time.perf_counter()
    socket.send(json.dumps(event))
    while (answer := json.loads(socket.recv()))["type"] not in ("response.completed", "error"):
        pass
    elapsed = time.perf_counter() - started
    if answer["type"] != "response.completed":
        raise RuntimeError(f"the socket's response failed: {answer}")
    return elapsed, str(answer["response"]["id"])


def socket_chain(client: httpx.Client, requests: int) -> dict[str, float]:
    """Two chains of the same turns, alternating: streamed POSTs and one WebSocket."""
    posted: list[float] = []
    sent: list[float] = []
    post_id: str | None = None
    socket_id: str | None = None
    url = str(client.base_url.copy_with(scheme="ws", path="/v1/responses"))
    with connect(url) as socket:
        for text in user_texts(requests):
            elapsed, post_id = streamed(client, post_id, text)
            posted.append(elapsed)
            elapsed, socket_id = socket_turn(socket, socket_id, text)
            sent.append(elapsed)
    return {
        "post_p50": statistics.median(posted) * 1000,
        "post_p99": p99(posted) * 1000,
        "socket_p50": statistics.median(sent) * 1000,
        "socket_p99": p99(sent) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns of the chain (input part)")
    parser.add_argument("--requests", type=int, default=100, help="requests per endpoint")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds: list[dict[str, float]] = []
    with (
        server_process("upstream", [sys.executable, str(SERVICE), "--serve-upstream"], {}) as (
            _,
            upstream_port,
        ),
        tempfile.TemporaryDirectory(prefix="workingmem-bench-") as folder,
    ):
        upstream = f"http://127.0.0.1:{upstream_port}/v1"
        command = [sys.executable, str(SERVICE), "--serve-service", upstream, "--workers", "1"]
        env = {DATABASE_ENV: str(Path(folder) / "service.db")}
        with (
            server_process("service", command, env) as (_, port),
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client,
            httpx.Client(base_url=f"http://127.0.0.1:{upstream_port}") as upstream_client,
        ):
            asyncio.run(wait_ready(f"http://127.0.0.1:{port}/healthz"))
            for number in range(args.rounds):
                progress(f"round {number + 1} of {args.rounds}")
                figures = overhead(client, args.requests)
                figures.update(chain_input(client, upstream_client, args.turns))
                figures.update(socket_chain(client, args.requests))
                rounds.append(figures)
    report(rounds, args)


def report(rounds: list[dict[str, float]], args: argparse.Namespace) -> None:
    def cell(key: str) -> str:
        values = [r[key] for r in rounds]
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    def ratio(top: str, bottom: str) -> str:
        values = [r[top] / r[bottom] for r in rounds]
        return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"

    print(f"# /v1/responses beside /v1/chat/completions ({len(rounds)} rounds; median (min-max))")
    print()
    print(f"overhead, {args.requests} requests each, one client, ms per request")
    print(f"  chat completions  p50 {cell('chat_p50')}  p99 {cell('chat_p99')}")
    print(f"  responses         p50 {cell('responses_p50')}  p99 {cell('responses_p99')}")
    print(f"  responses / chat  p50 {ratio('responses_p50', 'chat_p50')}")
    print(f"                    p99 {ratio('responses_p99', 'chat_p99')}")
    print()
    print(f"input tokens per request, a {args.turns}-turn previous_response_id chain")
    print(f"  with the memory   last {cell('memory_last')}  mean {cell('memory_mean')}")
    print(f"  the whole chain   last {cell('whole_last')}  mean {cell('whole_mean')}")
    print(f"  memory / whole    last {ratio('memory_last', 'whole_last')}")
    print(f"                    mean {ratio('memory_mean', 'whole_mean')}")
    print()
    print(f"a {args.requests}-turn previous_response_id chain, streamed, ms per turn")
    print(f"  POST /v1/responses  p50 {cell('post_p50')}  p99 {cell('post_p99')}")
    print(f"  one WebSocket       p50 {cell('socket_p50')}  p99 {cell('socket_p99')}")
    print(f"  socket / POST       p50 {ratio('socket_p50', 'post_p50')}")
    print(f"                      p99 {ratio('socket_p99', 'post_p99')}")


if __name__ == "__main__":
    main()
