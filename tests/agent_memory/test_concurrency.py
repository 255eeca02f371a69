"""Two workers, two store connections, one document: no update is lost silently."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import workingmem as wm
from tests.conftest import BACKENDS, open_backend
from tests.helpers import DocumentIds
from workingmem.agent_memory import AgentMemory, AgentMemoryConfig
from workingmem.stores.documents import DocumentStore

pytestmark = pytest.mark.asyncio

COUNTERS = {"type": "object", "additionalProperties": {"type": "integer"}}


@pytest.fixture(params=BACKENDS)
async def two_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[DocumentStore, DocumentStore]]:
    """Two stores on one database, as two processes would hold them."""
    first = await open_backend(request.param, tmp_path)
    second = await open_backend(request.param, tmp_path)
    try:
        assert isinstance(first, DocumentStore)
        assert isinstance(second, DocumentStore)
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


async def test_concurrent_merges_from_two_connections_all_land(
    two_stores: tuple[DocumentStore, DocumentStore], tenant: str
) -> None:
    """Each update adds its own key; the losers of each race re-read and merge again.

    A race is lost only to a write that landed, so ten writers all land within the ten
    attempts an update makes.
    """
    config = AgentMemoryConfig(schema=COUNTERS, scope="user")
    workers = [AgentMemory(store=s, config=config) for s in two_stores]
    await asyncio.gather(
        *(
            workers[i % 2].update_working_memory(
                tenant_id=tenant, user_id="u1", content={f"k{i}": i}
            )
            for i in range(10)
        )
    )
    stored = await workers[0].get_working_memory(tenant_id=tenant, user_id="u1")
    assert json.loads(stored or "") == {f"k{i}": i for i in range(10)}
    history = await workers[1].get_working_memory_history(tenant_id=tenant, user_id="u1")
    assert [v.version for v in history] == list(range(10, 0, -1))


async def test_two_writers_of_one_version_one_wins_the_other_gets_a_conflict_to_retry(
    two_stores: tuple[DocumentStore, DocumentStore], tenant: str
) -> None:
    """With expected_version, a lost race is a ConflictError; re-reading and retrying works."""
    config = AgentMemoryConfig()
    first, second = (AgentMemory(store=s, config=config) for s in two_stores)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await first.update_working_memory(**ids, content="base")
    seen = await first.get_working_memory_document(**ids)
    results = await asyncio.gather(
        first.update_working_memory(**ids, content="base + A", expected_version=seen.version),
        second.update_working_memory(**ids, content="base + B", expected_version=seen.version),
        return_exceptions=True,
    )
    conflicts = [r for r in results if isinstance(r, wm.ConflictError)]
    assert len(conflicts) == 1
    loser = second if isinstance(results[1], wm.ConflictError) else first
    winner_text = await loser.get_working_memory(**ids)
    assert winner_text in {"base + A", "base + B"}
    retried = await loser.get_working_memory_document(**ids)
    await loser.update_working_memory(
        **ids, content=f"{retried.content} + retried", expected_version=retried.version
    )
    assert await first.get_working_memory(**ids) == f"{winner_text} + retried"


async def test_racing_whole_replacements_keep_every_version_in_the_history(
    two_stores: tuple[DocumentStore, DocumentStore], tenant: str
) -> None:
    """Without expected_version a replacement is the last writer's; the other stays findable."""
    config = AgentMemoryConfig(template="# Notes\n-\n")
    first, second = (AgentMemory(store=s, config=config) for s in two_stores)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await asyncio.gather(
        first.update_working_memory(**ids, content="# Notes\n- from A\n"),
        second.update_working_memory(**ids, content="# Notes\n- from B\n"),
    )
    history = await first.get_working_memory_history(**ids)
    assert sorted(v.content or "" for v in history) == [
        "# Notes\n- from A\n",
        "# Notes\n- from B\n",
    ]
    assert await second.get_working_memory(**ids) == history[0].content
