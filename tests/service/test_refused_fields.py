"""Models that refuse fields every server took once. OpenAI's reasoning models (the o-series,
GPT-5 and later) refuse ``max_tokens`` ("Use 'max_completion_tokens' instead") and any
``temperature`` but their default; Claude's newer models refuse ``temperature`` and ``top_p``
together, which a chat client sends. The gateway learns it from the first refusal and asks in
their words from then on: the client's answer (whole and streamed) and the background summary
(whose calls set a temperature of 0) go through. A temperature the client chose is the
client's: the refusal reaches it. The `openai` SDK over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedResponse, ScriptedUpstream, StatusError
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key
from .test_openai_sdk import until

MAX_TOKENS = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead."
)
TEMPERATURE = (
    "Unsupported value: 'temperature' does not support 0.0 with this model. "
    "Only the default (1) value is supported."
)


def reasoning_model(request: dict[str, Any]) -> ScriptedResponse:
    """OpenAI's answer to a request for a reasoning model, as its API gives it."""
    if "max_tokens" in request:
        return StatusError(400, MAX_TOKENS, "invalid_request_error", "unsupported_parameter")
    if request.get("temperature", 1) != 1:
        return StatusError(400, TEMPERATURE, "invalid_request_error", "unsupported_value")
    if request.get("response_format") is not None:
        return summarizing_responder(request)
    return Reply(f"Thought about: {request['messages'][-1]['content']}")


@pytest.fixture
def client(
    database_url: str, upstream: ScriptedUpstream, tenant: str
) -> Iterator[tuple[openai.OpenAI, httpx.Client]]:
    upstream.responder = reasoning_model
    with LiveServer(create_app(settings_for(database_url, upstream))) as live:
        key = create_key(database_url, tenant, "tests").secret
        with (
            openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as sdk,
            httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {key}"}) as rest,
        ):
            yield sdk, rest


def refused(upstream: ScriptedUpstream, field: str) -> int:
    """How many requests carried `field` the way the model refuses."""
    return sum(
        1
        for r in upstream.requests
        if (field == "max_tokens" and "max_tokens" in r)
        or (field == "temperature" and r.get("temperature", 1) != 1)
    )


def test_answers_and_summaries_go_through_in_the_models_words(
    client: tuple[openai.OpenAI, httpx.Client], upstream: ScriptedUpstream
) -> None:
    sdk, rest = client
    for n in range(4):  # enough turns for the background summary (every 4 turns)
        answer = sdk.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": f"Question {n}"}],
            max_completion_tokens=300,
            extra_headers={"X-Thread-Id": "r1"},
        )
        assert answer.choices[0].message.content == f"Thought about: Question {n}"
    streamed = sdk.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "Streamed"}],
        stream=True,
        extra_headers={"X-Thread-Id": "r2"},
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == (
        "Thought about: Streamed"
    )
    memory = until(lambda: rest.get("/v1/threads/r1/memory").json()["summary"])
    assert memory, "the background summary never went through"
    answers = [r for r in upstream.requests if r["model"] == "answer-model"]
    assert answers[-1]["max_completion_tokens"] > 0
    assert 300 in [r.get("max_completion_tokens") for r in answers]  # the client's cap
    # learned once per model, then the model's own words: the answer's first request and
    # the summary's first carried max_tokens; the summary's first two, its temperature
    assert refused(upstream, "max_tokens") == 2
    assert refused(upstream, "temperature") == 2


def test_a_temperature_the_client_chose_is_refused_to_the_client(
    client: tuple[openai.OpenAI, httpx.Client], upstream: ScriptedUpstream
) -> None:
    sdk, rest = client
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": "Hi"}],
            temperature=0.0,
            extra_headers={"X-Thread-Id": "t"},
        )
    assert caught.value.status_code == 400  # the upstream's refusal (its words in the log)
    sent = [(r.get("temperature"), "max_tokens" in r) for r in upstream.requests]
    assert sent == [(0.0, True), (0.0, False)]  # the cap in its words, the temperature as asked
    turns = rest.get("/v1/threads/t/messages").json()["data"]
    assert [t["role"] for t in turns] == ["user"]  # the question stays, as for any upstream error


ONE_SAMPLING = (
    "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
)


def claude(request: dict[str, Any]) -> ScriptedResponse:
    """Anthropic's answer to a request for one of Claude's newer models."""
    if "temperature" in request and "top_p" in request:
        return StatusError(400, ONE_SAMPLING, "invalid_request_error")
    if request.get("model") == "cheap-model":
        return summarizing_responder({"messages": [request["messages"][-1]]})
    return Reply("Sampled.")


def sampled(sdk: openai.OpenAI, stream: bool) -> str:
    """The answer to a chat request that sets both, as a chat front end does."""
    asked: dict[str, Any] = {
        "model": "answer-model",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.3,
        "top_p": 0.9,
        "extra_headers": {"X-Thread-Id": "claude"},
    }
    if stream:
        chunks = sdk.chat.completions.create(**asked, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return sdk.chat.completions.create(**asked).choices[0].message.content or ""


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_clients_temperature_and_top_p_reach_claude_as_it_takes_them(
    stream: bool, database_url: str, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.responder = claude
    settings = settings_for(database_url, upstream, upstream_api="anthropic")
    with (
        LiveServer(create_app(settings)) as live,
        openai.OpenAI(
            base_url=f"{live.url}/v1",
            api_key=create_key(database_url, tenant, "tests").secret,
            max_retries=0,
        ) as sdk,
    ):
        for _ in range(2):
            assert sampled(sdk, stream) == "Sampled."
    sent = [(r.get("temperature"), r.get("top_p")) for r in upstream.requests]
    assert sent == [(0.3, 0.9), (0.3, None), (0.3, None)]  # refused once, then learned
