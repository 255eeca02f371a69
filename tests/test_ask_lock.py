"""The ask lock across processes: an ask waits for the thread another process is answering,
places its turns after what that process wrote, gives the lock back with its answer, and
gives up with a conflict when the wait is too long; a conversation found without an id is
found again when another request of its family moved it first. The gateway folds the lock
into its first read and its last write where the store can (`AskLockStore`), and takes the
steps one after the other on any other store: both here."""

from __future__ import annotations

import asyncio
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
        if name in ("claim_and_open", "append_and_release"):
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
    claim_and_open = claiming.claim_and_open

    async def watched_claim(**kwargs: Any) -> bool:
        claimed: bool = await claim(**kwargs)
        if not claimed:
            refused.set()
        return claimed

    async def watched_claim_and_open(**kwargs: Any) -> Any:
        claim = await claim_and_open(**kwargs)
        if not claim.taken:
            refused.set()
        return claim

    monkeypatch.setattr(store, "claim_thread", watched_claim)
    monkeypatch.setattr(store, "claim_and_open", watched_claim_and_open)
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
    """The trip took the lock and opened the thread with the question, and the answer to it
    was lost: the lock is given back, and asking again answers the stored question."""
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    assert isinstance(store, wm.stores.AskLockStore)
    claim_and_open = store.claim_and_open

    async def failing_after_the_claim(**kwargs: Any) -> Any:
        await claim_and_open(**kwargs)
        raise wm.StoreError("the connection broke after the lock was taken")

    async with Gateway(store=store, llm=client, config=CONFIG) as gateway:
        with monkeypatch.context() as patched:
            patched.setattr(store, "claim_and_open", failing_after_the_claim)
            with pytest.raises(wm.StoreError, match="connection broke"):
                await gateway.ask(**ids, message="hello")
        assert await store.claim_thread(**ids, owner="next", ttl_seconds=60)
        await store.release_thread(**ids, owner="next")
        assert [t.content for t in await store.list_turns(**ids)] == ["hello"]

        await gateway.ask(**ids, message="hello")

    assert [t.content for t in await store.list_turns(**ids)] == ["hello", "You said: hello"]


async def test_a_new_thread_is_opened_with_the_request_in_the_lock_s_own_trip(
    store: wm.Store,
    asked: wm.Store,
    client: OpenAIClient,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the store can, a new thread's first ask stores its question with the lock (no
    append of its own); an ask on a thread with turns, or one that expects turns, places
    its turns as before. Either way the thread and the upstream's requests are the same."""
    ids: dict[str, Any] = {"tenant_id": tenant, "thread_id": "th"}
    appends: list[int] = []
    append = store.append

    async def counted(**kwargs: Any) -> list[wm.Turn]:
        if kwargs["messages"][0]["role"] == "user":  # the question's (not a two-step answer's)
            appends.append(len(kwargs["messages"]))
        return await append(**kwargs)

    monkeypatch.setattr(store, "append", counted)
    async with Gateway(store=asked, llm=client, config=CONFIG) as gateway:
        first = await gateway.ask(**ids, messages=[user("Lyon in May?"), user("Or June?")])
        after_first = list(appends)
        await gateway.ask(**ids, message="Trains?")
        with pytest.raises(wm.ConflictError):  # nothing may start a thread it expects turns of
            await gateway.ask(tenant_id=tenant, thread_id="other", message="Hi", expect_turns=2)

    one_trip = asked is store
    assert after_first == ([] if one_trip else [2])
    assert appends == [*after_first, 1]
    assert first.answer == "You said: Or June?"
    turns = await store.list_turns(**ids)
    assert [(t.seq, t.content) for t in turns] == [
        (1, "Lyon in May?"),
        (2, "Or June?"),
        (3, "You said: Or June?"),
        (4, "Trains?"),
        (5, "You said: Trains?"),
    ]
    with pytest.raises(wm.NotFoundError):
        await store.list_turns(**{**ids, "thread_id": "other"})


async def _texts(store: wm.Store, tenant: str, thread_id: str) -> list[str]:
    return [str(t.content) for t in await store.list_turns(tenant_id=tenant, thread_id=thread_id)]


