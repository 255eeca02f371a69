"""A conversation found without a thread id while other requests of its family move it: a fork
another request made first is found again, and a family moved under every finding is a
conflict, with nothing of the request stored. The other request runs in the hook between the
finding and what follows it, on the real store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assistant, user
from workingmem import _ask_locks
from workingmem.conversations import Found, find_conversation
from workingmem.gateway import Gateway
from workingmem.gateway_config import GatewayConfig
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream

MODEL = wm.ModelInfo(id="answer-model", context_window=8_000, max_output_tokens=500)
CONFIG = GatewayConfig(
    default_model="answer-model",
    cheap_model="cheap-model",
    models={"answer-model": MODEL},
    working_memory=wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW),
)


@pytest.fixture
async def gateway(store: wm.Store) -> AsyncIterator[Gateway]:
    def echo(request: dict[str, Any]) -> Reply:
        return Reply(f"You said: {request['messages'][-1]['content']}")

    async with (
        ScriptedUpstream(responder=echo) as upstream,
        OpenAIClient(base_url=upstream.base_url, timeout=2, max_retries=0) as llm,
        Gateway(store=store, llm=llm, config=CONFIG) as gw,
    ):
        yield gw


async def texts(store: wm.Store, tenant: str, thread_id: str) -> list[str]:
    return [str(t.content) for t in await store.list_turns(tenant_id=tenant, thread_id=thread_id)]


async def test_a_fork_another_request_made_first_is_found_again(
    gateway: Gateway, store: wm.Store, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ada's chat went on; Bob and Carol resend its opening with their own next message, so
    each forks it. Carol forks between Bob's finding and Bob's fork: Bob's fork of the same
    name is refused, Bob finds again and forks anew; neither sees the other's turns."""
    hi = await gateway.ask(tenant_id=tenant, messages=[user("Hi")])
    opening = [user("Hi"), assistant(hi.answer)]
    ada = await gateway.ask(tenant_id=tenant, messages=[*opening, user("I am Ada")])
    assert ada.thread_id == hi.thread_id
    fork = store.fork_thread
    forks: list[tuple[str, str]] = []
    carol: list[wm.AskResult] = []
    asked = False

    async def carol_first(**kwargs: Any) -> None:
        nonlocal asked
        if not asked:  # Bob's fork: Carol's request runs to its end before it
            asked = True
            carol.append(await gateway.ask(tenant_id=tenant, messages=[*opening, user("Carol")]))
        try:
            await fork(**kwargs)
        except wm.ConflictError:
            forks.append((kwargs["thread_id"], "refused"))
            raise
        forks.append((kwargs["thread_id"], "made"))

    monkeypatch.setattr(store, "fork_thread", carol_first)
    bob = await gateway.ask(tenant_id=tenant, messages=[*opening, user("Bob")])

    family = hi.thread_id
    assert carol[0].thread_id == f"{family}-1"
    assert bob.thread_id == f"{family}-2"
    assert forks == [(f"{family}-1", "made"), (f"{family}-1", "refused"), (f"{family}-2", "made")]
    assert await texts(store, tenant, bob.thread_id) == ["Hi", hi.answer, "Bob", "You said: Bob"]
    carols = ["Hi", hi.answer, "Carol", "You said: Carol"]
    assert await texts(store, tenant, carol[0].thread_id) == carols
    assert "Bob" not in await texts(store, tenant, family)


async def test_a_family_moved_under_every_finding_is_a_conflict_and_nothing_is_stored(
    gateway: Gateway, store: wm.Store, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between every finding and its lock another client adds a turn where the request was
    to go: the gateway looks again a bounded number of times, then answers 409's error."""
    hi = await gateway.ask(tenant_id=tenant, messages=[user("Hi")])
    found: list[Found] = []

    async def moved_each_time(store: wm.Store, **kwargs: Any) -> Found:
        where = await find_conversation(store, **kwargs)
        found.append(where)
        other = [user(f"another client's turn {len(found)}")]
        await store.append(tenant_id=tenant, thread_id=where.thread_id, messages=other)
        return where

    monkeypatch.setattr(_ask_locks, "find_conversation", moved_each_time)
    request = [user("Hi"), assistant(hi.answer), user("Where am I?")]
    with pytest.raises(wm.ConflictError, match="busy in another request"):
        await gateway.ask(tenant_id=tenant, messages=request)
    assert len(found) == _ask_locks.FIND_ATTEMPTS
    for thread in await store.list_threads(tenant_id=tenant, limit=100):
        assert "Where am I?" not in await texts(store, tenant, thread.thread_id)
