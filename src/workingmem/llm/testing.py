"""`ScriptedUpstream`: a real OpenAI-compatible HTTP server on 127.0.0.1, for tests.

    async with ScriptedUpstream() as upstream:
        upstream.push(
            StatusError(429, retry_after=0.01),
            Reply('{"summary": "..."}', prompt_tokens=120, completion_tokens=30),
        )
        client = OpenAIClient(base_url=upstream.base_url)
        ...
        assert len(upstream.requests) == 2  # the SDK retried once

It speaks ``POST /v1/chat/completions`` (plain JSON or, for ``"stream": true``, server-sent
events in the OpenAI chunk format, with the usage chunk when ``stream_options.include_usage``),
``POST /v1/responses`` (a Response object, or its events when streamed; a `Reply`'s
``reasoning`` is a reasoning item with that encrypted content before the answer),
``POST /v1/messages`` (Anthropic's Message or its events, errors in Anthropic's shape; a
`Reply`'s ``thinking`` is a signed thinking block before the answer), its
``/v1/messages/count_tokens`` (`count_of`, not scripted) and ``GET /v1/models``.
A responder reads each request's JSON as it came (``messages`` for a chat completion or a
message, ``input`` for a response). Each request takes the next queued response; with the
queue empty it asks the default responder, which echoes the last user message. Responses:
`Reply` (text and/or tool calls, with usage), `RawBody`, `StatusError` (an OpenAI error body,
optionally ``Retry-After``), `Delay` (answer late, to trigger client timeouts) and `Drop`
(close the connection without answering); ``Reply(drop_after_chunks=n)`` breaks a stream off
midway.

The standard library only (``http.server``), in one background thread per connection; closing
the server wakes every delayed answer and joins every thread. The bodies it answers with are
built by `_scripted_openai` (chat completions, Responses) and `_scripted_anthropic` (Messages).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeAlias

from . import _scripted_anthropic as anthropic_wire
from ._scripted_openai import (
    DEFAULT_MODEL,
    completion_body,
    completion_chunks,
    response_body,
    response_events,
    text_of,
)

__all__ = [
    "DEFAULT_MODEL",
    "Delay",
    "Drop",
    "RawBody",
    "Reply",
    "Responder",
    "ScriptedResponse",
    "ScriptedUpstream",
    "StatusError",
    "echo",
    "signature_of",
    "tool_call",
]

signature_of = anthropic_wire.signature_of


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful chat completion: text, tool calls, or both."""

    text: str | None = ""
    """The assistant's content; None for a turn that only calls tools."""
    prompt_tokens: int | None = None
    """The reported input tokens, cached ones included; None estimates them from the request
    (chars / 4). Anthropic's answer reports those the cache did not serve as its
    ``input_tokens``, as Anthropic counts them."""
    completion_tokens: int | None = None
    """The reported output tokens; None estimates them from the text (chars / 4)."""
    tool_calls: Sequence[Mapping[str, Any]] = ()
    """Tool calls in OpenAI message format (see `tool_call`), with any fields of a server's own
    (Gemini's ``extra_content``), streamed in the call's first delta."""
    finish_reason: str | None = None
    """None picks ``tool_calls`` when there are calls, else ``stop``."""
    model: str | None = None
    """The model named in the answer; None repeats the request's."""
    usage: bool = True
    """False leaves the usage out of the answer, as some servers do."""
    chunk_chars: int = 8
    """When streamed: the characters of content per chunk."""
    more_choices: Sequence[str] = ()
    """Not streamed: the texts of further choices (a request with ``n`` > 1)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Not streamed: top-level fields added to the response (``system_fingerprint``, ...)."""
    drop_after_chunks: int | None = None
    """When streamed: close the connection after this many chunks, the body unfinished (the
    response declares its full length, so the client sees the stream broken off, as when a
    server crashes or a proxy cuts it). None streams the whole answer."""
    message_extra: Mapping[str, Any] = field(default_factory=dict)
    """Answering chat completions: fields of the assistant message beside its content (a
    reasoning model's ``reasoning_content``, as vLLM, Ollama and DeepSeek send it); streamed,
    before the content, a text in pieces of `chunk_chars`, anything else in one delta."""
    reasoning: str | None = None
    """Answering ``/v1/responses``: a reasoning item with this ``encrypted_content`` comes
    first in the output (ignored by chat completions)."""
    thinking: str | None = None
    """Answering ``/v1/messages``: a thinking block with this text and a signature
    (`signature_of`) comes first in the content (ignored by the OpenAI APIs)."""
    cached_tokens: int = 0
    """Of the input tokens, those reported read from the prompt cache."""
    cache_write_tokens: int = 0
    """Of the input tokens, those reported written to the prompt cache."""
    reasoning_tokens: int = 0
    """Of the output tokens, those reported spent reasoning."""


