"""The LLM client: protocol, OpenAI-compatible and Anthropic implementations, usage guard, trace.

    from workingmem.llm import CallKind, CallMeta, GuardedClient, OpenAIClient, TokenBudgetGuard

    client = GuardedClient(OpenAIClient(base_url="http://127.0.0.1:8000/v1"),
                           guard=TokenBudgetGuard(default_budget=100_000))
    meta = CallMeta(tenant_id="t1", kind=CallKind.MEMORY_WORKING, model="gpt-4.1-mini")
    completion = await client.complete(model=meta.model, messages=messages, meta=meta)
    async with contextlib.aclosing(client.stream(model=meta.model, messages=messages,
                                                 meta=meta)) as events:
        async for event in events:  # TextDelta..., then one StreamEnd (the whole Completion)
            ...

`workingmem.llm.testing` holds `ScriptedUpstream`, a real OpenAI-compatible server for tests.
"""

from . import _gguf  # noqa: F401 - registers the gguf: tokenizer scheme (a GGUF's vocabulary)
from ._weights import INSTALL_COMMAND, LOCAL_MODEL, LocalModelUnavailableError, local_model_path
from .anthropic_client import AnthropicClient
from .base import (
    CallKind,
    CallMeta,
    Completion,
    LLMClient,
    LLMError,
    NativeEvent,
    StreamEnd,
    StreamEvent,
    StreamingLLMClient,
    TextDelta,
    Usage,
    UsageRefusedError,
)
from .guard import AllowAllGuard, TokenBudgetGuard, UsageGuard
from .local import LOCAL_MODEL_CONTEXT, LocalModelClient
from .openai_client import OpenAIClient
from .openai_responses import OpenAIResponsesClient
from .trace import CallRecord, GuardedClient, LLMTracer

__all__ = [
    "INSTALL_COMMAND",
    "LOCAL_MODEL",
    "LOCAL_MODEL_CONTEXT",
    "AllowAllGuard",
    "AnthropicClient",
    "CallKind",
    "CallMeta",
    "CallRecord",
    "Completion",
    "GuardedClient",
    "LLMClient",
    "LLMError",
    "LLMTracer",
    "LocalModelClient",
    "LocalModelUnavailableError",
    "NativeEvent",
    "OpenAIClient",
    "OpenAIResponsesClient",
    "StreamEnd",
    "StreamEvent",
    "StreamingLLMClient",
    "TextDelta",
    "TokenBudgetGuard",
    "Usage",
    "UsageGuard",
    "UsageRefusedError",
    "local_model_path",
]
