"""The service's routes, one module per concern: chat, threads, working memory, ops, the page."""

from __future__ import annotations

from typing import Any

from ..schemas import ErrorResponse

__all__ = ["BUSY", "ERRORS", "UPSTREAM", "errors"]


def errors(*rows: tuple[int | str, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses in OpenAI's error shape, by status."""
    return {status: {"model": ErrorResponse, "description": text} for status, text in rows}


ERRORS = errors(
    (400, "Bad request: the reason is in the message"),
    (401, "Missing, unknown or revoked API key"),
    (403, "A keyless server's tenant asked for from a non-loopback host"),
    (404, "No such thread (or resource) for this tenant"),
    (413, "The request body is over the server's limit"),
    (422, "The body or a parameter has the wrong shape"),
    (503, "The database is unavailable"),
)
"""The error answers every API route may give."""

BUSY = errors((409, "A conflict: the thread is busy longer than the wait, or a version moved"))
"""A route that writes under a lock or a version."""

UPSTREAM = errors(
    (429, "Rate limited, or the usage guard refused the call"),
    (502, "The upstream model failed"),
    ("5XX", "The upstream model's own server error, passed through"),
)
"""A route that calls the upstream model."""
