"""A streamed answer is written in as few pieces as its moments: the events ready together (the
opening with the first piece of text, the close) leave the server as one piece of the body, and
the close ends the body, for each of the three streaming APIs. A piece is a trip through the
ASGI stack and a write; a client parses events, not pieces, so this is the server's cost
alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer


class _Recorded:
    """An ASGI middleware that keeps the body pieces of every response, as the server got them."""

    def __init__(self, app: ASGIApp, pieces: list[bytes], ends: list[bool]) -> None:
        self.app = app
        self.pieces = pieces
        self.ends = ends
        """Of every body message, empty ones too: whether it ends the body."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def kept(message: Message) -> None:
            if message["type"] == "http.response.body":
                self.ends.append(not message.get("more_body", False))
                if message.get("body"):
                    self.pieces.append(bytes(message["body"]))
            await send(message)

        await self.app(scope, receive, kept)


ANSWER = "One two three four five."
"""Streamed by the upstream in 3 pieces of text."""


@pytest.fixture
def pieces() -> list[bytes]:
    return []


@pytest.fixture
def ends() -> list[bool]:
    return []


@pytest.fixture
def api(
    tmp_path: Path, upstream: ScriptedUpstream, pieces: list[bytes], ends: list[bool]
) -> Iterator[httpx.Client]:
    """A keyless client of the service on a SQLite file, loopback (the local tenant)."""
    upstream.responder = lambda request: Reply(ANSWER, chunk_chars=8)
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'memory.db'}", upstream))
    app.add_middleware(_Recorded, pieces=pieces, ends=ends)
    with LiveServer(app) as live, httpx.Client(base_url=live.url, timeout=10) as client:
        yield client


def _events(piece: bytes) -> list[str]:
    """A piece's events, each as its data line (its `event:` name, if any, before it)."""
    return [event for event in piece.decode().split("\n\n") if event]


def _kinds(piece: bytes) -> list[str]:
    """The names of a piece's events (the Responses and Messages APIs name theirs)."""
    return [event.split("\n", 1)[0].removeprefix("event: ") for event in _events(piece)]


def _streamed(
    api: httpx.Client, pieces: list[bytes], ends: list[bool], path: str, body: dict[str, Any]
) -> None:
    with api.stream("POST", path, json=body, headers={"X-Thread-Id": path.strip("/")}) as answer:
        assert answer.status_code == 200, answer.read()
        answer.read()
    # the opening with the first piece of text, then each other piece alone, then the close
    assert len(pieces) == 1 + 2 + 1, [p.decode() for p in pieces]
    assert ends == [False] * 3 + [True], "the close ends the body: no empty message after it"


def test_chat_completions_opens_with_the_role_and_first_piece_and_closes_in_one_piece(
    api: httpx.Client, pieces: list[bytes], ends: list[bool]
) -> None:
    request = {"model": "answer-model", "messages": [{"role": "user", "content": "hi"}]}
    _streamed(
        api,
        pieces,
        ends,
        "/v1/chat/completions",
        {**request, "stream": True, "stream_options": {"include_usage": True}},
    )
    opening = [json.loads(e.removeprefix("data: ")) for e in _events(pieces[0])]
    assert [c["choices"][0]["delta"] for c in opening] == [
        {"role": "assistant", "content": ""},
        {"content": "One two "},
    ]
    *closing, done = _events(pieces[-1])
    assert done == "data: [DONE]"
    finish, usage = (json.loads(e.removeprefix("data: ")) for e in closing)
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] > 0


def test_responses_opens_with_its_items_and_first_delta_and_closes_in_one_piece(
    api: httpx.Client, pieces: list[bytes], ends: list[bool]
) -> None:
    _streamed(
        api, pieces, ends, "/v1/responses", {"model": "answer-model", "input": "hi", "stream": True}
    )

    assert _kinds(pieces[0]) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert _kinds(pieces[-1]) == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]


def test_messages_opens_with_its_block_and_first_delta_and_closes_in_one_piece(
    api: httpx.Client, pieces: list[bytes], ends: list[bool]
) -> None:
    body = {
        "model": "answer-model",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }
    _streamed(api, pieces, ends, "/v1/messages", body)

    assert _kinds(pieces[0]) == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
    ]
    assert _kinds(pieces[-1]) == ["content_block_stop", "message_delta", "message_stop"]
