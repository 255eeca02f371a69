"""A request that ends with an assistant's text, with the official SDKs over HTTP: Anthropic's
prefill (the model goes on from ``{``) and a front end's "continue" of an answer cut short
(Open WebUI resends the conversation with the partial answer last). Both were a 400. The text
is stored as the turn it is and sent last, the answer is the next turn; the client's next
request, with the two joined, edits the thread's newest turns, which then hold them once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedResponse, ScriptedUpstream
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key

CONTINUATION = '"name": "Ada"}'


def going_on(request: dict[str, Any]) -> ScriptedResponse:
    """Any API's upstream: goes on from an assistant's text sent last, else answers."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    sent = request.get("messages") or request.get("input") or []
    return Reply(CONTINUATION if sent[-1].get("role") == "assistant" else "Glad to help.")


@pytest.fixture
def served(
    database_url: str, tenant: str, upstream_api: str
) -> Iterator[tuple[str, str, ScriptedUpstream]]:
    with (
        ScriptedUpstream(responder=going_on) as upstream,
        LiveServer(
            create_app(settings_for(database_url, upstream, upstream_api=upstream_api))
        ) as live,
    ):
        yield live.url, create_key(database_url, tenant, "tests").secret, upstream


def thread(url: str, key: str, thread_id: str) -> list[tuple[str, Any]]:
    page = httpx.get(
        f"{url}/v1/threads/{thread_id}/messages", headers={"Authorization": f"Bearer {key}"}
    )
    return [(m["role"], m["content"]) for m in page.json()["data"]]


def last_sent(upstream: ScriptedUpstream) -> Any:
    """The last message (or input item) of the upstream's last request for an answer."""
    request = [r for r in upstream.requests if r.get("model") != "cheap-model"][-1]
    sent: list[Any] = request.get("messages") or request.get("input") or []
    return sent[-1]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_claude_prefill_is_gone_on_from_on_every_upstream(
    served: tuple[str, str, ScriptedUpstream], upstream_api: str, stream: bool
) -> None:
    url, key, upstream = served
    history: list[Any] = [
        {"role": "user", "content": "Who am I, as JSON?"},
        {"role": "assistant", "content": "{"},
    ]
    with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as claude:
        fields: Any = {
            "model": "answer-model",
            "max_tokens": 100,
            "messages": history,
            "extra_headers": {"X-Thread-Id": "json"},
        }
        if stream:
            with claude.messages.stream(**fields) as events:
                answer = events.get_final_message()
        else:
            answer = claude.messages.create(**fields)
        (block,) = answer.content
        assert block.type == "text"
        went_on = block.text
        assert went_on == CONTINUATION  # what came after the prefill, as Claude answers
        sent = last_sent(upstream)
        assert sent["role"] == "assistant"  # the prefill, last, in the upstream's own shape
        assert "{" in str(sent["content"])
        assert thread(url, key, "json") == [
            ("user", "Who am I, as JSON?"),
            ("assistant", "{"),
            ("assistant", CONTINUATION),
        ]
        history[-1] = {"role": "assistant", "content": "{" + went_on}  # as the SDK's examples
        history.append({"role": "user", "content": "Thanks."})
        claude.messages.create(**{**fields, "messages": history})
    assert thread(url, key, "json") == [
        ("user", "Who am I, as JSON?"),
        ("assistant", '{"name": "Ada"}'),
        ("user", "Thanks."),
        ("assistant", "Glad to help."),
    ]


def test_a_front_end_continues_an_answer_cut_short(
    served: tuple[str, str, ScriptedUpstream], upstream_api: str
) -> None:
    """Open WebUI's "continue": the whole conversation again, the partial answer last (the
    thread's newest turn already): stored once, gone on from; streamed, as it streams."""
    url, key, upstream = served
    upstream.push(Reply('{"name":', finish_reason="length"))
    asked: list[Any] = [{"role": "user", "content": "Who am I, as JSON?"}]
    thread_header = {"X-Thread-Id": "cut"}
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client:
        cut = client.chat.completions.create(
            model="answer-model", messages=asked, extra_headers=thread_header
        )
        assert cut.choices[0].finish_reason == "length"
        partial = cut.choices[0].message.content or ""
        asked.append({"role": "assistant", "content": partial})
        chunks = client.chat.completions.create(
            model="answer-model", messages=asked, extra_headers=thread_header, stream=True
        )
        went_on = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert went_on == CONTINUATION
    assert last_sent(upstream)["role"] == "assistant"
    assert thread(url, key, "cut") == [
        ("user", "Who am I, as JSON?"),
        ("assistant", '{"name":'),
        ("assistant", CONTINUATION),
    ]


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        pytest.param(
            [
                {"role": "user", "content": "Hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
            ],
            "the last message",
            id="calls-last",
        ),
        pytest.param(
            [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "One."},
                {"role": "assistant", "content": "Two."},
            ],
            "the last message",
            id="two-answers-last",
        ),
        pytest.param([{"role": "assistant", "content": "{"}], "the last message", id="alone"),
    ],
)
def test_an_assistant_message_last_that_nothing_asked_is_refused(
    served: tuple[str, str, ScriptedUpstream], messages: list[Any], said: str
) -> None:
    url, key, upstream = served
    with (
        openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client,
        pytest.raises(openai.BadRequestError) as refused,
    ):
        client.chat.completions.create(
            model="answer-model", messages=messages, extra_headers={"X-Thread-Id": "refused"}
        )
    assert said in str(refused.value)
    assert not [r for r in upstream.requests if r.get("model") != "cheap-model"]
