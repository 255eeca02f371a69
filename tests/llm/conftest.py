"""What the OpenAIClient tests share: each runs on both of the SDK's transports."""

from __future__ import annotations

from typing import Literal

import pytest

Http = Literal["httpx", "aiohttp"]


@pytest.fixture(params=["httpx", "aiohttp"])
def http(request: pytest.FixtureRequest) -> Http:
    """The SDK's HTTP transport: its default, and the one `workingmem serve` takes."""
    transport: Http = request.param
    return transport
