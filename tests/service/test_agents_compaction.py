"""The OpenAI Agents SDK's `OpenAIResponsesCompactionSession` pointed at the gateway, unchanged:
once its history grows it calls ``responses.compact``, keeps the user messages and the
gateway's compaction item in place of the rest, and the next run's model reads the summary."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from agents import Agent, ModelSettings, Runner, SQLiteSession
from agents.memory import OpenAIResponsesCompactionSession

from workingmem.llm.testing import ScriptedUpstream

from .live import LiveServer
from .test_agents_responses import blocking, config, threads_of
from .test_responses_api import turns
from .test_responses_compact import LEAD, any_api

pytestmark = pytest.mark.asyncio

AGENT = Agent(name="planner", instructions="Be brief.", model="answer-model")


@pytest.fixture
async def client(
    service: LiveServer, key: str, upstream: ScriptedUpstream
) -> AsyncIterator[openai.AsyncOpenAI]:
    upstream.responder = any_api
    async with openai.AsyncOpenAI(
        base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10
    ) as sdk:
        yield sdk


def answers(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") == "answer-model"]


@pytest.mark.parametrize("mode", ["previous_response_id", "input"])
async def test_the_sdks_compaction_session_compacts_through_the_gateway(
    mode: Any, client: openai.AsyncOpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    session = OpenAIResponsesCompactionSession(
        "trip",
        SQLiteSession("trip"),
        client=client,
        model="gpt-4.1-mini",
        compaction_mode=mode,
        should_trigger_compaction=lambda context: len(context["compaction_candidate_items"]) >= 2,
    )
    await Runner.run(
        AGENT,
        "Please remember my budget is 4,000 euros.",
        session=session,
        run_config=config(client),
    )
    await Runner.run(AGENT, "I travel in May.", session=session, run_config=config(client))

    items = await session.get_items()
    assert [item.get("type") for item in items] == ["message", "message", "compaction"]
    assert [item.get("role") for item in items[:2]] == ["user", "user"]

    result = await Runner.run(
        AGENT, "What is my budget?", session=session, run_config=config(client)
    )
    assert result.final_output == "Noted."
    read = answers(upstream)[-1]["messages"]
    stored = sorted([len(await blocking(turns)(api, t["id"])) for t in await threads_of(api)])
    if mode == "previous_response_id":
        # a compaction of the thread's turns alone: resent, it continues the thread, which
        # stays whole, and the model reads the thread's memory (its answers too)
        assert stored == [6]
        assert [m["content"] for m in read[-3:]] == [
            "I travel in May.",
            "Noted.",
            "What is my budget?",
        ]
        assert LEAD not in str(read)
    else:
        # a compaction of the session's items: the history parts into a thread of its own
        # (the user messages, the compaction, the question and its answer); the other is whole
        assert stored == [4, 5]
        (compacted,) = [m for m in read if LEAD in str(m["content"])]
        assert compacted["role"] == "user"
        assert "- Please remember my budget is 4,000 euros." in compacted["content"]


async def test_the_sdks_server_side_compaction_through_the_gateway(
    client: openai.AsyncOpenAI, api: httpx.Client
) -> None:
    """``ModelSettings(context_management=...)`` with a session that resends its items: the
    gateway's compaction items land in the session beside the answers, come back in its
    history, and the thread holds every turn once and none of the items."""
    compaction: Any = [{"type": "compaction", "compact_threshold": 80}]
    agent = AGENT.clone(model_settings=ModelSettings(context_management=compaction))
    session = SQLiteSession("server-side")
    questions = [
        f"Please remember fact number {n}: the museum opens at {n + 8} am." for n in range(6)
    ]
    for question in questions:
        result = await Runner.run(agent, question, session=session, run_config=config(client))
        assert result.final_output == "Noted."
    items = await session.get_items()
    assert sum(item.get("type") == "compaction" for item in items) >= 2
    (thread,) = await threads_of(api)
    stored = await blocking(turns)(api, thread["id"])
    assert [turn["content"] for turn in stored] == [
        text for question in questions for text in (question, "Noted.")
    ]
