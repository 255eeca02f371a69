"""A client's prompt-cache settings (``prompt_cache_key``, ``prompt_cache_retention``,
``prompt_cache_options``) reach an upstream that speaks OpenAI's APIs, from a chat or a
Responses client; an Anthropic upstream, which has no such fields, gets a request without
them. The official SDK over real HTTP, the scripted upstream speaking each API."""

from __future__ import annotations

import uuid
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessageParam

from tests.helpers import assert_valid_anthropic_request
from workingmem.llm.testing import ScriptedUpstream

SETTINGS: dict[str, Any] = {
    "prompt_cache_key": "support-bot",
    "prompt_cache_retention": "24h",
    "prompt_cache_options": {"mode": "explicit"},
}


def test_the_settings_reach_an_openai_upstream_and_never_anthropic(
    served: openai.OpenAI, upstream: ScriptedUpstream, upstream_api: str
) -> None:
    thread = {"X-Thread-Id": f"cache-{uuid.uuid4().hex}"}  # `served`'s tenant is shared
    said: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hi"}]
    served.chat.completions.create(
        model="answer-model", messages=said, extra_headers=thread, **SETTINGS
    )
    served.responses.create(model="answer-model", input="Hi", **SETTINGS)
    chat, responses = [r for r in upstream.requests if r.get("model") != "cheap-model"][-2:]
    for sent in (chat, responses):
        given = {name: sent.get(name) for name in SETTINGS}
        if upstream_api == "anthropic":
            assert given == dict.fromkeys(SETTINGS)
            assert_valid_anthropic_request(sent)
        else:
            assert given == SETTINGS
