"""Fixtures of the service tests: a scripted upstream, a database per backend, the live service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import workingmem as wm
from tests.conftest import BACKENDS, postgres_url
from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import ServiceSettings, create_app

from .live import LiveServer, create_key

MODEL = wm.ModelInfo(id="answer-model", context_window=8_000, max_output_tokens=500)
CONFIG = wm.GatewayConfig(
    default_model="answer-model",
    cheap_model="cheap-model",
    models={"answer-model": MODEL},
    working_memory=wm.WorkingMemoryConfig(recent_turns=4, update_every_turns=4),
)
TEMPLATE = "# User\n- Name:\n"


def answering(request: dict[str, Any]) -> Reply:
    """Helper calls (the cheap model's) get a summary; answers repeat the last message."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    last = request["messages"][-1]
    return Reply(f"You said: {last['content']}", prompt_tokens=100, completion_tokens=10)


def settings_for(database_url: str, upstream: ScriptedUpstream, **changes: Any) -> ServiceSettings:
    fields: dict[str, Any] = {
        "database_url": database_url,
        "upstream_base_url": upstream.base_url,
        "upstream_api_key": "sk-test-not-a-key",
        "upstream_timeout": 10.0,
        "upstream_max_retries": 0,
        "gateway": CONFIG,
        "profiles": [wm.Profile(id="support", system_prompt="You help with orders.\n{memory}")],
        "agent_memory": wm.AgentMemoryConfig(template=TEMPLATE),
    }
    fields.update(changes)
    return ServiceSettings(**fields)


def database_for(backend: str, folder: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder / 'memory.db'}"
    return postgres_url()


@pytest.fixture(params=["chat", "anthropic", "responses"])
def upstream_api(request: pytest.FixtureRequest) -> str:
    """Each API an upstream may speak (`ServiceSettings.upstream_api`), for the tests that
    take them all."""
    return str(request.param)


@pytest.fixture
def served(
    database_url: str, upstream: ScriptedUpstream, upstream_api: str, tenant: str
) -> Iterator[openai.OpenAI]:
    """The `openai` SDK, with a key of the test's tenant (a fresh one: PostgreSQL's database
    is shared), on a gateway whose upstream speaks `upstream_api` and answers every request
    "Noted."."""
    upstream.responder = lambda request: Reply("Noted.")
    settings = settings_for(database_url, upstream, upstream_api=upstream_api)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, tenant, "tests").secret
        with openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as sdk:
            yield sdk


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(responder=answering) as server:
        yield server


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite file, or the test run's PostgreSQL (shared: tests use fresh tenants)."""
    return database_for(request.param, tmp_path)


@pytest.fixture
def service(database_url: str, upstream: ScriptedUpstream) -> Iterator[LiveServer]:
    """The service on 127.0.0.1, on the database, answering through the scripted upstream."""
    with LiveServer(create_app(settings_for(database_url, upstream))) as live:
        yield live


@pytest.fixture
def key(service: LiveServer, database_url: str, tenant: str) -> str:
    """An API key of the test's tenant, in the service's database."""
    return create_key(database_url, tenant, "tests").secret


@pytest.fixture
def api(service: LiveServer, key: str) -> Iterator[httpx.Client]:
    """The REST API with the tenant's key."""
    with httpx.Client(
        base_url=service.url, headers={"Authorization": f"Bearer {key}"}, timeout=10
    ) as client:
        yield client