async def test_a_fork_another_request_made_first_is_found_again(
    store: wm.Store, client: OpenAIClient, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ada's chat went on; Bob and Carol resend its opening with their own next message, so
    each forks it. Carol forks between Bob's finding and Bob's fork: Bob's fork of the same
    name is refused, Bob finds again and forks anew; neither sees the other's turns."""
    async with Gateway(store=store, llm=client, config=CONFIG) as gateway:
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
                carol.append(
                    await gateway.ask(tenant_id=tenant, messages=[*opening, user("Carol")])
                )
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
        assert forks == [
            (f"{family}-1", "made"),
            (f"{family}-1", "refused"),
            (f"{family}-2", "made"),
        ]
        bobs, carols = (["Hi", hi.answer, name, f"You said: {name}"] for name in ("Bob", "Carol"))
        assert await _texts(store, tenant, bob.thread_id) == bobs
        assert await _texts(store, tenant, carol[0].thread_id) == carols
        assert "Bob" not in await _texts(store, tenant, family)


async def test_a_family_moved_under_every_finding_is_a_conflict_and_nothing_is_stored(
    store: wm.Store, client: OpenAIClient, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between every finding and its lock another client adds a turn where the request was
    to go: the gateway looks again a bounded number of times, then answers 409's error. (A
    request that extends its family's first member is checked under that member's lock, no
    finding before it: this one parts from it, a fork.)"""
    async with Gateway(store=store, llm=client, config=CONFIG) as gateway:
        await gateway.ask(tenant_id=tenant, messages=[user("Hi")])
        found: list[Found] = []

        async def moved_each_time(store: wm.Store, **kwargs: Any) -> Found:
            where = await find_conversation(store, **kwargs)
            found.append(where)
            other = [user(f"another client's turn {len(found)}")]
            await store.append(tenant_id=tenant, thread_id=where.thread_id, messages=other)
            return where

        monkeypatch.setattr(_ask_locks, "find_conversation", moved_each_time)
        request = [user("Hi"), assistant("Another answer."), user("Where am I?")]
        with pytest.raises(wm.ConflictError, match="busy in another request"):
            await gateway.ask(tenant_id=tenant, messages=request)
        assert len(found) == _ask_locks.FIND_ATTEMPTS
        for thread in await store.list_threads(tenant_id=tenant, limit=100):
            assert "Where am I?" not in await _texts(store, tenant, thread.thread_id)


async def test_a_request_extending_its_family_s_first_member_is_checked_under_its_lock(
    store: wm.Store, client: OpenAIClient, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common case, a history resent whole whose last request went to its family's first
    member: that member is checked under its lock, against the lock's read, with no finding
    (no read of its opening) before, as finding would check it first. A request that parts
    from it is found as before, a fork, and so is the fork's next one (finding checks the
    first member first: a fork may say the same as it)."""
    async with Gateway(store=store, llm=client, config=CONFIG) as gateway:
        history, thread = await _three_exchanges(gateway, tenant)
        findings: list[Found] = []

        async def finding(store: wm.Store, **kwargs: Any) -> Found:
            findings.append(await find_conversation(store, **kwargs))
            return findings[-1]

        monkeypatch.setattr(_ask_locks, "find_conversation", finding)
        again = await gateway.ask(tenant_id=tenant, messages=[*history, user("Four")])
        assert (again.thread_id, findings) == (thread, [])
        forked = await gateway.ask(tenant_id=tenant, messages=[*history[:3], user("Other")])
        assert [f.fork for f in findings] == [(thread, 3)]
        assert forked.thread_id == findings[0].thread_id != thread
        branch = [*history[:3], user("Other"), assistant(forked.answer), user("More")]
        assert (await gateway.ask(tenant_id=tenant, messages=branch)).thread_id == forked.thread_id
        assert len(findings) == 2
        assert await _texts(store, tenant, thread) == [
            *(m["content"] for m in history),
            "Four",
            again.answer,
        ]


async def _three_exchanges(gateway: Gateway, tenant: str) -> tuple[list[Any], str]:
    """A conversation of three exchanges without a thread id: its messages and its thread."""
    history: list[Any] = []
    for text in ("One", "Two", "Three"):
        history.append(user(text))
        answered = await gateway.ask(tenant_id=tenant, messages=history)
        history.append(assistant(answered.answer))
    return history, answered.thread_id


async def test_a_trimmed_history_whose_thread_moved_under_its_finding_is_not_stored_on_it(
    store: wm.Store, client: OpenAIClient, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by its last answer, the thread gains a turn before the request's lock: checked
    again under the lock, the request no longer continues it and is answered in a thread of
    its own, the moved thread untouched (R29)."""
    async with Gateway(store=store, llm=client, config=CONFIG) as gateway:
        history, thread = await _three_exchanges(gateway, tenant)
        found: list[Found] = []

        async def moved_once(store: wm.Store, **kwargs: Any) -> Found:
            where = await find_conversation(store, **kwargs)
            found.append(where)
            if len(found) == 1:
                other = [user("another client's turn")]
                await store.append(tenant_id=tenant, thread_id=where.thread_id, messages=other)
            return where

        monkeypatch.setattr(_ask_locks, "find_conversation", moved_once)
        trimmed = await gateway.ask(tenant_id=tenant, messages=[*history[-4:], user("Four")])
    assert (found[0].thread_id, found[0].trimmed) == (thread, 4)
    assert trimmed.thread_id != thread
    assert "Four" not in await _texts(store, tenant, thread)
    assert await _texts(store, tenant, trimmed.thread_id) == [
        *(str(m["content"]) for m in history[-4:]),
        "Four",
        trimmed.answer,
    ]


async def test_an_answer_s_late_mark_leaves_the_next_answer_s(
    store: wm.Store, client: OpenAIClient, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversation without an id is marked by its answer after the answer's lock is given
    back; the next answer's mark is written first here: the late one does not replace it, and
    the client that then trims its history is still found in its thread."""
    async with Gateway(store=store, llm=client, config=CONFIG) as gateway:
        history, thread = await _three_exchanges(gateway, tenant)
        mark = store.mark_awaiting
        held, newer_marked = asyncio.Event(), asyncio.Event()

        async def marked_in_turn(**kwargs: Any) -> None:
            if not held.is_set():  # the first answer's mark waits for the next one's
                held.set()
                await newer_marked.wait()
                await mark(**kwargs)
            else:
                await mark(**kwargs)
                newer_marked.set()

        monkeypatch.setattr(store, "mark_awaiting", marked_in_turn)
        history.append(user("Four"))
        first = asyncio.create_task(gateway.ask(tenant_id=tenant, messages=[*history]))
        await held.wait()
        history.append(assistant("You said: Four"))
        history.append(user("Five"))
        second = await gateway.ask(tenant_id=tenant, messages=history)
        assert (await first).thread_id == second.thread_id == thread
        history.append(assistant(second.answer))
        trimmed = await gateway.ask(tenant_id=tenant, messages=[*history[-4:], user("Six")])
    assert trimmed.thread_id == thread
    assert await _texts(store, tenant, thread) == [
        *(str(m["content"]) for m in history),
        "Six",
        trimmed.answer,
    ]
