"""The service's routes, one module per concern: chat, threads, working memory, ops, the page."""

from __future__ import annotations

from typing import Any

from ..schemas import ErrorResponse

__all__ = ["ERRORS"]

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (400, "Bad request: the reason is in the message"),
        (401, "Missing, unknown or revoked API key"),
        (404, "No such thread for this tenant"),
        (422, "The body or a parameter has the wrong shape"),
    )
}
"""The error answers every API route may give, in OpenAI's error shape."""
