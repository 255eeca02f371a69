"""`OpenAIClient`: the LLM client on the official `openai` SDK, for any OpenAI-compatible server.

    async with OpenAIClient(base_url="http://127.0.0.1:8000/v1") as client:  # vLLM, Ollama, ...
        completion = await client.complete(model="qwen2.5-7b", messages=messages, meta=meta)

Without arguments it reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the SDK does. A local
server that needs no key works without one: the client sends a placeholder.

Timeouts and retries are the SDK's own: `max_retries` bounded retries on 408/409/429/5xx,
timeouts and dropped connections, with exponential backoff that honours ``Retry-After``. What
still fails after them is an `LLMError` with the status and a short message.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal, cast

import openai
from openai.types.chat import ChatCompletion

from ..errors import ValidationError
from ..types import Message
from .base import CallMeta, Completion, LLMError, Usage

__all__ = ["NO_API_KEY", "OpenAIClient"]

NO_API_KEY = "no-key"
"""The key sent to an upstream when none was configured (local servers ignore it)."""

_MESSAGE_CHARS = 300
_RETRYABLE_STATUS = frozenset({408, 409, 429})


class OpenAIClient:
    """An `LLMClient` over ``openai.AsyncOpenAI`` (chat completions).

    Args:
        base_url: The upstream's base URL, ``.../v1``; None reads ``OPENAI_BASE_URL``, then
            takes OpenAI's.
        api_key: None reads ``OPENAI_API_KEY``; with neither, a placeholder is sent.
        timeout: Seconds one attempt may take.
        max_retries: Retries after the first attempt (0 for none).
        client: An ``AsyncOpenAI`` of the host's; then the four arguments above are not used,
            and the host closes it (`aclose` leaves it open).
        max_tokens_param: The request field for `max_tokens`: ``max_tokens`` (every
            OpenAI-compatible server) or ``max_completion_tokens`` (OpenAI's reasoning models).
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: openai.AsyncOpenAI | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    ) -> None:
        if not timeout > 0:
            raise ValidationError("timeout", f"must be > 0 seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValidationError("max_retries", f"must be an int >= 0, got {max_retries!r}")
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValidationError(
                "max_tokens_param",
                f"must be 'max_tokens' or 'max_completion_tokens', got {max_tokens_param!r}",
            )
        self._owns_client = client is None
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
                api_key=api_key or os.environ.get("OPENAI_API_KEY") or NO_API_KEY,
                timeout=timeout,
                max_retries=max_retries,
            )
        self._client = client
        self._max_tokens_param = max_tokens_param

    @property
    def base_url(self) -> str:
        """The upstream's base URL, as the SDK resolved it."""
        return str(self._client.base_url)

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        meta: CallMeta,
        max_tokens: int | None = None,
        temperature: float | None = None,
        response_format: dict[str, Any] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> Completion:
        """One chat completion; see `LLMClient.complete`. `meta` is not sent upstream."""
        options: dict[str, Any] = {}
        if max_tokens is not None:
            options[self._max_tokens_param] = max_tokens
        if temperature is not None:
            options["temperature"] = temperature
        if response_format is not None:
            options["response_format"] = response_format
        if tools:
            options["tools"] = list(tools)
        try:
            response = await self._client.chat.completions.create(
                model=model, messages=cast(Any, list(messages)), **options
            )
        except openai.APITimeoutError as exc:
            raise LLMError("the upstream timed out", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"could not reach the upstream: {_cause(exc)}", retryable=True) from exc
        except openai.APIStatusError as exc:
            status = exc.status_code
            raise LLMError(
                _error_message(exc),
                status_code=status,
                retryable=status in _RETRYABLE_STATUS or status >= 500,
            ) from exc
        except openai.APIError as exc:
            raise LLMError(f"the upstream's answer is unreadable: {_short(exc.message)}") from exc
        except ValueError as exc:  # a body that is not JSON, or JSON the SDK cannot read
            raise LLMError(f"the upstream's answer is unreadable: {_cause(exc)}") from exc
        try:
            return _completion(response, model)
        except (AttributeError, TypeError, IndexError, KeyError, ValueError) as exc:
            # The SDK builds its models without validation: a wrong shape surfaces here.
            raise LLMError(f"the upstream's answer has the wrong shape: {_cause(exc)}") from exc

    async def aclose(self) -> None:
        """Closes the SDK client's connections, unless the host passed its own client."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _completion(response: object, model: str) -> Completion:
    """The SDK's ChatCompletion as our `Completion`; anything else is an `LLMError`."""
    if not isinstance(response, ChatCompletion):
        raise LLMError(f"the upstream answered with no chat completion: {_short(str(response))}")
    if not response.choices:
        raise LLMError("the upstream answered with no choices")
    choice = response.choices[0]
    message = choice.message
    usage = response.usage
    return Completion(
        text=message.content or "",
        usage=Usage(
            prompt_tokens=usage.prompt_tokens or 0, completion_tokens=usage.completion_tokens or 0
        )
        if usage is not None
        else Usage(),
        model=response.model or model,
        finish_reason=choice.finish_reason,
        tool_calls=tuple(
            call.model_dump(mode="json", exclude_none=True) for call in message.tool_calls or ()
        ),
    )


def _error_message(exc: openai.APIStatusError) -> str:
    """The upstream's own error message when it sent one, else the SDK's; short either way."""
    body = exc.body
    if isinstance(body, dict):
        nested = body.get("error")
        if isinstance(nested, dict):
            body = nested
        message = body.get("message")
        if isinstance(message, str) and message:
            return _short(message)
    elif isinstance(body, str) and body.strip():
        return _short(body)
    return _short(exc.message)


def _cause(exc: BaseException) -> str:
    """The root of a failure in a few words: ``RemoteProtocolError: Server disconnected``."""
    cause = exc.__cause__ if isinstance(exc, openai.APIError) else exc
    if cause is None:
        return _short(str(exc))
    return _short(f"{type(cause).__name__}: {cause}")


def _short(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= _MESSAGE_CHARS:
        return text
    return text[: _MESSAGE_CHARS - 1] + "…"
