"""Every error the service returns, in one table, in OpenAI's error shape.

    {"error": {"message": "thread 'th1' not found", "type": "not_found_error",
               "param": null, "code": "thread_not_found"}}

`ERROR_TABLE` maps the library's errors to an HTTP status; `ApiError` is the service's own
(a missing header, a missing key). An upstream failure keeps the upstream's status when it is
the client's to see (429, 5xx, a rejected request), else becomes 502. Nothing else reaches the
client: an unexpected exception is logged and answered with a bare 500, never a stack trace.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import Message, Send

from ..errors import (
    ConflictError,
    ContextOverflowError,
    NotFoundError,
    StoreError,
    ValidationError,
    WorkingMemoryError,
)
from ..formats.anthropic import error_type
from ..llm import LLMError, UsageRefusedError
from ..redaction import redact
from ..summarizer import InvalidOutputError

__all__ = [
    "ANTHROPIC_PATHS",
    "ERROR_TABLE",
    "ApiError",
    "ErrorRow",
    "anthropic_error_body",
    "error_body",
    "error_response",
    "install_error_handlers",
    "invalid_request",
    "map_error",
    "send_error",
]

logger = logging.getLogger("workingmem.service")


@dataclass(frozen=True, slots=True)
class ErrorRow:
    """How one kind of library error is answered."""

    status: int
    type: str
    """The OpenAI error type (``invalid_request_error``, ``rate_limit_exceeded``, ...)."""
    code: str


ERROR_TABLE: tuple[tuple[type[Exception], ErrorRow], ...] = (
    (ValidationError, ErrorRow(400, "invalid_request_error", "invalid_value")),
    (ContextOverflowError, ErrorRow(400, "invalid_request_error", "context_length_exceeded")),
    (NotFoundError, ErrorRow(404, "not_found_error", "not_found")),
    (ConflictError, ErrorRow(409, "conflict_error", "version_conflict")),
    (UsageRefusedError, ErrorRow(429, "insufficient_quota", "usage_refused")),
    (LLMError, ErrorRow(502, "upstream_error", "upstream_error")),
    (InvalidOutputError, ErrorRow(502, "upstream_error", "invalid_model_output")),
    (StoreError, ErrorRow(503, "server_error", "database_unavailable")),
    (WorkingMemoryError, ErrorRow(500, "server_error", "internal_error")),
)
"""Library error → status, OpenAI error type, code. The first matching row wins."""

_INTERNAL = ERROR_TABLE[-1][1]

_UPSTREAM_STATUS_KEPT = frozenset({400, 404, 413, 422, 429})
"""Upstream statuses passed through as they are (with every 5xx); an upstream 401/403 is the
gateway's own credentials failing, so the client sees 502."""

_HTTP_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}


class ApiError(Exception):
    """An error of the service itself, answered as `status` with the OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.type = type
        self.param = param
        self.headers = dict(headers or {})


def error_body(message: str, type: str, code: str, param: str | None = None) -> dict[str, Any]:
    """The OpenAI error shape."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


async def send_error(send: Send, error: ApiError) -> None:
    """Answers `error` from a plain ASGI app (one that is not a FastAPI route)."""
    response = JSONResponse(
        error_body(error.message, error.type, error.code, error.param),
        status_code=error.status,
        headers=error.headers,
    )
    await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:  # pragma: no cover - a response never reads the request
    return {"type": "http.disconnect"}


