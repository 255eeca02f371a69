"""Text an error message quotes, cut short."""

from __future__ import annotations

__all__ = ["shortened"]

MESSAGE_CHARS = 300
"""The most of a quoted text an error message shows."""


def shortened(text: str, limit: int = MESSAGE_CHARS) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
