"""Shared fixtures: a real store per backend, fresh tenants, and no way out to a paid model."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import workingmem as wm

POSTGRES_URL_ENV = "WORKINGMEM_TEST_POSTGRES_URL"
BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")]


@pytest.fixture(autouse=True)
def _no_paid_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real model: the SDK's defaults point nowhere."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv(wm.stores.DATABASE_URL_ENV, raising=False)


def postgres_url() -> str:
    """The test cluster's URL; CI must have one, a developer may run without."""
    url = os.environ.get(POSTGRES_URL_ENV)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(
            f"{POSTGRES_URL_ENV} is not set: CI must run the tests through scripts/with-postgres"
        )
    pytest.skip(
        f"{POSTGRES_URL_ENV} is not set: no PostgreSQL server (run through scripts/with-postgres)"
    )


async def open_backend(backend: str, tmp_path: Path) -> wm.Store:
    if backend == "sqlite":
        return await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}")
    return await wm.open_store(postgres_url())


@asynccontextmanager
async def two_stores(backend: str, tmp_path: Path) -> AsyncIterator[tuple[wm.Store, wm.Store]]:
    """Two stores on one database: two workers."""
    first = await open_backend(backend, tmp_path)
    second = await open_backend(backend, tmp_path)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[wm.Store]:
    """A real store: a SQLite file, or the PostgreSQL server the test run started."""
    opened = await open_backend(request.param, tmp_path)
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
def tenant() -> str:
    """A tenant id no other test uses, so tests share the PostgreSQL database safely."""
    return f"tenant-{uuid.uuid4().hex[:12]}"
