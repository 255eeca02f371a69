"""Anthropic's ``system`` messages among a request's messages (Claude Code sends its environment
so, after the user's message): their texts join the call's system prompt after the request's
``system``, the thread stores none of them, one cleared by a later user message
(``clear_at: "next_user_message"``) no longer counts, their ``output_config`` applies to the call,
and a block that changes the tools is a 400 that names it. The `anthropic` SDK over real HTTP,
in front of a chat upstream and of an Anthropic one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key

TERSE = "You are terse."


def noted(request: dict[str, Any]) -> Reply:
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    return Reply("Noted.")


@pytest.fixture(params=["chat", "anthropic"])
def gateway(
    request: pytest.FixtureRequest, database_url: str, upstream: ScriptedUpstream, tenant: str
) -> Iterator[tuple[anthropic.Anthropic, httpx.Client]]:
    upstream.responder = noted
    settings = settings_for(database_url, upstream, upstream_api=request.param)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, tenant, "tests").secret
        with (
            anthropic.Anthropic(base_url=live.url, api_key=key, max_retries=0) as sdk,
            httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {key}"}) as rest,
        ):
            yield sdk, rest


def system_prompt(upstream: ScriptedUpstream) -> str:
    """The system prompt of the last answer the upstream was asked for, in its API's shape."""
    sent = [r for r in upstream.requests if r.get("model") != "cheap-model"][-1]
    if "system" in sent:
        system = sent["system"]
        return system if isinstance(system, str) else "\n".join(b["text"] for b in system)
    assert sent["messages"][0]["role"] == "system"
    return str(sent["messages"][0]["content"])


def stored(rest: httpx.Client, thread: str) -> list[tuple[str, str]]:
    page = rest.get(f"/v1/threads/{thread}/messages").json()["data"]
    return [(m["role"], m["content"]) for m in page]


def test_a_system_message_joins_the_system_prompt_and_is_no_turn(
    gateway: tuple[anthropic.Anthropic, httpx.Client], upstream: ScriptedUpstream
) -> None:
    sdk, rest = gateway
    asked: Any = [
        {"role": "user", "content": "Hello."},
        {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
    ]
    first = sdk.messages.create(
        model="answer-model",
        max_tokens=100,
        system=TERSE,
        messages=asked,
        extra_headers={"X-Thread-Id": "s1"},
    )
    prompt = system_prompt(upstream)
    assert TERSE in prompt
    assert "Answer in French." in prompt
    assert prompt.index(TERSE) < prompt.index("Answer in French.")
    again: Any = [
        asked[0],
        {"role": "assistant", "content": first.content[0].model_dump()["text"]},
        {"role": "user", "content": "Again."},
        {"role": "system", "content": "Answer in German."},
    ]
    sdk.messages.create(
        model="answer-model",
        max_tokens=100,
        system=TERSE,
        messages=again,
        extra_headers={"X-Thread-Id": "s1"},
    )
    prompt = system_prompt(upstream)
    assert "Answer in German." in prompt
    assert "French" not in prompt
    assert stored(rest, "s1") == [
        ("user", "Hello."),
        ("assistant", "Noted."),
        ("user", "Again."),
        ("assistant", "Noted."),
    ]


def test_a_system_message_cleared_by_a_later_user_message_no_longer_counts(
    gateway: tuple[anthropic.Anthropic, httpx.Client], upstream: ScriptedUpstream
) -> None:
    sdk, _ = gateway
    once: Any = {"role": "system", "content": "Only for now.", "clear_at": "next_user_message"}
    sdk.messages.create(
        model="answer-model",
        max_tokens=100,
        messages=[{"role": "user", "content": "A."}, once],
        extra_headers={"X-Thread-Id": "s2"},
    )
    assert "Only for now." in system_prompt(upstream)
    later: Any = [
        {"role": "user", "content": "A."},
        once,
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "B."},
    ]
    sdk.messages.create(
        model="answer-model", max_tokens=100, messages=later, extra_headers={"X-Thread-Id": "s2"}
    )
    assert "Only for now." not in system_prompt(upstream)


@pytest.mark.parametrize(
    ("content", "error", "said"),
    [
        (
            [{"type": "tool_addition", "tool": {"type": "tool_reference", "name": "x"}}],
            anthropic.BadRequestError,
            "messages[1].content[0].type: 'tool_addition' blocks are not served",
        ),
        ([{"type": "text"}], anthropic.UnprocessableEntityError, "messages.1.system.content"),
    ],
)
def test_a_system_message_the_gateway_cannot_read_is_refused(
    content: Any,
    error: type[anthropic.APIStatusError],
    said: str,
    gateway: tuple[anthropic.Anthropic, httpx.Client],
) -> None:
    """A block that changes the tools (the model is offered the request's `tools`), or a text
    block without its text; nothing is stored."""
    sdk, rest = gateway
    refused: Any = {"role": "system", "content": content}
    with pytest.raises(error) as raised:
        sdk.messages.create(
            model="answer-model",
            max_tokens=100,
            messages=[{"role": "user", "content": "Hi."}, refused],
            extra_headers={"X-Thread-Id": "s3"},
        )
    assert said in str(raised.value)
    assert rest.get("/v1/threads/s3/messages").status_code == 404


def test_a_system_message_s_output_config_applies_to_the_call(
    database_url: str, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.responder = noted
    settings = settings_for(database_url, upstream, upstream_api="anthropic")
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, tenant, "tests").secret
        with anthropic.Anthropic(base_url=live.url, api_key=key, max_retries=0) as sdk:
            sdk.messages.create(
                model="answer-model",
                max_tokens=100,
                messages=[
                    {"role": "user", "content": "Hi."},
                    {"role": "system", "content": "Be quick.", "output_config": {"effort": "low"}},  # type: ignore[list-item]
                ],
                extra_body={"output_config": {"effort": "high"}},
            )
            sent = upstream.requests[-1]
            assert sent["output_config"] == {"effort": "low"}
            assert all(m["role"] != "system" for m in sent["messages"])


def test_system_messages_are_counted(gateway: tuple[anthropic.Anthropic, httpx.Client]) -> None:
    sdk, _ = gateway
    question: Any = {"role": "user", "content": "Hello."}
    plain = sdk.messages.count_tokens(model="answer-model", messages=[question])
    said: Any = {"role": "system", "content": "Answer in French, with a long, polite greeting."}
    more = sdk.messages.count_tokens(model="answer-model", messages=[question, said])
    assert more.input_tokens > plain.input_tokens
