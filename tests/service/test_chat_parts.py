"""Chat messages as the newest `openai` SDK's types write them: content parts with OpenAI's
explicit cache marks (``prompt_cache_breakpoint``), an image at ``detail: "original"``, an
assistant turn with its ``refusal`` in a resent history. Real SDK, real HTTP, the scripted
upstream speaking each API."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.helpers import assert_valid_anthropic_request
from tests.thinking_upstreams import last_answer_request
from workingmem.llm.testing import ScriptedUpstream

from .live import create_key
from .test_responses_api import turns

MARK: Any = {"mode": "explicit", "ttl": "30m"}
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYAAAAAMAAS"
    "sJTYQAAAAASUVORK5CYII="
)


def marked(*texts: str) -> Any:
    """A user message whose every text part is marked."""
    parts = [{"type": "text", "text": t, "prompt_cache_breakpoint": MARK} for t in texts]
    return {"role": "user", "content": parts}


def test_cache_marks_are_taken_and_sent_to_an_openai_upstream(
    served: openai.OpenAI, upstream: ScriptedUpstream, upstream_api: str
) -> None:
    thread = "cached"
    for n in (1, 2):
        served.chat.completions.create(
            model="answer-model",
            messages=[marked(f"{n}a", f"{n}b", f"{n}c")],
            extra_headers={"X-Thread-Id": thread},
        )
    # the answer's request: a summary update of the cheap model may come after it
    sent = [r for r in upstream.requests if r.get("model") != "cheap-model"][-1]
    if upstream_api == "anthropic":
        assert_valid_anthropic_request(sent)
    if upstream_api == "anthropic":  # Claude's marks are its own (cache_control)
        assert "prompt_cache_breakpoint" not in json.dumps(sent)
    else:
        messages = sent["messages"] if upstream_api == "chat" else sent["input"]
        marks = [
            part["text"]
            for message in messages
            if isinstance(message.get("content"), list)
            for part in message["content"]
            if "prompt_cache_breakpoint" in part
        ]
        # on the part it was on, as the client sent it; OpenAI writes the newest four and
        # matches at the rest: none is left out
        assert marks == ["1a", "1b", "1c", "2a", "2b", "2c"]
    assert all(text in json.dumps(sent) for text in ("1a", "1b", "1c", "2a", "2b", "2c"))


@pytest.mark.parametrize("upstream_api", ["chat"], indirect=True)
def test_an_original_detail_image_and_a_resent_refusal_are_taken_and_kept(
    served: openai.OpenAI, upstream: ScriptedUpstream, database_url: str, tenant: str
) -> None:
    image: Any = {"type": "image_url", "image_url": {"url": PIXEL, "detail": "original"}}
    history: Any = [
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]},
        {"role": "assistant", "content": "Partly:", "refusal": "not that part."},
        {"role": "user", "content": "Why not?"},
    ]
    served.chat.completions.create(
        model="answer-model", messages=history, extra_headers={"X-Thread-Id": "refused"}
    )
    sent = last_answer_request(upstream)  # a summary's request may come after it
    assert sent[-3]["content"][1]["image_url"]["detail"] == "original"
    refusal = [
        {"type": "text", "text": "Partly:"},
        {"type": "refusal", "refusal": "not that part."},
    ]
    assert sent[-2]["content"] == refusal
    key = create_key(database_url, tenant, "rest").secret
    base = str(served.base_url).removesuffix("/v1/")
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as api:
        assert turns(api, "refused")[1]["content"] == refusal
