"""`workingmem serve --recall`: the service's memory recalls older turns for every call, through
the official `openai` SDK against uvicorn on 127.0.0.1, on SQLite and PostgreSQL."""

from __future__ import annotations

import openai

from workingmem.llm.testing import ScriptedUpstream
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key


def test_a_resent_history_is_stored_and_its_old_turns_recalled(
    database_url: str, upstream: ScriptedUpstream, tenant: str
) -> None:
    history: list[dict[str, str]] = [
        {"role": "user", "content": "We adopted a beagle puppy and named him Biscuit."},
        {"role": "assistant", "content": "Biscuit is a great name for a beagle."},
    ]
    for i in range(200):
        history.append({"role": "user", "content": f"Small talk number {i} about nothing"})
        history.append({"role": "assistant", "content": f"Reply {i}"})
    question = {"role": "user", "content": "What is my beagle called?"}
    settings = settings_for(database_url, upstream, recall_ratio=0.5)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, tenant, "tests").secret
        with openai.OpenAI(
            base_url=f"{live.url}/v1",
            api_key=key,
            max_retries=0,
            timeout=10,
            default_headers={"X-Thread-Id": "recall"},
        ) as client:
            client.chat.completions.create(
                model="answer-model",
                messages=[*history, question],  # type: ignore[list-item]
            )
    sent = [r for r in upstream.requests if r.get("model") != "cheap-model"][-1]["messages"]
    assert "[1] (" in sent[0]["content"]
    assert "user: We adopted a beagle puppy and named him Biscuit." in sent[0]["content"]
    assert all("Biscuit." not in str(m.get("content")) for m in sent[1:])
    assert sent[-1] == question
    assert len(sent) < len(history)  # a window, not the whole resent history
