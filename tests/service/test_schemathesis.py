"""schemathesis against /openapi.json of the running service, with a valid key: no input
schemathesis can generate gets a 5xx. Bounded (a few dozen examples per operation) so the suite
stays fast; the chat endpoint answers through the scripted upstream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case

from tests.conftest import BACKENDS
from workingmem.llm.testing import ScriptedUpstream
from workingmem.service import create_app

from .conftest import answering, database_for, settings_for
from .live import LiveServer, create_key

EXAMPLES = 25


@pytest.fixture(scope="module", params=BACKENDS)
def live_api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, str]]:
    database_url = database_for(request.param, tmp_path_factory.mktemp("schemathesis"))
    key = create_key(database_url, f"tenant-{uuid.uuid4().hex[:12]}", "schemathesis").secret
    with (
        ScriptedUpstream(responder=answering) as upstream,
        LiveServer(create_app(settings_for(database_url, upstream))) as live,
    ):
        yield live, key


schema = schemathesis.openapi.from_dict(create_app().openapi())
"""The published schema: the same app without its lifespan produces it (nothing is opened)."""


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_input_gives_a_server_error(case: Case[Any], live_api: tuple[LiveServer, str]) -> None:
    live, key = live_api
    headers = {"Authorization": f"Bearer {key}"}
    if not str(case.headers.get("X-Thread-Id", "")).strip():
        headers["X-Thread-Id"] = "schemathesis"  # else every chat request is the same 400
    response = case.call(base_url=live.url, headers=headers)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
