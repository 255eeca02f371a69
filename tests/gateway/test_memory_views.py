"""What the gateway shows and forgets of a thread (its memory, its window, a reset), its query
rewriter, and what it needs to be built, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from tests.gateway.scripted import MODEL
from tests.helpers import (
    assistant,
    run_fresh,
    user,
)
from workingmem.gateway import Gateway
from workingmem.gateway_config import GatewayConfig
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream, StatusError


async def test_the_rewriter_uses_the_facts_and_leaves_a_new_thread_alone(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    """R19: no facts, no model call, the user's text; with facts, the cheap model's query."""
    await gateway.ask(tenant_id=tenant, thread_id="th", message="please remember I live in Lyon")
    before = len(upstream.requests)
    assert (
        await gateway.rewrite_query(tenant_id=tenant, thread_id="th")
        == "please remember I live in Lyon"
    )
    assert len(upstream.requests) == before
    for i in range(2):
        await gateway.ask(tenant_id=tenant, thread_id="th", message=f"vegetarian places? {i}")
    await gateway.when_idle()
    upstream.push(Reply("vegetarian restaurants in Lyon"))
    query = await gateway.rewrite_query(tenant_id=tenant, thread_id="th")
    assert query == "vegetarian restaurants in Lyon"
    prompt = upstream.requests[-1]["messages"][-1]["content"]
    assert "please remember I live in Lyon" in prompt
    assert "vegetarian places? 1" in prompt


async def test_the_rewriter_falls_back_to_the_users_own_words(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    """A rewrite that fails, comes back empty or runs on past a query's length is the user's
    text; the text of a message in parts is its text parts joined."""
    for i in range(3):
        await gateway.ask(tenant_id=tenant, thread_id="th", message=f"please remember {i}")
    await gateway.when_idle()
    parts: Any = [{"type": "text", "text": "vegetarian"}, {"type": "text", "text": "places?"}]
    await gateway.store.append(tenant_id=tenant, thread_id="th", messages=[user(parts)])
    for reply in (StatusError(500, "down"), Reply(""), Reply("word " * 500)):
        upstream.push(reply)
        before = len(upstream.requests)
        query = await gateway.rewrite_query(tenant_id=tenant, thread_id="th")
        assert query == "vegetarian places?"
        assert len(upstream.requests) == before + 1  # the model was asked, and not heeded


async def test_the_rewriter_has_nothing_to_rewrite_without_a_users_turn(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    await gateway.store.append(tenant_id=tenant, thread_id="th", messages=[assistant("Hello!")])
    assert await gateway.rewrite_query(tenant_id=tenant, thread_id="th") == ""
    assert upstream.requests == []


async def test_thread_memory_shows_state_versions_and_window(gateway: Gateway, tenant: str) -> None:
    for i in range(2):
        await gateway.ask(tenant_id=tenant, thread_id="th", message=f"please remember {i}")
    await gateway.when_idle()
    memory = await gateway.get_thread_memory(tenant_id=tenant, thread_id="th")
    assert memory.strategy is wm.Strategy.SUMMARY_BUFFER
    assert memory.state.turn_count == 4
    assert "- please remember 0" in memory.notes
    assert [v.version for v in memory.versions] == [1]
    assert memory.window_tokens is not None
    assert memory.budget_tokens is not None
    assert 0 < memory.window_tokens <= memory.budget_tokens
    await gateway.reset_thread_memory(tenant_id=tenant, thread_id="th")
    after = await gateway.get_thread_memory(tenant_id=tenant, thread_id="th")
    assert (after.notes, after.state.facts) == ("", [])
    assert [v.summary for v in after.versions] == [""]  # the old summaries are gone too
    with pytest.raises(wm.NotFoundError):
        await gateway.get_thread_memory(tenant_id=tenant + "x", thread_id="th")


async def test_a_gateway_without_a_model_reads_and_forgets_but_does_not_answer(
    store: wm.Store, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("hi"), assistant("yo")])
    async with Gateway(store=store) as gateway:
        memory = await gateway.get_thread_memory(tenant_id=tenant, thread_id="th")
        assert memory.thread.turn_count == 2
        await gateway.reset_thread_memory(tenant_id=tenant, thread_id="th")
        with pytest.raises(wm.ValidationError) as caught:
            await gateway.ask(tenant_id=tenant, thread_id="th", message="hello?")
        assert caught.value.field == "llm"
    assert len(await store.list_turns(tenant_id=tenant, thread_id="th")) == 2  # nothing stored


async def test_the_memory_page_sizes_the_window_as_a_real_request_does(
    store: wm.Store, client: OpenAIClient, tenant: str
) -> None:
    """One plan per call: the thread's memory is measured with the platform's system prompt
    and output reserve, exactly as the request that was sent."""
    config = GatewayConfig(
        default_model="answer-model",
        models={"answer-model": MODEL},
        system_prompt="You are the trip planner of a travel agency. " * 40 + "\n{memory}",
    )
    async with Gateway(store=store, llm=client, config=config) as gateway:
        result = await gateway.ask(tenant_id=tenant, thread_id="th", message="Hi there")
        memory = await gateway.get_thread_memory(tenant_id=tenant, thread_id="th")
    assert memory.budget_tokens == result.context.budget_tokens
    plan = gateway.plan()
    assert plan.system_prompt == config.system_prompt
    assert plan.output_reserve_tokens == MODEL.max_output_tokens


@pytest.mark.parametrize(
    ("header", "model", "expected"),
    [
        ("support", "gpt-x", ("support", "gpt-x")),  # a named profile wins; model overrides
        (None, "support", ("support", None)),  # the model field names a profile
        (None, "gpt-x", ("default", "gpt-x")),  # a plain model id: the default profile
        (None, None, ("default", None)),
    ],
)
def test_the_library_resolves_a_requests_profile(
    header: str | None, model: str | None, expected: tuple[str, str | None]
) -> None:
    profiles = wm.Profiles([wm.Profile(id="support", system_prompt="Orders.\n{memory}")])
    profile, override = profiles.for_request(header, model)
    assert (profile.id, override) == expected
    with pytest.raises(wm.ValidationError):
        profiles.for_request("nope", None)


async def test_reset_says_what_it_cleared_and_report_hooks_chain(
    store: wm.Store, client: OpenAIClient, upstream: ScriptedUpstream, tenant: str
) -> None:
    seen: list[str] = []
    config = GatewayConfig(
        default_model="answer-model",
        models={"answer-model": MODEL},
        working_memory=wm.WorkingMemoryConfig(recent_turns=2, update_every_turns=2),
    )
    agent = wm.AgentMemoryConfig()
    async with Gateway(
        store=store,
        llm=client,
        config=config,
        agent_memory=agent,
        on_report=lambda report: seen.append(f"host {report.outcome}"),
    ) as gateway:
        gateway.add_report_hook(lambda report: seen.append(f"metrics {report.outcome}"))
        await gateway.ask(tenant_id=tenant, thread_id="th", message="Hi")
        await gateway.when_idle()
        assert seen == ["host updated", "metrics updated"]
        plain = await gateway.reset_thread_memory(tenant_id=tenant, thread_id="th")
        both = await gateway.reset_thread_memory(
            tenant_id=tenant, thread_id="th", working_memory=True
        )
    assert (plain.summary_cleared, plain.agent_memory_cleared) == (True, False)
    assert both.agent_memory_cleared
    assert both.working_memory_cleared  # spec 003's name for the same thing


async def test_a_thread_too_long_for_the_window_still_shows_its_memory(
    store: wm.Store, tenant: str
) -> None:
    """The memory page of a thread whose newest turn alone is over the model's window: the
    thread and its memory, with no window to show, not an error."""
    small = wm.ModelInfo(id="answer-model", context_window=300, max_output_tokens=100)
    config = GatewayConfig(default_model="answer-model", models={"answer-model": small})
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("word " * 2_000)])
    async with Gateway(store=store, config=config) as gateway:
        memory = await gateway.get_thread_memory(tenant_id=tenant, thread_id="th")
    assert memory.thread.turn_count == 1
    assert (memory.window_tokens, memory.budget_tokens) == (None, None)


class ThreadsOnly:
    """A host's store of threads alone: no documents for an agent memory to keep."""

    def __init__(self, store: wm.Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_document"):
            raise AttributeError(name)
        return getattr(self._store, name)


async def test_an_agent_memory_needs_a_store_that_keeps_documents(store: wm.Store) -> None:
    threads: Any = ThreadsOnly(store)
    with pytest.raises(wm.ValidationError) as caught:
        Gateway(store=threads, agent_memory=wm.AgentMemoryConfig())
    assert caught.value.field == "agent_memory"


def test_entering_a_gateway_builds_its_models_tokenizers(tmp_path: Path) -> None:
    """The first request must not pay ~0.5-1 s for an OpenAI vocabulary: a fresh interpreter
    (this process built them long ago) has the encoding once the gateway is entered."""
    probe = f"""
import asyncio, json
import workingmem as wm
from workingmem.gateway import Gateway
from workingmem.gateway_config import GatewayConfig
from workingmem.tokens import _tiktoken

async def main() -> None:
    store = await wm.open_store({str(tmp_path / "warm.db")!r})
    before = sorted(_tiktoken._encodings)
    async with Gateway(store=store, config=GatewayConfig(default_model="gpt-4o-mini")):
        print(json.dumps([before, sorted(_tiktoken._encodings)]))
    await store.aclose()

asyncio.run(main())
"""
    assert json.loads(run_fresh(probe)) == [[], ["o200k_base"]]
