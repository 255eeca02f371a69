"""A client that resends its whole session, screenshots included, with every call (Claude Code
in front of the gateway): what one ask costs the gateway, this checkout beside another one.

    .venv/bin/python benchmarks/bench_resend_files.py [--shots 20] [--photo-kb 300]
    git worktree add ../before <commit>
    .venv/bin/python benchmarks/bench_resend_files.py --other ../before

The session is the first LoCoMo conversation (see `_data`) as an agent's: each of its first
`--shots` user turns that share a photo asks, the model calls a ``view_photo`` tool, whose
Anthropic ``tool_result`` carries the photo (`--photo-kb` KB of base64, made up: what is
measured is the bytes), and the turn after it is the model's answer. The library's
`Gateway.ask` (SQLite, a scripted upstream on 127.0.0.1 that answers at once) is given the whole
session plus a new question, as the client resends it, `--asks` times after a first untimed
ask; each version runs in a fresh process of its own (its checkout's ``src`` first on
``PYTHONPATH``), the two alternating `--repeat` times. It prints the median and the spread of
the asks' milliseconds per version and their ratio; it never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import default_data_path, read_conversations
from _versions import add_version_options, versions

MODEL = "claude-sonnet-4-5"


def session(shots: int, photo_bytes: int) -> list[dict[str, Any]]:
    """The agent's session in Anthropic's messages (see the module)."""
    conversation = read_conversations(default_data_path(), "bench_resend_files")[0]
    made: list[dict[str, Any]] = []
    for index, message in enumerate(conversation[:-1]):
        if len(made) == 4 * shots:
            break
        if message["role"] != "user" or "[shares a photo:" not in message["content"]:
            continue
        seed = f"photo {index} ".encode()
        data = base64.b64encode(seed * (photo_bytes // len(seed) * 3 // 4 + 1)).decode()
        source = {"type": "base64", "media_type": "image/jpeg", "data": data}
        call = f"toolu_{index}"
        made += [
            {"role": "user", "content": message["content"]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "view_photo", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call,
                        "content": [{"type": "image", "source": source}],
                    }
                ],
            },
            {"role": "assistant", "content": str(conversation[index + 1]["content"])},
        ]
    return made


async def asks(shots: int, photo_bytes: int, count: int) -> list[float]:
    """Milliseconds of each timed ask of this process's `workingmem`."""
    import workingmem as wm
    from workingmem.formats.anthropic import turns_of
    from workingmem.llm import OpenAIClient
    from workingmem.llm.testing import Reply, ScriptedUpstream

    history = session(shots, photo_bytes)
    models = {
        MODEL: wm.ModelInfo(id=MODEL, context_window=200_000),
        "cheap": wm.ModelInfo(id="cheap", context_window=32_000),
    }
    config = wm.GatewayConfig(default_model=MODEL, cheap_model="cheap", models=models)
    timed: list[float] = []
    with (
        tempfile.TemporaryDirectory() as folder,
        ScriptedUpstream(responder=lambda _: Reply("Noted.")) as upstream,
    ):
        store = await wm.open_store(str(Path(folder) / "memory.db"))
        client = OpenAIClient(base_url=upstream.base_url, api_key="bench")
        try:
            async with wm.Gateway(store=store, llm=client, config=config) as gateway:
                for number in range(count + 1):
                    history.append({"role": "user", "content": f"And photo {number}?"})
                    started = time.perf_counter()
                    answer = await gateway.ask(
                        tenant_id="bench", thread_id="session", messages=turns_of(history)
                    )
                    if number:  # the first stores the session
                        timed.append((time.perf_counter() - started) * 1000)
                    history.append({"role": "assistant", "content": answer.answer})
        finally:
            await client.aclose()
            await store.aclose()
    return timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shots", type=int, default=20, help="screenshots (default: 20)")
    parser.add_argument("--photo-kb", type=int, default=300, help="KB each (default: 300)")
    parser.add_argument("--asks", type=int, default=3, help="timed asks a run (default: 3)")
    add_version_options(parser)
    args = parser.parse_args()
    options = [
        "--shots",
        str(args.shots),
        "--photo-kb",
        str(args.photo_kb),
        "--asks",
        str(args.asks),
    ]
    title = (
        f"A resent session of {args.shots} screenshots of {args.photo_kb} KB: one ask, ms (SQLite)"
    )
    return versions(
        args,
        lambda: asyncio.run(asks(args.shots, args.photo_kb * 1024, args.asks)),
        __file__,
        options,
        title,
    )


if __name__ == "__main__":
    sys.exit(main())
