"""A client that resends its whole Responses session with every call (the Codex CLI: ``store:
false``, its session id as ``prompt_cache_key``, no thread id): what one request costs through
the gateway, as the session grows, this checkout beside another one.

    .venv/bin/python benchmarks/bench_resend_session.py [--exchanges 150] [--asks 20]
    git worktree add ../before <commit>
    .venv/bin/python benchmarks/bench_resend_session.py --other ../before

The session is an agent's, made of the first LoCoMo conversation (see `_data`): each of its
user turns is asked, the model runs a tool (a ``function_call`` and its
``function_call_output``, the turn that followed as the output), then answers "Done.": four
items an exchange, ``--exchanges`` of them. The service as `workingmem serve` builds it
(SQLite in a temporary folder, the default profile, the collector tuned), under uvicorn in a
thread, in front of a scripted upstream on 127.0.0.1 that answers at once (the summary updates
with a summary of realistic size); a first request stores the session, then each of `--asks`
requests resends it all with the answers so far and a new question. Each version runs
in a fresh process of its own (its checkout's ``src`` first on ``PYTHONPATH``), the two
alternating `--repeat` times. It prints the median and the spread of the requests' milliseconds
as the client saw them, per version, and their ratio; it never asserts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import default_data_path, read_conversations, thread_messages
from _versions import add_version_options, versions

MODEL = "gpt-4o-mini"


def session(exchanges: int) -> list[dict[str, Any]]:
    """The agent's session as the client keeps it (see the module)."""
    conversations = read_conversations(default_data_path(), "bench_resend_session")
    turns = thread_messages(conversations, turns=4 * exchanges + 1)
    items: list[dict[str, Any]] = []
    pairs = itertools.pairwise(turns)
    for index, (asked, followed) in enumerate(p for p in pairs if p[0]["role"] == "user"):
        if index == exchanges:
            break
        call = f"call_{index}"
        items += [
            {"type": "message", "role": "user", "content": asked["content"]},
            {
                "type": "function_call",
                "call_id": call,
                "name": "exec_command",
                "arguments": json.dumps({"cmd": f"recall {index}"}),
            },
            {"type": "function_call_output", "call_id": call, "output": followed["content"]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
            },
        ]
    return items


def _answer(request: dict[str, Any]) -> Any:
    from bench_resend import helper_summary
    from workingmem.llm.testing import Reply

    return helper_summary(request) if "response_format" in request else Reply("Noted.")


def requests(exchanges: int, count: int) -> list[float]:
    """Milliseconds of each timed request of this process's `workingmem`."""
    from bench_resend import Service
    from workingmem.llm.testing import ScriptedUpstream
    from workingmem.service import ServiceSettings

    history = session(exchanges)
    timed: list[float] = []
    with (
        tempfile.TemporaryDirectory() as folder,
        ScriptedUpstream(responder=_answer) as upstream,
    ):
        settings = ServiceSettings(
            database_url=f"sqlite:///{Path(folder) / 'memory.db'}",
            upstream_base_url=upstream.base_url,
            upstream_api_key="bench",
            tune_gc=True,  # as `workingmem serve` runs it
        )
        with Service(settings) as url, httpx.Client(timeout=60) as client:
            for number in range(count + 1):
                history.append({"type": "message", "role": "user", "content": f"And {number}?"})
                body = {
                    "model": MODEL,
                    "input": history,
                    "store": False,
                    "prompt_cache_key": "session-1",
                    "instructions": "You are a coding agent.",
                }
                started = time.perf_counter()
                answer = client.post(f"{url}/v1/responses", json=body)
                if number:  # the first stores the session
                    timed.append((time.perf_counter() - started) * 1000)
                answer.raise_for_status()
                history += answer.json()["output"]
    return timed


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=150, help="default: 150 (600 items)")
    parser.add_argument("--asks", type=int, default=20, help="timed requests a run (default: 20)")
    add_version_options(parser)
    args = parser.parse_args()
    options = ["--exchanges", str(args.exchanges), "--asks", str(args.asks)]
    title = (
        f"A Responses session of {args.exchanges * 4} items resent whole: one request, ms as "
        "the client saw it (SQLite)"
    )
    return versions(args, lambda: requests(args.exchanges, args.asks), __file__, options, title)


if __name__ == "__main__":
    sys.exit(main())
