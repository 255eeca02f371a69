"""The ask lock across processes: an ask waits for the thread another process is answering,
places its turns after what that process wrote, gives the lock back with its answer, and
gives up with a conflict when the wait is too long. The gateway folds the lock into its
first read and its last write where the store can (`AskLockStore`), and takes the steps one
after the other on any other store: both here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assistant, user
from workingmem.gateway import Gateway
from workingmem.gateway_config import GatewayConfig
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream

pytestmark = pytest.mark.asyncio

MODEL = wm.ModelInfo(id="answer-model", context_window=8_000, max_output_tokens=500)
CONFIG = GatewayConfig(
    default_model="answer-model",
    cheap_model="cheap-model",
    models={"answer-model": MODEL},
    working_memory=wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW),
)


class TwoStepStore:
    """A store without `AskLockStore`'s methods (a host's own store): the lock is taken, then
    the thread read; the answer stored, then the lock given back."""

    def __init__(self, store: wm.Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in ("claim_and_read_tail", "append_and_release"):
            raise AttributeError(name)
        return getattr(self._store, name)


@pytest.fixture(params=["one trip", "two steps"])
def asked(request: pytest.FixtureRequest, store: wm.Store) -> wm.Store:
    """The store the gateway asks: the store itself, or `TwoStepStore` around it."""
    if request.param == "one trip":
        assert isinstance(store, wm.stores.AskLockStore)
        return store
    wrapped: Any = TwoStepStore(store)
    assert not isinstance(wrapped, wm.stores.AskLockStore)
    return wrapped  # type: ignore[no-any-return]


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    def echo(request: dict[str, Any]) -> Reply:
        return Reply(f"You said: {request['messages'][-1]['content']}")

    async with ScriptedUpstream(responder=echo) as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream) -> AsyncIterator[OpenAIClient]:
    async with OpenAIClient(base_url=upstream.base_url, timeout=2, max_retries=0) as llm:
        yield llm


def refusals(store: wm.Store, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set when the store refuses the lock to an asker (the lock's first step on
    either kind of store)."""
    refused = asyncio.Event()
    claim = store.claim_thread
    claiming: Any = store  # a SQL store: it has both
    claim_and_read = claiming.claim_and_read_tail

    async def watched_claim(**kwargs: Any) -> bool:
        claimed: bool = await claim(**kwargs)
        if not claimed:
            refused.set()
        return claimed

    async def watched_claim_and_read(**kwargs: Any) -> Any:
        found = await claim_and_read(**kwargs)
        if not found[0]:
            refused.set()
        return found

    monkeypatch.setattr(store, "claim_thread", watched_claim)
    monkeypatch.setattr(store, "claim_and_read_tail", watched_claim_and_read)
    return refused


async def test_an_ask_waits_for_the_thread_another_process_answers_and_goes_on_after_it(
    store: wm.Store,
    asked: wm.Store,
    client: OpenAIClient,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    async with Gateway(store=asked, llm=client, config=CONFIG) as gateway:
        await gateway.ask(**ids, message="hello")
        assert await store.claim_thread(**ids, owner="another process", ttl_seconds=60)
        refused = refusals(store, monkeypatch)

        # expect_turns: the ask must place its turns on the thread as the other process left it
        asking = asyncio.create_task(gateway.ask(**ids, message="and now?", expect_turns=4))
        await refused.wait()
        assert not asking.done()
        await store.append(**ids, messages=[user("meanwhile"), assistant("elsewhere")])
        await store.release_thread(**ids, owner="another process")
        result = await asking

    assert result.answer == "You said: and now?"
    turns = await store.list_turns(**ids)
    assert [t.content for t in turns] == [
        "hello",
        "You said: hello",
        "meanwhile",
        "elsewhere",
        "and now?",
        "You said: and now?",
    ]
    assert await store.claim_thread(**ids, owner="next", ttl_seconds=60)  # given back


async def test_a_thread_held_past_the_busy_wait_is_a_conflict_and_nothing_is_stored(
    store: wm.Store, asked: wm.Store, client: OpenAIClient, tenant: str
) -> None:
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    config = CONFIG.model_copy(update={"busy_wait_seconds": 0.05})
    async with Gateway(store=asked, llm=client, config=config) as gateway:
        await gateway.ask(**ids, message="hello")
        assert await store.claim_thread(**ids, owner="another process", ttl_seconds=60)

        with pytest.raises(wm.ConflictError, match="busy answering another message"):
            await gateway.ask(**ids, message="and now?")

    assert [t.content for t in await store.list_turns(**ids)] == ["hello", "You said: hello"]
    assert not await store.claim_thread(**ids, owner="next", ttl_seconds=60)  # still the other's


async def test_a_lock_taken_by_a_trip_that_failed_after_it_is_given_back(
    store: wm.Store, client: OpenAIClient, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    assert isinstance(store, wm.stores.AskLockStore)
    claim_and_read = store.claim_and_read_tail

    async def failing_after_the_claim(**kwargs: Any) -> Any:
        await claim_and_read(**kwargs)
        raise wm.StoreError("the connection broke after the lock was taken")

    monkeypatch.setattr(store, "claim_and_read_tail", failing_after_the_claim)
    async with Gateway(store=store, llm=client, config=CONFIG) as gateway:
        with pytest.raises(wm.StoreError, match="connection broke"):
            await gateway.ask(**ids, message="hello")

    assert await store.claim_thread(**ids, owner="next", ttl_seconds=60)
    with pytest.raises(wm.NotFoundError):
        await store.list_turns(**ids)
