"""Fixtures the framework integrations' tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from workingmem.integrations.pydantic_ai import WorkingMemoryCapability


@pytest.fixture
async def capabilities() -> AsyncIterator[Callable[..., WorkingMemoryCapability]]:
    """Makes capabilities and closes them after the test."""
    made: list[WorkingMemoryCapability] = []

    def make(**kwargs: Any) -> WorkingMemoryCapability:
        made.append(WorkingMemoryCapability(**kwargs))
        return made[-1]

    yield make
    for memory in made:
        await memory.aclose()