def map_error(exc: Exception) -> ApiError:
    """The HTTP answer for a library error (see `ERROR_TABLE`)."""
    mapping = next((row for kind, row in ERROR_TABLE if isinstance(exc, kind)), _INTERNAL)
    status, message, param = mapping.status, str(exc), None
    if isinstance(exc, ValidationError):
        param = exc.field
    elif isinstance(exc, NotFoundError):
        code = f"{exc.kind.replace(' ', '_')}_not_found"
        return ApiError(404, message, code=code, type=mapping.type)
    elif isinstance(exc, LLMError):
        upstream = exc.status_code
        if upstream is not None and (upstream in _UPSTREAM_STATUS_KEPT or upstream >= 500):
            status = upstream
        headers: dict[str, str] = {}
        if exc.upstream:  # the operator's upstream: its text is for the operator's log
            request_id = f"req_{uuid.uuid4().hex[:20]}"
            logger.warning("upstream error, request %s: %s", request_id, redact(str(exc)))
            message = (
                f"the upstream model failed ({_status_class(upstream)}); request id "
                f"{request_id}: the operator's log has the details"
            )
            headers["X-Request-Id"] = request_id
        if exc.retry_after is not None and status in (429, 503):
            headers["Retry-After"] = exc.retry_after  # when the client may try again
        if status == 429:
            return ApiError(
                429, message, code="rate_limit_exceeded", type=mapping.type, headers=headers
            )
        return ApiError(status, message, code=mapping.code, type=mapping.type, headers=headers)
    elif isinstance(exc, StoreError):
        logger.error("database failure: %s", exc)
        message = "the database is unavailable; try again later"
    elif mapping.status == 500:
        logger.error("unexpected library error: %r", exc)
        message = "internal error"
    return ApiError(status, message, code=mapping.code, type=mapping.type, param=param)


def _status_class(status: int | None) -> str:
    """What a tenant may know of an upstream failure: its kind, not its text."""
    if status is None:
        return "unreachable, or no answer in time"
    if status in (401, 403):
        return f"status {status}: the gateway's own credentials were refused"
    if status == 429:
        return "status 429: rate limited, retry later"
    if status < 500:
        return f"status {status}: it refused the request"
    return f"status {status}: a server error"


ANTHROPIC_PATHS = "/v1/messages"
"""Anthropic's API: its errors have Anthropic's shape."""


def anthropic_error_body(error: ApiError) -> dict[str, Any]:
    """Anthropic's error shape, the type by the status as Anthropic gives it."""
    return {"type": "error", "error": {"type": error_type(error.status), "message": error.message}}


def error_response(error: ApiError, request: Request | None = None) -> JSONResponse:
    """The error in the shape of the API the request was made to (OpenAI's, or Anthropic's
    under `ANTHROPIC_PATHS`)."""
    anthropic = request is not None and request.url.path.startswith(ANTHROPIC_PATHS)
    return JSONResponse(
        anthropic_error_body(error)
        if anthropic
        else error_body(error.message, error.type, error.code, error.param),
        status_code=error.status,
        headers=error.headers,
    )


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc, request)


async def _on_library_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(map_error(exc), request)


async def _on_request_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(invalid_request(exc.errors()), request)


def invalid_request(errors: Sequence[Any]) -> ApiError:
    """The 422 of a body of the wrong shape (pydantic's `errors()`), naming where."""
    # the deepest error: of a union's branches, the one that got furthest into the value
    first: dict[str, Any] = dict(max(errors, key=lambda e: len(e.get("loc", ())), default={}))
    where = ".".join(  # without the names pydantic gives a union's branches ("list[...]")
        str(part) for part in first.get("loc", ()) if not (isinstance(part, str) and "[" in part)
    )
    reason = str(first.get("msg", "invalid request"))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return ApiError(422, f"{where}: {reason}{more}", code="invalid_request", param=where or None)


async def _on_http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    type_ = _HTTP_TYPES.get(exc.status_code, "invalid_request_error")
    code = "not_found" if exc.status_code == 404 else f"http_{exc.status_code}"
    return error_response(
        ApiError(exc.status_code, str(exc.detail), code=code, type=type_, headers=exc.headers),
        request,
    )


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unexpected error on %s %s", request.method, request.url.path)
    return error_response(
        ApiError(500, "internal error", code="internal_error", type="server_error"), request
    )


def install_error_handlers(app: FastAPI) -> None:
    """Routes every error through the table, so every answer has the OpenAI shape."""
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(WorkingMemoryError, _on_library_error)
    app.add_exception_handler(RequestValidationError, _on_request_validation)
    app.add_exception_handler(HTTPException, _on_http_exception)
    app.add_exception_handler(Exception, _on_unexpected)
