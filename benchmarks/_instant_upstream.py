"""An OpenAI-compatible upstream that answers at once, for the service benchmarks.

    $ python benchmarks/bench_service.py --serve-upstream      # prints its port, then serves

A raw asyncio HTTP/1.1 keep-alive server on 127.0.0.1 (one loop, no framework, so that it never
sets the pace): ``POST .../chat/completions`` answers "OK." as one JSON body, or as server-sent
events in OpenAI's chunk format when the request streams (with the usage chunk when it asks
for it); a helper call (a request with ``response_format``) gets a summary of realistic size
built from the turns it is given. ``GET /stats`` counts the answers, the messages and the bytes
they carried, and the helper calls.

`workingmem.llm.testing.ScriptedUpstream` is not used: it speaks HTTP/1.0 (a new connection per
request) and starts a thread per connection, so at 8 clients and more it, not the server under
test, would set the pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from typing import Any

from bench_gateway import scripted_summary
from workingmem.gateway_config import GatewayConfig

__all__ = ["ANSWER", "MODEL_ID", "InstantUpstream", "serve_upstream"]

ANSWER = "OK."
MODEL_ID = GatewayConfig().default_model
"""The model its answers name: the service's default."""


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
        "usage": _usage(prompt_tokens, completion_tokens),
    }
    return json.dumps(body).encode()


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_events(text: str, with_usage: bool) -> bytes:
    """The same answer as server-sent events in OpenAI's chunk format, ``[DONE]`` last."""
    head = {"id": "chatcmpl-instant", "object": "chat.completion.chunk", "created": 0}
    head["model"] = MODEL_ID
    deltas: list[dict[str, Any]] = [
        {"role": "assistant", "content": text},
        {},
    ]
    chunks = [
        {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        for delta, finish in zip(deltas, (None, "stop"), strict=True)
    ]
    if with_usage:
        chunks.append({**head, "choices": [], "usage": _usage(1_000, 2)})
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return ("".join(events) + "data: [DONE]\n\n").encode()


def http_response(status: int, body: bytes, kind: str = "application/json") -> bytes:
    """A whole HTTP/1.1 response, written in one send (keep-alive)."""
    reason = {200: "OK", 404: "Not Found"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: {kind}\r\ncontent-length: {len(body)}\r\n\r\n"
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
    keep-alive, on one asyncio loop. ``GET /stats`` gives the answers, the messages they
    carried and the helper calls so far."""

    def __init__(self) -> None:
        self.answers = 0
        self.messages = 0
        self.answer_bytes = 0
        self.helpers = 0
        self._answer = http_response(200, completion_json(ANSWER, 1_000, 2))
        events = "text/event-stream"
        self._events = {
            usage: http_response(200, completion_events(ANSWER, usage), events)
            for usage in (False, True)
        }

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
                self.messages += body.count(b'"role"')
                self.answer_bytes += len(body)
                if re.search(rb'"stream"\s*:\s*true', body) is None:
                    return self._answer
                return self._events[re.search(rb'"include_usage"\s*:\s*true', body) is not None]
            self.helpers += 1
            prompt = json.loads(body)["messages"][-1]["content"]
            text = json.dumps(scripted_summary(prompt))
            return http_response(200, completion_json(text, len(prompt) // 4, len(text) // 4))
        if line.startswith(b"GET ") and b"/stats" in line:
            stats = {
                "answers": self.answers,
                "messages": self.messages,
                "answer_bytes": self.answer_bytes,
                "helpers": self.helpers,
            }
            return http_response(200, json.dumps(stats).encode())
        return http_response(404, b'{"error": {"message": "no such route", "type": "not_found"}}')


def serve_upstream() -> None:
    """The instant upstream until SIGTERM (or SIGINT); it prints its port first."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(InstantUpstream().serve())
