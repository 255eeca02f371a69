"""``/v1/responses`` over a WebSocket: the Responses API's WebSocket mode, with the thread's memory.

    async with client.responses.connect(extra_headers={"X-Thread-Id": "trip"}) as connection:
        await connection.response.create(model="gpt-4o-mini", input="My budget is 4,000 euros.")
        async for event in connection:  # response.created ... response.completed
            ...

A connection is opened with what a ``POST /v1/responses`` sends in its headers (the API key,
hence the tenant; ``X-Thread-Id``, ``X-User-Id``, ``X-Profile``, ``X-Workingmem-History``), and
keeps them. Each ``response.create`` event is answered as that POST answers a streamed request
(``stream`` is implied), its events sent as JSON text frames, one response after the other in
the order the events came. A ``stream_id`` is echoed on every event of its response. A request
may continue the connection's newest response of each lane by ``previous_response_id`` even
when it was not stored (``store: false``), as OpenAI's connection cache allows; a stored one,
from any connection. ``generate: false`` prepares a request without an answer: its response is
empty, and a request that continues it is sent with its fields and its input first. A request
that fails is an ``error`` event with the status a POST would have had; the connection stays
open. A client that goes away stops the answer: no answer of it is stored.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse
from pydantic import ValidationError as ShapeError
from starlette.websockets import WebSocketDisconnect

from ...formats.responses_chat import new_id
from ...llm import Usage
from ...stores.responses import StoredResponse
from ..auth import connection_tenant
from ..errors import ApiError, error_body, invalid_request
from ..params import AskedHeaders, ask_headers
from ..response_body import ResponseInfo, response_object
from ..responses_schemas import ResponseCreateRequest
from ..sse import stream_failure
from ..state import Services, get_services
from .responses import create_events, prepare_create

__all__ = ["router"]

router = APIRouter()

PATH = "/v1/responses"
"""Where the socket is: the path a POST creates a response at."""
_QUEUED = 16
"""The events a connection may have waiting behind the one being answered."""
_PREPARED_KEPT = 16
"""The requests prepared without an answer a connection keeps, the newest."""
_ENVELOPE = ("type", "stream_id", "generate")
"""The fields of a ``response.create`` event that are not the request's."""


@router.websocket(PATH)
async def responses_socket(websocket: WebSocket) -> None:
    """OpenAI's Responses WebSocket mode: `response.create` events in, their events out."""
    try:
        tenant = await connection_tenant(websocket, writes=True)
        asked = await ask_headers(websocket)
    except ApiError as error:
        await _refuse(websocket, error)
        return
    await websocket.accept()
    connection = _Connection(websocket, get_services(websocket), tenant, asked)
    await connection.serve()


async def _refuse(websocket: WebSocket, error: ApiError) -> None:
    """Refuses the handshake with the error a POST would get, where the server can say it
    (the ASGI denial response); else closes it as a policy violation."""
    body = error_body(error.message, error.type, error.code, error.param)
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        response = JSONResponse(body, status_code=error.status, headers=error.headers)
        await websocket.send_denial_response(response)
        return
    await websocket.close(code=1008, reason=error.message[:120])  # pragma: no cover


@dataclass(slots=True)
class _Lanes:
    """The responses a connection keeps (its `Recent`): the newest of each lane, stored or
    not, and the requests prepared without an answer (``generate: false``)."""

    newest: dict[str | None, StoredResponse] = field(default_factory=dict)
    prepared: dict[str, dict[str, Any]] = field(default_factory=dict)

    def lane(self, stream_id: str | None) -> _Lane:
        return _Lane(self, stream_id)


@dataclass(frozen=True, slots=True)
class _Lane:
    """One lane's view of what its connection keeps: what it finds is any lane's, what it
    keeps is its own newest."""

    lanes: _Lanes
    stream_id: str | None

    def find(self, response_id: str) -> StoredResponse | None:
        return next((r for r in self.lanes.newest.values() if r.response_id == response_id), None)

    def keep(self, response: StoredResponse) -> None:
        self.lanes.newest[self.stream_id] = response


