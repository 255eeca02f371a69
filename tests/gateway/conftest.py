"""The gateway under test: on the `store` fixture's database, with the scripted upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import workingmem as wm
from tests.gateway.scripted import CONFIG, answering
from workingmem.gateway import Gateway
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import ScriptedUpstream


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    async with ScriptedUpstream(responder=answering) as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream) -> AsyncIterator[OpenAIClient]:
    async with OpenAIClient(base_url=upstream.base_url, timeout=2, max_retries=0) as llm:
        yield llm


@pytest.fixture
async def gateway(store: wm.Store, client: OpenAIClient) -> AsyncIterator[Gateway]:
    async with Gateway(store=store, llm=client, config=CONFIG) as gw:
        yield gw
