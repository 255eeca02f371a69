"""A cap on request bodies: a client cannot make the service read gigabytes.

    app.add_middleware(BodyLimitMiddleware, max_bytes=32 * 1024 * 1024)

A declared ``Content-Length`` over the cap is refused at once (413); a chunked body is counted
as it is read, and refused when it passes the cap.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError, error_response

__all__ = ["BodyLimitMiddleware"]


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                too_big = False  # the server rejects a malformed length itself
            if too_big:  # in the shape of the API asked (Request only reads the path here)
                await self._refuse(Request(scope))(scope, receive, send)
                return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, self._message())
            return message

        await self.app(scope, counted, send)

    def _message(self) -> str:
        return f"the request body is over the limit of {self.max_bytes} bytes"

    def _refuse(self, request: Request) -> ASGIApp:
        return error_response(ApiError(413, self._message(), code="request_too_large"), request)
