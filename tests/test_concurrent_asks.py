"""Many questions on one thread at once: each gets its own answer, right after it.

Two gateways on one database (each with its own connections, as two processes have) ask 40
distinct questions and two identical ones on one thread, all at once. The scripted model answers
the newest user turn of the request it gets, so an answer built from the wrong thread state
shows up as an answer to another question. Bounded in count; no sleep orders anything.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from tests.conftest import open_backend
from tests.service.conftest import CONFIG
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream

QUESTIONS = [f"question {i}" for i in range(40)] + ["yes", "yes"]


def answering(request: dict[str, Any]) -> Reply:
    users = [m for m in request["messages"] if m["role"] == "user"]
    return Reply(f"You said: {users[-1]['content']}")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_concurrent_asks_on_one_thread_each_get_their_own_answer(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    with ScriptedUpstream(responder=answering) as upstream:
        stores = [await open_backend(backend, tmp_path) for _ in range(2)]
        try:
            async with (
                OpenAIClient(base_url=upstream.base_url, api_key="k", max_retries=0) as llm,
                wm.Gateway(store=stores[0], llm=llm, config=CONFIG) as one,
                wm.Gateway(store=stores[1], llm=llm, config=CONFIG) as two,
            ):
                results = await asyncio.gather(
                    *(
                        (one if i % 2 else two).ask(tenant_id=tenant, thread_id="th", message=q)
                        for i, q in enumerate(QUESTIONS)
                    )
                )
                turns = await stores[0].list_turns(tenant_id=tenant, thread_id="th", limit=1000)
        finally:
            for store in stores:
                await store.aclose()
    crossed = [
        (q, r.answer)
        for q, r in zip(QUESTIONS, results, strict=True)
        if r.answer != f"You said: {q}"
    ]
    assert crossed == []
    assert [t.role for t in turns] == ["user", "assistant"] * len(QUESTIONS)
    for question, answer in zip(turns[::2], turns[1::2], strict=True):
        assert answer.content == f"You said: {question.content}"
    assert sorted(str(t.content) for t in turns[::2]) == sorted(QUESTIONS)  # none lost
