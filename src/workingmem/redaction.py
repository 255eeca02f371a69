"""Secrets out of text that others read: upstream error messages, log lines.

    redact("Incorrect API key provided: sk-upstr***...cdef")  # "... provided: [redacted]"

An upstream's error can quote the operator's credentials (OpenAI's 401 quotes the key it was
given, masked or not), and that text would reach a tenant's response and the log. Everything
that looks like a secret is replaced: API keys (``sk-...``, the service's own ``wm_...``),
bearer tokens, ``key=value`` pairs named like secrets, credentials in a URL, and long opaque
tokens. Pure and cheap; over-redacting a harmless id is the accepted cost.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "redact"]

REDACTED = "[redacted]"

_PATTERNS = (
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*.]{4,}"),  # OpenAI-style keys, masked ones too
    re.compile(r"\bwm_[A-Za-z0-9_\-]{8,}"),  # this service's API keys
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9_\-.~+/=*]+"),
    re.compile(
        r"(?i)\b(api[_-]?key|access[_-]?token|token|secret|password|passwd|authorization)"
        r"(\s*[=:]\s*|\s+is\s+)[\"']?[^\s\"',;]+"
    ),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in a URL
    re.compile(r"\b[A-Za-z0-9_\-]{32,}\b"),  # long opaque tokens
)


def redact(text: str) -> str:
    """`text` with every secret-looking token replaced by ``[redacted]``."""
    for pattern in _PATTERNS:
        if pattern.groups == 2:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text
