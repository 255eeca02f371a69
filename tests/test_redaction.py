"""What looks like a secret never reaches a tenant or the log as it was."""

from __future__ import annotations

import pytest

from workingmem.redaction import REDACTED, redact


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Incorrect API key provided: sk-upstr***...cdef.", "sk-upstr"),
        ("key sk-proj-AbCdEf0123456789 was refused", "sk-proj-AbCdEf0123456789"),
        ("Authorization: Bearer eyJhbGciOi.payload.sig", "eyJhbGciOi"),
        ("bad api_key=abc123def; retry", "abc123def"),
        ("could not reach https://svc:hunter2@llm.internal/v1", "hunter2"),
        ("the service key wm_0123456789abcdefXYZ is unknown", "wm_0123456789abcdefXYZ"),
        ("opaque 3f9a0c1e5b7d42a8b6c0d1e2f3a4b5c6d7e8f9a0 token", "3f9a0c1e5b7d42a8b6c0d1e2f3a4"),
    ],
)
def test_secrets_are_replaced(text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned
    assert REDACTED in cleaned


@pytest.mark.parametrize(
    "text",
    [
        "This model's maximum context length is 8192 tokens.",
        "model 'gpt-4o-mini' does not exist",
        "Rate limit reached for requests per min. Please try again in 20s.",
    ],
)
def test_plain_error_text_is_kept(text: str) -> None:
    assert redact(text) == text
