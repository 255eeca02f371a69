"""What the model clients' tests share: the SDK's two transports for the OpenAIClient's, one
loaded local model a module for the local model's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Literal

import aiohttp
import openai
import pytest

from tests.llm.local_model import require_local_model
from workingmem.llm.local import LocalModelClient

Http = Literal["httpx", "aiohttp"]


@pytest.fixture(params=["httpx", "aiohttp"])
def http(request: pytest.FixtureRequest) -> Http:
    """The SDK's HTTP transport: its default, and the one `workingmem serve` takes."""
    transport: Http = request.param
    return transport


Failure = Literal["status", "timeout", "connection"]

_CAUSES: dict[Http, dict[Failure, type[BaseException] | None]] = {
    "httpx": {
        "status": openai.APIStatusError,
        "timeout": openai.APITimeoutError,
        "connection": openai.APIConnectionError,
    },
    # the requests on aiohttp itself: a status is the upstream's answer, caused by nothing
    "aiohttp": {"status": None, "timeout": TimeoutError, "connection": aiohttp.ClientError},
}


def assert_caused_by(error: BaseException, http: Http, failure: Failure) -> None:
    """`error` was raised from the transport's own exception for `failure`."""
    cause = _CAUSES[http][failure]
    if cause is None:
        assert error.__cause__ is None
    else:
        assert isinstance(error.__cause__, cause)


@pytest.fixture(scope="module")
def model() -> Iterator[LocalModelClient]:
    """One loaded model for the module's tests: the client holds no event loop, so the tests'
    loops may share it."""
    require_local_model()
    client = LocalModelClient()
    try:
        yield client
    finally:
        asyncio.run(client.aclose())