@dataclass(frozen=True, slots=True)
class RawBody:
    """Any body, verbatim: malformed JSON, a wrong shape, HTML from a proxy..."""

    body: str | bytes
    status: int = 200
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StatusError:
    """An HTTP error with an OpenAI error body ``{"error": {"message", "type", "code"}}``."""

    status: int
    message: str | None = None
    """None says what the status means."""
    type: str | None = None
    """None picks one from the status (``rate_limit_exceeded``, ``server_error``, ...)."""
    code: str | None = None
    retry_after: float | None = None
    """Seconds, sent as ``retry-after-ms`` and ``Retry-After`` (which the SDK honours)."""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Delay:
    """Waits `seconds`, then answers with `then`: long enough, a client times out first."""

    seconds: float
    then: ScriptedResponse = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class Drop:
    """Closes the connection without answering, after reading the request."""


ScriptedResponse: TypeAlias = Reply | RawBody | StatusError | Delay | Drop
"""What the server does with one request."""

Responder: TypeAlias = Callable[[dict[str, Any]], ScriptedResponse | str]
"""Answers a request (its parsed JSON body) when the queue is empty; a str is a `Reply`."""


def echo(request: dict[str, Any]) -> ScriptedResponse:
    """The default responder: answers with the text of the last user message (of a chat
    completion's ``messages``, or a response's ``input``)."""
    given = request.get("messages") or request.get("input") or []
    if isinstance(given, str):
        return Reply(given)
    for message in reversed(given):
        if isinstance(message, dict) and message.get("role") == "user":
            return Reply(text_of(message.get("content")))
    return Reply("")