class _Connection:
    """One accepted connection: its events read as they come, answered one at a time."""

    def __init__(
        self, websocket: WebSocket, services: Services, tenant: str, asked: AskedHeaders
    ) -> None:
        self._socket = websocket
        self._services = services
        self._tenant = tenant
        self._asked = asked
        self._lanes = _Lanes()
        self._events: asyncio.Queue[str] = asyncio.Queue(maxsize=_QUEUED)

    async def serve(self) -> None:
        """Answers the events until the client goes; its going cancels the answer under way
        (`response_events` then closes the answer: nothing of it is stored)."""
        answering = asyncio.current_task()
        assert answering is not None, "served from a task"
        reader = asyncio.ensure_future(self._read())
        gone = False

        def on_gone(done: asyncio.Future[None]) -> None:
            nonlocal gone
            if not done.cancelled():
                gone = True
                answering.cancel()

        reader.add_done_callback(on_gone)
        try:
            while True:
                await self._answer(await self._events.get())
        except WebSocketDisconnect:
            return  # gone while its answer was being sent
        except asyncio.CancelledError:
            if not gone:
                raise
            answering.uncancel()  # ours: the client went
        finally:
            reader.remove_done_callback(on_gone)
            reader.cancel()

    async def _read(self) -> None:
        """Queues each frame's text until the client disconnects; with `_QUEUED` waiting, the
        next is read once one is answered (a client that sends faster is held back by its
        socket, not by the server's memory)."""
        while True:
            message = await self._socket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                text = (message.get("bytes") or b"").decode("utf-8", errors="replace")
            await self._events.put(text)

    async def _answer(self, text: str) -> None:
        """One client event: its response's events, or an ``error`` event; counted in the
        service's metrics as a request (method ``WEBSOCKET``) with the status a POST would
        have had."""
        started = time.perf_counter()
        stream_id: str | None = None
        status = 200
        try:
            event = self._event(text)
            stream_id = event.get("stream_id") if isinstance(event.get("stream_id"), str) else None
            kind = event.get("type")
            if kind == "response.steer":
                await self._steer_refused(event)
            elif kind == "response.create":
                await self._create(event, stream_id)
            else:
                raise ApiError(
                    400,
                    f"type: {kind!r} is no client event of this API; send 'response.create'",
                    code="invalid_request_error",
                    param="type",
                )
        except (WebSocketDisconnect, asyncio.CancelledError):
            status = 499  # the client went: as a POST's (nginx's "client closed request")
            raise
        except Exception as exc:  # a failure before the answer began: this request's alone
            refused = _error_event(exc)
            status = refused["status"]
            await self._send({"type": "error", **refused}, stream_id)
        finally:
            elapsed = time.perf_counter() - started
            self._services.metrics.observe_request("WEBSOCKET", PATH, status, elapsed)

    def _event(self, text: str) -> dict[str, Any]:
        limit = self._services.settings.max_body_bytes
        if len(text) > limit:  # counted in characters: a cheap bound, never under the bytes'
            raise ApiError(
                413,
                f"the event is over the limit of {limit} bytes",
                code="request_too_large",
            )
        try:
            event = json.loads(text)
        except ValueError as exc:
            raise ApiError(
                400, f"the event is not JSON: {exc}", code="invalid_request_error"
            ) from None
        if not isinstance(event, dict):
            raise ApiError(400, "an event is a JSON object", code="invalid_request_error")
        return event

    async def _create(self, event: dict[str, Any], stream_id: str | None) -> None:
        for name, kind, shape in (("stream_id", str, "string"), ("generate", bool, "boolean")):
            if name in event and not isinstance(event[name], kind):
                raise ApiError(
                    422,
                    f"{name}: Input should be a valid {shape}",
                    code="invalid_request",
                    param=name,
                )
        fields = {k: v for k, v in event.items() if k not in _ENVELOPE}
        fields = self._after_prepared(fields)
        try:
            body = ResponseCreateRequest.model_validate({**fields, "stream": True})
        except ShapeError as exc:
            raise invalid_request(exc.errors()) from None
        if event.get("generate") is False:
            await self._prepare_only(body, fields, stream_id)
            return
        lane = self._lanes.lane(stream_id)
        create = await prepare_create(self._services, self._tenant, body, self._asked, lane)
        _, events = await create_events(
            self._services, self._tenant, create, encode=_framed(stream_id)
        )
        async with aclosing(events):  # closed early (the client went): nothing stored
            async for piece in events:  # a piece may hold several events: a line each
                for frame in piece.split(b"\n"):
                    if frame:
                        await self._socket.send_text(frame.decode())

    def _after_prepared(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A request that continues one prepared without an answer: that request's fields
        where this one sends none, and its input before this one's."""
        prepared = self._lanes.prepared.get(str(fields.get("previous_response_id")))
        if prepared is None:
            return fields
        merged = {**prepared, **{k: v for k, v in fields.items() if k != "input"}}
        merged["input"] = [*_items(prepared.get("input")), *_items(fields.get("input"))]
        if "previous_response_id" in prepared:
            merged["previous_response_id"] = prepared["previous_response_id"]
        else:
            merged.pop("previous_response_id", None)
        return merged

    async def _prepare_only(
        self, body: ResponseCreateRequest, fields: dict[str, Any], stream_id: str | None
    ) -> None:
        """``generate: false``: an empty response, whose request a later one continues."""
        info = ResponseInfo(
            response_id=new_id("resp"),
            created_at=int(time.time()),
            model=body.model or "",
            request=body,
        )
        prepared = self._lanes.prepared
        prepared[info.response_id] = fields
        while len(prepared) > _PREPARED_KEPT:
            del prepared[next(iter(prepared))]
        created = response_object(info, status="in_progress", output=[])
        done = response_object(info, status="completed", output=[], usage=Usage())
        await self._send(
            {"type": "response.created", "sequence_number": 0, "response": created}, stream_id
        )
        await self._send(
            {"type": "response.completed", "sequence_number": 1, "response": done}, stream_id
        )

    async def _steer_refused(self, event: dict[str, Any]) -> None:
        """``response.steer``: refused, its input handed back to be sent with the next
        ``response.create`` (this gateway answers one request at a time, to its end)."""
        steer = {
            "input": event.get("input"),
            "previous_response_id": event.get("previous_response_id"),
        }
        await self._send(
            {
                "type": "response.steer.failed",
                "sequence_number": 0,
                "error": {
                    "type": "invalid_request_error",
                    "code": "steering_not_supported",
                    "message": "this gateway does not steer a response under way; send the "
                    "input with the next response.create",
                },
                "steer": steer,
            }
        )

    async def _send(self, payload: dict[str, Any], stream_id: str | None = None) -> None:
        await self._socket.send_text(_frame(payload, stream_id))


def _frame(payload: dict[str, Any], stream_id: str | None) -> str:
    """An event's frame: its JSON, with the request's lane when it named one."""
    lane = {"stream_id": stream_id} if stream_id is not None else {}
    return json.dumps({**payload, **lane}, ensure_ascii=False, separators=(",", ":"))


def _framed(stream_id: str | None) -> Callable[[dict[str, Any]], bytes]:
    """`response_events`' encoder: each event's frame on a line of its own (a piece of the
    stream may hold several events, sent a frame each)."""
    return lambda payload: _frame(payload, stream_id).encode() + b"\n"


def _items(given: object) -> list[Any]:
    """A request's input as a list of items (text: one user message)."""
    if given is None:
        return []
    if isinstance(given, str):
        return [{"type": "message", "role": "user", "content": given}]
    return list(given) if isinstance(given, list) else [given]


def _error_event(exc: Exception) -> dict[str, Any]:
    """An ``error`` event's fields: the error a POST would have answered (the service's own,
    the library's as the service maps it, anything else a logged 500), and its status."""
    error = exc if isinstance(exc, ApiError) else stream_failure(exc)
    return {
        "status": error.status,
        **error_body(error.message, error.type, error.code, error.param),
    }
