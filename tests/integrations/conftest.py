"""Fixtures the framework integrations' tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import pytest
from openai import AsyncOpenAI

from workingmem.integrations.langchain import WorkingMemoryMiddleware
from workingmem.integrations.llama_index import WorkingMemoryBuffer
from workingmem.integrations.pydantic_ai import WorkingMemoryCapability
from workingmem.llm.testing import ScriptedUpstream


class _Closes(Protocol):
    async def aclose(self) -> None: ...


M = TypeVar("M", bound=_Closes)


@asynccontextmanager
async def made_by(factory: Callable[..., M]) -> AsyncIterator[Callable[..., M]]:
    """`factory` for a test, each memory it made closed after the test, passed or failed (a
    test asks for such a fixture after `store`, so they close before their store does)."""
    made: list[M] = []

    def make(**settings: Any) -> M:
        made.append(factory(**settings))
        return made[-1]

    try:
        yield make
    finally:
        for memory in made:
            await memory.aclose()


@pytest.fixture
async def capabilities() -> AsyncIterator[Callable[..., WorkingMemoryCapability]]:
    """Makes Pydantic AI capabilities (WorkingMemoryCapability's keywords)."""
    async with made_by(WorkingMemoryCapability) as make:
        yield make


@pytest.fixture
async def buffer() -> AsyncIterator[Callable[..., WorkingMemoryBuffer]]:
    """Makes LlamaIndex buffers (WorkingMemoryBuffer's keywords)."""
    async with made_by(WorkingMemoryBuffer) as make:
        yield make


@pytest.fixture
async def middlewares() -> AsyncIterator[list[WorkingMemoryMiddleware]]:
    """The LangChain middlewares a test made, closed after it (a store passed in stays open)."""
    made: list[WorkingMemoryMiddleware] = []
    yield made
    for middleware in made:
        await middleware.aclose()


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    """A scripted OpenAI-compatible model on 127.0.0.1 (test_anthropic_memory's own `upstream`
    speaks Anthropic's Messages API instead)."""
    with ScriptedUpstream() as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream) -> AsyncIterator[AsyncOpenAI]:
    """The OpenAI SDK's client of `upstream`, closed after the test."""
    openai_client = AsyncOpenAI(base_url=upstream.base_url, api_key="unused", max_retries=0)
    yield openai_client
    await openai_client.close()