def tool_call(
    name: str, arguments: Mapping[str, Any] | str, *, id: str | None = None
) -> dict[str, Any]:
    """One tool call in OpenAI message format, for `Reply(tool_calls=...)`."""
    return {
        "id": id or f"call_{name}",
        "type": "function",
        "function": {
            "name": name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


class ScriptedUpstream:
    """An OpenAI-compatible server on a free port of 127.0.0.1, scripted by the test.

    Use it as a context manager, sync (``with``) or async (``async with``), or call `start`
    and `close`. `requests` holds the JSON body of every chat-completion request received,
    retries included, in order.

    Args:
        responder: Answers when the queue is empty; `echo` by default.
        models: The ids ``GET /v1/models`` lists.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        models: Sequence[str] = (DEFAULT_MODEL,),
    ) -> None:
        self.responder: Responder = responder or echo
        self.models = tuple(models)
        self._lock = threading.Lock()
        self._queue: deque[ScriptedResponse] = deque()
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._closing = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> ScriptedUpstream:
        """Binds a free port on 127.0.0.1 and serves in a background thread."""
        if self._server is not None:
            raise RuntimeError("ScriptedUpstream is already started")
        server = _Server(("127.0.0.1", 0), _Handler)
        server.upstream = self
        self._closing.clear()
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedUpstream:{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stops serving, wakes delayed answers, joins every thread, closes the socket."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._closing.set()
        server.shutdown()
        thread.join()
        server.server_close()  # joins the connection threads
        self._server = self._thread = None

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> ScriptedUpstream:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Joining threads blocks: off the event loop, so a client on it can finish talking.
        await asyncio.to_thread(self.close)

    # -- the script ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the `base_url` for an OpenAI client."""
        if self._server is None:
            raise RuntimeError("ScriptedUpstream is not started: use it in a with block")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the chat-completion request bodies received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def headers(self) -> list[dict[str, str]]:
        """The HTTP headers of each request in `requests`, names lower-cased, same order."""
        with self._lock:
            return [dict(headers) for headers in self._headers]

    @property
    def pending(self) -> int:
        """How many queued responses no request has taken yet."""
        with self._lock:
            return len(self._queue)

    def push(self, *responses: ScriptedResponse | str) -> ScriptedUpstream:
        """Queues responses after those already queued; a str is a `Reply` with that text."""
        with self._lock:
            self._queue.extend(_as_response(response) for response in responses)
        return self

    def script(self, *responses: ScriptedResponse | str) -> ScriptedUpstream:
        """Replaces the queue with these responses."""
        with self._lock:
            self._queue.clear()
        return self.push(*responses)

    def _take(self, request: dict[str, Any], headers: dict[str, str]) -> ScriptedResponse:
        with self._lock:
            self._record(request, headers)
            if self._queue:
                return self._queue.popleft()
        return _as_response(self.responder(request))

    def _record(self, request: dict[str, Any], headers: dict[str, str]) -> None:
        self._requests.append(request)
        self._headers.append(headers)

    def _wait(self, seconds: float) -> bool:
        """Sleeps up to `seconds`; False when the server is closing meanwhile."""
        return not self._closing.wait(seconds)

    def _completion_id(self) -> str:
        return f"chatcmpl-scripted-{next(self._ids)}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = True  # server_close() joins the connection threads
    upstream: ScriptedUpstream

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        # Named after the port, so a leak is told apart from another server's connections.
        threading.current_thread().name = f"ScriptedUpstream:{self.server_address[1]} connection"
        super().process_request_thread(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers after close

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            data = [
                {"id": model, "object": "model", "created": 0, "owned_by": "scripted"}
                for model in self.server.upstream.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(StatusError(404, f"no route GET {self.path}"))

    def do_POST(self) -> None:
        upstream = self.server.upstream
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in (
            "/v1/chat/completions",
            "/v1/responses",
            _MESSAGES,
            _COUNT,
        ):
            self._send_error(StatusError(404, f"no route POST {self.path}"))
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self._send_error(StatusError(400, "the request body is not JSON"))
            return
        if not isinstance(request, dict):
            self._send_error(StatusError(400, "the request body is not a JSON object"))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        if self.path.rstrip("/") == _COUNT:  # counted, not answered: the script is not used
            with upstream._lock:
                upstream._record(request, headers)
            self._send_json(200, {"input_tokens": anthropic_wire.count_of(request)})
            return
        try:
            response = upstream._take(request, headers)
        except Exception as exc:  # a responder's bug: tell the client, keep serving
            self._send_error(StatusError(500, f"the responder failed: {exc!r}"))
            return
        # A client that gave up (a timeout) has closed its end: nothing left to tell it.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer(response, request)

    def _answer(self, response: ScriptedResponse, request: dict[str, Any]) -> None:
        upstream = self.server.upstream
        while isinstance(response, Delay):
            if not upstream._wait(response.seconds):
                return  # closing
            response = response.then
        if isinstance(response, Drop):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif isinstance(response, RawBody):
            body = response.body.encode() if isinstance(response.body, str) else response.body
            self._send(response.status, body, response.content_type, response.headers)
        elif isinstance(response, StatusError):
            self._send_error(response)
        elif self.path.rstrip("/") == _MESSAGES:
            message = anthropic_wire.message_body(response, request, next(upstream._ids))
            if request.get("stream"):
                self._send_events(response, anthropic_wire.message_events(response, message))
            else:
                self._send_json(200, message)
        elif self.path.rstrip("/") == "/v1/responses":
            answer = response_body(response, request, next(upstream._ids))
            if request.get("stream"):
                self._send_events(response, response_events(response, answer))
            else:
                self._send_json(200, answer)
        elif request.get("stream"):
            self._stream(response, request)
        else:
            self._send_json(200, completion_body(response, request, upstream._completion_id()))

    def _stream(self, reply: Reply, request: dict[str, Any]) -> None:
        upstream = self.server.upstream
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        chunks = completion_chunks(reply, request, upstream._completion_id(), include_usage)
        events = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks]
        events.append(b"data: [DONE]\n\n")
        self._write_events(reply, events)

    def _send_events(self, reply: Reply, payloads: Sequence[dict[str, Any]]) -> None:
        """Named server-sent events (the Responses API's), one per payload."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        events = [
            f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()
            for payload in payloads
        ]
        self._write_events(reply, events)

    def _write_events(self, reply: Reply, events: Sequence[bytes]) -> None:
        if reply.drop_after_chunks is not None:
            self.send_header("Content-Length", str(sum(map(len, events))))
        self.end_headers()
        for number, event in enumerate(events):
            if number == reply.drop_after_chunks:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(event)
            self.wfile.flush()

    def _send_error(self, error: StatusError) -> None:
        headers = dict(error.headers)
        if error.retry_after is not None:
            headers.setdefault("retry-after-ms", str(max(0, round(error.retry_after * 1000))))
            headers.setdefault("Retry-After", str(max(0, math.ceil(error.retry_after))))
        message = error.message or f"scripted status {error.status}"
        body: dict[str, Any] = {
            "error": {
                "message": message,
                "type": error.type or _ERROR_TYPES.get(error.status, "invalid_request_error"),
                "param": None,
                "code": error.code,
            }
        }
        if self.path.rstrip("/") == _MESSAGES:
            body = anthropic_wire.error_body(error.status, message, error.type)
        self._send(error.status, json.dumps(body).encode(), "application/json", headers)

    def _send_json(self, status: int, body: object) -> None:
        self._send(status, json.dumps(body).encode(), "application/json", {})

    def _send(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str]
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


_MESSAGES = "/v1/messages"
_COUNT = "/v1/messages/count_tokens"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


def _as_response(response: ScriptedResponse | str) -> ScriptedResponse:
    return Reply(response) if isinstance(response, str) else response
