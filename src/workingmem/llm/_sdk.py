"""What the clients over vendors' SDKs share (`OpenAIClient`, `OpenAIResponsesClient`,
`AnthropicClient`): their life cycle, and their failures as `LLMError`s.

    try:
        answer = await sdk_client.post(...)
    except (openai.APIError, httpx.HTTPError) as exc:
        raise llm_error(exc) from exc

The `anthropic` SDK's error classes have the shape of the `openai` SDK's: one function reads
both (``sdk=`` names the module).
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import msgspec

from ..redaction import redact
from ._text import shortened
from .base import LLMError

if TYPE_CHECKING:
    import openai

__all__ = [
    "SHAPE_ERRORS",
    "SdkClient",
    "json_decode",
    "llm_error",
    "root_cause",
    "upstream_message",
]

_RETRYABLE_STATUS = frozenset({408, 409, 429})


def retryable_status(status: int) -> bool:
    """Whether another attempt may pass where an upstream answered `status` (the SDKs'
    policy: a timeout, a conflict, a rate limit, a server error)."""
    return status in _RETRYABLE_STATUS or status >= 500


SHAPE_ERRORS = (AttributeError, TypeError, IndexError, KeyError, ValueError)
"""What reading a well-parsed answer of the wrong shape raises: the SDK does not validate."""
json_decode = msgspec.json.Decoder().decode
"""JSON bytes or text to Python values (msgspec's decoder: the answers' hot path)."""


class SdkClient:
    """The life cycle of a client over a vendor's SDK client (``_client``): closed with it
    unless the host passed its own (``_owns_client`` False)."""

    _client: Any
    _owns_client: bool

    async def aclose(self) -> None:
        """Closes the SDK client's connections, unless the host passed its own client."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def llm_error(exc: Exception, *, midstream: bool = False, sdk: Any = None) -> LLMError:
    """The SDK's failure as an `LLMError`: status, retryability and a short message, with
    every secret the upstream quoted redacted, marked as the upstream's. `sdk`: the SDK module
    whose errors these are (``openai`` by default; ``anthropic``'s tree has the same shape)."""
    import openai

    if sdk is not None:
        openai = sdk

    status: int | None = None
    retryable = True
    retry_after = None
    if isinstance(exc, openai.APITimeoutError):
        message = "the upstream timed out"
    elif isinstance(exc, openai.APIConnectionError):
        where = "the upstream's stream broke off" if midstream else "could not reach the upstream"
        message = f"{where}: {root_cause(exc, sdk=openai)}"
    elif isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = _error_message(exc)
        retryable = retryable_status(status)
        retry_after = exc.response.headers.get("retry-after")
    elif isinstance(exc, openai.APIError):
        retryable = False
        if midstream:  # an error event the server sent in place of the next chunk
            message = f"the upstream failed mid-stream: {shortened(exc.message)}"
        else:
            message = f"the upstream's answer is unreadable: {shortened(exc.message)}"
    else:
        retryable = False
        message = f"the upstream's answer is unreadable: {root_cause(exc, sdk=openai)}"
    return LLMError(
        redact(message),
        status_code=status,
        retryable=retryable,
        upstream=True,
        retry_after=retry_after,
    )


def _error_message(exc: openai.APIStatusError) -> str:
    """The upstream's own error message when it sent one, else the SDK's; short either way."""
    return upstream_message(exc.body, exc.message)


def upstream_message(body: object, otherwise: str) -> str:
    """What an error body says: its (``error``'s) ``message``, or the body itself when it is
    text, else `otherwise`; short either way."""
    if isinstance(body, dict):
        nested = body.get("error")
        if isinstance(nested, dict):
            body = nested
        message = body.get("message")
        if isinstance(message, str) and message:
            return shortened(message)
    elif isinstance(body, str) and body.strip():
        return shortened(body)
    return shortened(otherwise)


def root_cause(exc: BaseException, *, sdk: Any = None) -> str:
    """The root of a failure in a few words: ``RemoteProtocolError: Server disconnected``."""
    import openai

    cause = exc.__cause__ if isinstance(exc, (sdk or openai).APIError) else exc
    if cause is None:
        return shortened(str(exc))
    return shortened(f"{type(cause).__name__}: {cause}")
