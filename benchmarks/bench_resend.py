"""A client that resends the whole history on every call (a chat front end, LangChain, the
Agents SDK), through the gateway and straight to the upstream, over a 200-turn conversation.

    .venv/bin/python benchmarks/bench_resend.py [--turns 200] [--runs 3]

The conversation is LoCoMo's (see `_data`): its user turns are the client's messages, its
assistant turns the upstream's answers (a scripted upstream on 127.0.0.1 answers each user turn
with the turn that followed it, and the gateway's helper calls with a summary of realistic
size). Per request the client sends everything so far plus the new user turn, naming no thread
(the gateway finds the conversation by how it opens), as such clients do, and again naming it
(``X-Thread-Id``), the two runs alternating. Each request goes
twice, back to back: straight to the upstream ("direct"), then through the gateway ("memory",
`workingmem serve` defaults on SQLite: SUMMARY_BUFFER, gpt-4o-mini's window and tokenizer).

It prints, for the requests of the conversation's second half: the upstream's input tokens
per request (what it was sent, counted with o200k_base) direct and with memory, and their
ratio; the gateway's overhead per request (its latency minus the direct one), median and p99;
and, over the runs, the spread. It never asserts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from _cli import positive_ints
from _data import default_data_path, read_conversations, thread_messages
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import ServiceSettings, create_app
from workingmem.tokens import tokenizer_for
from workingmem.types import ModelInfo

TOKENIZER = tokenizer_for(ModelInfo(id="gpt-4o-mini", context_window=128_000))


def input_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(TOKENIZER.count_message(m) for m in messages) + TOKENIZER.reply_overhead


def helper_summary(request: dict[str, Any]) -> Reply:
    """A summary of realistic size (about 900 characters) and a few facts, as JSON."""
    prompt = str(request["messages"][-1]["content"])
    summary = ("The user and the assistant talked about " + prompt[-700:]).replace('"', "'")
    facts = [{"text": f"fact {n}: " + prompt[n * 40 : n * 40 + 60]} for n in range(3)]
    return Reply(json.dumps({"summary": summary, "facts": facts}))


class Upstream:
    """The scripted upstream: each user turn is answered with the turn that followed it."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def __call__(self, request: dict[str, Any]) -> Reply:
        if "response_format" in request:
            return helper_summary(request)
        return Reply(self.answers.get(str(request["messages"][-1]["content"]), "OK."))


class Service:
    """`create_app` under uvicorn in a thread, on a free loopback port."""

    def __init__(self, settings: ServiceSettings) -> None:
        config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=0, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join()


def requests_of(turns: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], str]]:
    """(what the client sends, what the upstream answers) for each user turn followed by an
    assistant turn: the history so far and the new user turn."""
    return [
        (turns[: i + 1], turns[i + 1]["content"])
        for i in range(len(turns) - 1)
        if turns[i]["role"] == "user" and turns[i + 1]["role"] == "assistant"
    ]


def run(turns: list[dict[str, Any]], named: bool) -> dict[str, list[float]]:
    """One conversation; `named` sends ``X-Thread-Id`` (else the gateway finds it)."""
    calls = requests_of(turns)
    upstream = ScriptedUpstream(responder=Upstream({m[-1]["content"]: a for m, a in calls}))
    figures: dict[str, list[float]] = {"direct": [], "memory": [], "tokens_direct": []}
    figures["tokens_memory"] = []
    with tempfile.TemporaryDirectory() as folder, upstream:
        settings = ServiceSettings(
            database_url=f"sqlite:///{Path(folder) / 'memory.db'}",
            upstream_base_url=upstream.base_url,
            upstream_api_key="sk-bench-not-a-key",
        )
        with Service(settings) as url, httpx.Client(timeout=30) as client:
            for index, (messages, _) in enumerate(calls):
                body = {"model": "gpt-4o-mini", "messages": messages}
                started = time.perf_counter()
                direct = client.post(f"{upstream.base_url}/chat/completions", json=body)
                direct_seconds = time.perf_counter() - started
                started = time.perf_counter()
                headers = {"X-Thread-Id": "bench"} if named else {}
                memory = client.post(f"{url}/v1/chat/completions", json=body, headers=headers)
                memory_seconds = time.perf_counter() - started
                assert direct.status_code == memory.status_code == 200, memory.text
                sent = [r for r in upstream.requests if "response_format" not in r][-1]
                if index >= len(calls) // 2:  # the second half: a long conversation
                    figures["direct"].append(direct_seconds)
                    figures["memory"].append(memory_seconds)
                    figures["tokens_direct"].append(input_tokens(messages))
                    figures["tokens_memory"].append(input_tokens(sent["messages"]))
    return figures


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="the conversation's length")
    parser.add_argument("--runs", type=positive_ints, default=[3], help="how many runs")
    parser.add_argument("--data", type=Path, default=default_data_path())
    args = parser.parse_args()
    turns = thread_messages(read_conversations(args.data, "bench_resend"), turns=args.turns)
    runs = [(named, run(turns, named)) for _ in range(args.runs[0]) for named in (False, True)]
    print(f"A client resending a {args.turns}-turn LoCoMo conversation, second half of it:")
    print(
        f"{'run':>4} {'thread':>6} {'tokens direct':>14} {'tokens memory':>14} {'ratio':>6} "
        f"{'overhead p50 ms':>16} {'p99 ms':>8}"
    )
    for number, (named, figures) in enumerate(runs, start=1):
        overhead = [m - d for m, d in zip(figures["memory"], figures["direct"], strict=True)]
        direct_tokens = statistics.mean(figures["tokens_direct"])
        memory_tokens = statistics.mean(figures["tokens_memory"])
        print(
            f"{(number + 1) // 2:>4} {'named' if named else 'found':>6} "
            f"{direct_tokens:>14.0f} {memory_tokens:>14.0f} "
            f"{memory_tokens / direct_tokens:>6.2f} {statistics.median(overhead) * 1000:>16.1f} "
            f"{p99(overhead) * 1000:>8.1f}"
        )
    last = runs[-1][1]
    print(
        f"At the last request: {last['tokens_direct'][-1]} tokens direct, "
        f"{last['tokens_memory'][-1]} with memory "
        f"({last['tokens_memory'][-1] / last['tokens_direct'][-1]:.2f}x)."
    )
    print(f"Python {sys.version.split()[0]}; medians over {len(last['direct'])} requests a run.")


if __name__ == "__main__":
    main()
