"""The answer's tokens with their log probabilities, when a client asks for them: the chat API's
``logprobs`` / ``top_logprobs``, the Responses API's ``include: ["message.output_text.logprobs"]``
/ ``top_logprobs``, whole and streamed, on an upstream that speaks chat completions or Responses
(each asked in its own words). What the client gets is what the upstream gave, as the official
SDK reads it; an upstream that gives none (Anthropic's) leaves them out, and a client that did
not ask gets none."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import openai
import pytest
from openai.types.responses import Response, ResponseOutputText

from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key

ANSWER = "The sky over Lyon is blue today."
STEP = 5
LOGPROBS: Final = "message.output_text.logprobs"


@pytest.fixture(params=["chat", "responses"])
def openai_upstream(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def gateway(
    database_url: str, upstream: ScriptedUpstream, openai_upstream: str
) -> Iterator[openai.OpenAI]:
    """The `openai` SDK on a gateway whose upstream speaks `openai_upstream`, and answers
    `ANSWER` in pieces of `STEP` characters."""
    upstream.responder = lambda request: Reply(ANSWER, chunk_chars=STEP)
    settings = settings_for(database_url, upstream, upstream_api=openai_upstream)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, "t-logprobs", "tests").secret
        with openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as sdk:
            yield sdk


def upstream_tokens(upstream: ScriptedUpstream, top: int) -> list[dict[str, Any]]:
    """The tokens the upstream gives for `ANSWER`, asked directly with the SDK."""
    with openai.OpenAI(base_url=upstream.base_url, api_key="sk-test", max_retries=0) as direct:
        answer = direct.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": "Hi"}],
            logprobs=True,
            top_logprobs=top,
        )
    assert answer.choices[0].logprobs is not None
    assert answer.choices[0].logprobs.content is not None
    return [token.model_dump() for token in answer.choices[0].logprobs.content]


def first_text(response: Response) -> ResponseOutputText:
    """The response's first output text (its answer's)."""
    item = response.output[0]
    assert item.type == "message"
    part = item.content[0]
    assert part.type == "output_text"
    return part


def answer_calls(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


def test_a_chat_completion_carries_the_upstream_s_logprobs(
    gateway: openai.OpenAI, upstream: ScriptedUpstream, openai_upstream: str
) -> None:
    expected = upstream_tokens(upstream, top=2)

    answer = gateway.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "What colour is the sky?"}],
        logprobs=True,
        top_logprobs=2,
        extra_headers={"X-Thread-Id": "th-chat"},
    )

    assert answer.choices[0].message.content == ANSWER
    assert answer.choices[0].logprobs is not None
    assert answer.choices[0].logprobs.content is not None
    assert [t.model_dump() for t in answer.choices[0].logprobs.content] == expected
    sent = answer_calls(upstream)[-1]
    if openai_upstream == "chat":
        assert (sent["logprobs"], sent["top_logprobs"]) == (True, 2)
    else:  # asked in the Responses API's words
        assert LOGPROBS in sent["include"]
        assert "logprobs" not in sent
        assert sent["top_logprobs"] == 2


def test_a_streamed_chat_completion_carries_them_piece_by_piece(
    gateway: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    expected = upstream_tokens(upstream, top=1)

    pieces: list[str] = []
    tokens: list[dict[str, Any]] = []
    with gateway.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "What colour is the sky?"}],
        logprobs=True,
        top_logprobs=1,
        stream=True,
        extra_headers={"X-Thread-Id": "th-chat-stream"},
    ) as stream:
        for chunk in stream:
            for choice in chunk.choices:
                text = choice.delta.content
                given = choice.logprobs.content if choice.logprobs is not None else None
                if text:
                    pieces.append(text)
                    assert given is not None, f"the piece {text!r} came without its logprobs"
                    assert "".join(t.token for t in given) == text
                tokens += [t.model_dump() for t in given or ()]

    assert "".join(pieces) == ANSWER
    assert tokens == expected


def test_a_chat_client_that_does_not_ask_gets_none(
    gateway: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    answer = gateway.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "Hi"}],
        extra_headers={"X-Thread-Id": "th-none"},
    )
    with gateway.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "Hi again"}],
        stream=True,
        extra_headers={"X-Thread-Id": "th-none"},
    ) as stream:
        streamed = [choice.logprobs for chunk in stream for choice in chunk.choices]

    assert answer.choices[0].logprobs is None
    assert streamed
    assert all(given is None for given in streamed)
    for sent in answer_calls(upstream):
        assert "logprobs" not in sent
        assert "top_logprobs" not in sent
        assert LOGPROBS not in sent.get("include", ())


def test_a_response_carries_them_when_include_asks(
    gateway: openai.OpenAI, upstream: ScriptedUpstream, openai_upstream: str
) -> None:
    expected = upstream_tokens(upstream, top=3)

    response = gateway.responses.create(
        model="answer-model",
        input="What colour is the sky?",
        include=[LOGPROBS],
        top_logprobs=3,
    )

    text = first_text(response)
    assert text.text == ANSWER
    assert [t.model_dump() for t in text.logprobs or ()] == expected
    assert response.top_logprobs == 3
    kept = first_text(gateway.responses.retrieve(response.id))
    assert [t.model_dump() for t in kept.logprobs or ()] == expected
    sent = answer_calls(upstream)[-1]
    if openai_upstream == "chat":
        assert (sent["logprobs"], sent["top_logprobs"]) == (True, 3)
    else:
        assert LOGPROBS in sent["include"]
        assert sent["top_logprobs"] == 3

    later = gateway.responses.create(
        model="answer-model", input="And tomorrow?", previous_response_id=response.id
    )
    assert first_text(later).logprobs == []
    assert "logprobs" not in answer_calls(upstream)[-1]


def test_a_streamed_response_carries_them_in_its_deltas(
    gateway: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    expected = upstream_tokens(upstream, top=0)

    deltas: list[dict[str, Any]] = []
    done: list[dict[str, Any]] = []
    final: list[dict[str, Any]] = []
    with gateway.responses.create(
        model="answer-model",
        input="What colour is the sky?",
        include=[LOGPROBS],
        stream=True,
    ) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                assert "".join(t.token for t in event.logprobs) == event.delta
                deltas += [t.model_dump() for t in event.logprobs]
            elif event.type == "response.output_text.done":
                done = [t.model_dump() for t in event.logprobs]
            elif event.type == "response.completed":
                final = [t.model_dump() for t in first_text(event.response).logprobs or ()]

    assert final == expected
    assert done == expected == deltas


def test_top_logprobs_past_twenty_is_refused_naming_it(
    gateway: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        gateway.responses.create(
            model="answer-model", input="Hi", include=[LOGPROBS], top_logprobs=21
        )

    assert "top_logprobs" in str(refused.value)
    assert answer_calls(upstream) == []


def test_an_upstream_without_logprobs_answers_without_them(
    database_url: str, upstream: ScriptedUpstream
) -> None:
    upstream.responder = lambda request: Reply(ANSWER)
    settings = settings_for(database_url, upstream, upstream_api="anthropic")
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, "t-logprobs-anthropic", "tests").secret
        with openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as sdk:
            chat = sdk.chat.completions.create(
                model="answer-model",
                messages=[{"role": "user", "content": "Hi"}],
                logprobs=True,
                extra_headers={"X-Thread-Id": "th-anthropic"},
            )
            response = sdk.responses.create(model="answer-model", input="Hi", include=[LOGPROBS])

    assert chat.choices[0].message.content == ANSWER
    assert chat.choices[0].logprobs is None
    assert first_text(response).logprobs == []
