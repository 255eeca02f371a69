"""``POST /v1/responses/compact`` (the `openai` SDK's ``responses.compact``): a conversation's
user messages and one compaction item that the cheap model wrote, readable by every upstream;
a compaction starts where the thread's summary (or an earlier compaction) ends, and stores
nothing. Real SDK, real HTTP, the scripted upstream."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key
from .test_openai_sdk import until
from .test_responses_api import thread_of, turns

LEAD = "The conversation before this point, compacted:"
CONVERSATION: list[Any] = [
    {"role": "user", "content": "Please remember that my budget is 4,000 euros."},
    {"role": "assistant", "content": "Noted: 4,000 euros."},
    {"role": "user", "content": [{"type": "input_text", "text": "And I travel in May."}]},
    {"role": "assistant", "content": "May it is."},
]


def prompt_of(request: dict[str, Any]) -> str:
    """The text of a request's last message, in any of the three APIs' shapes."""
    last = sent_messages(request)[-1]
    content = last["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content)


def sent_messages(request: dict[str, Any]) -> list[Any]:
    """A request's messages (chat, Anthropic) or input items (Responses)."""
    return list(request.get("messages") or request.get("input") or [])


def text_of(item: Any) -> str:
    """A listed message's text: its first part's."""
    return str(item.content[0].text)


def any_api(request: dict[str, Any]) -> Reply:
    """The cheap model summarizes (`summarizing_responder`) on every API; answers say Noted."""
    if request.get("model") == "cheap-model":
        return summarizing_responder({"messages": [{"content": prompt_of(request)}]})
    return Reply("Noted.")


def helper_prompts(upstream: ScriptedUpstream) -> list[str]:
    return [prompt_of(r) for r in upstream.requests if r.get("model") == "cheap-model"]


def notes_of(item: Any) -> dict[str, Any]:
    content = item.encrypted_content
    assert content.startswith("wmc1.")
    notes: dict[str, Any] = json.loads(base64.urlsafe_b64decode(content[5:]))
    return notes


@pytest.fixture
def client(service: LiveServer, key: str, upstream: ScriptedUpstream) -> Iterator[openai.OpenAI]:
    upstream.responder = any_api
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10) as sdk:
        yield sdk


def test_a_conversation_compacts_to_its_user_messages_and_one_item(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    compacted = client.responses.compact(model="answer-model", input=CONVERSATION)

    assert compacted.object == "response.compaction"
    assert compacted.id.startswith("resp_")
    *messages, last = compacted.output
    assert [m.role for m in messages] == ["user", "user"]  # type: ignore[union-attr]
    texts = [text_of(m) for m in messages]
    assert texts == ["Please remember that my budget is 4,000 euros.", "And I travel in May."]
    assert all(m.id.startswith("msg_") and m.status == "completed" for m in messages)  # type: ignore[union-attr]
    assert last.type == "compaction"
    assert last.id.startswith("cmp_")
    notes = notes_of(last)
    assert notes["summary"] == "The conversation so far, through turn 4 (read 1-4)."
    assert "thread" not in notes  # of no stored thread
    assert notes["facts"] == ["Please remember that my budget is 4,000 euros."]
    assert compacted.usage.input_tokens > 0  # the cheap model's
    assert "[2] assistant: Noted: 4,000 euros." in helper_prompts(upstream)[-1]
    assert api.get("/v1/threads").json()["data"] == []  # nothing stored


def test_the_system_message_an_input_opens_with_is_not_compacted(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """It is the call's instructions, as for `create` (LangChain sends its system prompt so):
    the next request sends them again, and the user's words are no place for them."""
    system: Any = {"role": "system", "content": "Always answer in French."}
    compacted = client.responses.compact(model="answer-model", input=[system, *CONVERSATION])
    assert [item.type for item in compacted.output] == ["message", "message", "compaction"]
    assert "French" not in helper_prompts(upstream)[-1]
    assert notes_of(compacted.output[-1])["summary"].endswith("through turn 4 (read 1-4).")


def test_compacting_a_chain_starts_where_the_threads_summary_ends(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    def covered(turns: int) -> None:
        """Each update due (every 4 turns) has run before the thread grows again: one that ran
        late would cover the turns stored meanwhile and leave the next one not due."""
        memory = f"/v1/threads/{thread}/memory"
        done = until(lambda: api.get(memory).json()["covered_turns"] == turns)
        assert done, f"the background update never covered the {turns} turns"

    first, thread = thread_of(client, input="Please remember: my name is Ada.")
    response, _ = thread_of(client, input="I live in Lyon.", previous_response_id=first.id)
    covered(4)
    for said in ("I like trains.", "I travel in May."):
        response, _ = thread_of(client, input=said, previous_response_id=response.id)
    covered(8)
    response, _ = thread_of(client, input="I pay by card.", previous_response_id=response.id)
    read = len(helper_prompts(upstream))  # 10 turns: no update due

    compacted = client.responses.compact(model="answer-model", previous_response_id=response.id)

    notes = notes_of(compacted.output[-1])
    assert notes["summary"] == "The conversation so far, through turn 10 (read 9-10)."
    assert (notes["thread"], notes["through"]) == (thread, 10)  # the thread's turns alone
    assert notes["facts"] == ["Please remember: my name is Ada."]  # the stored summary's
    (prompt,) = helper_prompts(upstream)[read:]  # one call, over the turns after the summary
    assert "through turn 8 (read 5-8)" in prompt
    users = [text_of(m) for m in compacted.output[:-1]]
    assert users == [
        "Please remember: my name is Ada.",
        "I live in Lyon.",
        "I like trains.",
        "I travel in May.",
        "I pay by card.",
    ]
    assert compacted.output[0].id == client.responses.input_items.list(first.id).data[0].id
    assert len(turns(api, thread)) == 10  # nothing stored


def test_compacting_again_starts_from_the_compaction(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    first = client.responses.compact(model="answer-model", input=CONVERSATION)
    history = [item.model_dump(exclude_none=True, warnings=False) for item in first.output]
    later = [
        *history,
        {"role": "user", "content": "Please remember I need a window seat."},
        {"role": "assistant", "content": "A window seat."},
    ]

    again = client.responses.compact(model="answer-model", input=later)  # type: ignore[arg-type]

    notes = notes_of(again.output[-1])
    assert notes["summary"] == "The conversation so far, through turn 5 (read 4-5)."
    assert notes["facts"] == [
        "Please remember that my budget is 4,000 euros.",
        "Please remember I need a window seat.",
    ]
    assert [item.type for item in again.output] == ["message"] * 3 + ["compaction"]


@pytest.mark.parametrize("upstream_api", ["chat", "anthropic", "responses"])
def test_the_compacted_history_reads_on_every_upstream(
    upstream_api: str, database_url: str, upstream: ScriptedUpstream
) -> None:
    upstream.responder = any_api
    settings = settings_for(database_url, upstream, upstream_api=upstream_api)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, f"t-compact-{uuid.uuid4().hex}", "tests").secret
        with openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as client:
            compacted = client.responses.compact(model="answer-model", input=CONVERSATION)
            history = [
                item.model_dump(exclude_none=True, warnings=False) for item in compacted.output
            ]
            answer = client.responses.create(
                model="answer-model",
                input=[*history, {"role": "user", "content": "What is my budget?"}],  # type: ignore[list-item]
            )

    assert answer.output_text == "Noted."
    sent = [r for r in upstream.requests if r.get("model") == "answer-model"][-1]
    messages = sent_messages(sent)
    assert json.dumps(messages).count(LEAD) == 1
    assert "wmc1." not in json.dumps(sent)  # no upstream is sent what it cannot read
    text = next(prompt_of({"messages": [m]}) for m in messages if LEAD in json.dumps(m))
    assert "through turn 4" in text
    assert "- Please remember that my budget is 4,000 euros." in text
    said = next(m for m in messages if LEAD in json.dumps(m))
    assert said["role"] == "user"  # the user's words, never instructions


def test_nothing_to_compact_is_a_400_naming_input(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.compact(model="answer-model")
    assert refused.value.body["param"] == "input"  # type: ignore[index]


def test_another_tenants_response_is_not_found_like_a_missing_one(
    client: openai.OpenAI, service: LiveServer, database_url: str
) -> None:
    theirs, _ = thread_of(client, input="A secret of mine.")
    other = create_key(database_url, f"t-compact-{uuid.uuid4().hex}", "tests").secret
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=other, max_retries=0) as stranger:
        with pytest.raises(openai.NotFoundError) as hidden:
            stranger.responses.compact(model="answer-model", previous_response_id=theirs.id)
        with pytest.raises(openai.NotFoundError) as missing:
            stranger.responses.compact(model="answer-model", previous_response_id="resp_missing")
    assert hidden.value.body == {
        **missing.value.body,  # type: ignore[dict-item]
        "message": str(missing.value.body["message"]).replace("resp_missing", theirs.id),  # type: ignore[index]
    }


def test_a_cheap_model_answer_that_is_no_summary_is_a_502(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = lambda request: Reply("I cannot summarize that.")
    with pytest.raises(openai.APIStatusError) as failed:
        client.responses.compact(model="answer-model", input=CONVERSATION)
    assert failed.value.status_code == 502
    assert failed.value.body["code"] == "invalid_model_output"  # type: ignore[index]


def test_a_thread_named_by_its_header_compacts_whatever_api_wrote_it(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    thread = f"chat-{uuid.uuid4().hex}"
    header = {"X-Thread-Id": thread}
    for text in ("Please remember I am vegetarian.", "Book a table for two."):
        client.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": text}],
            extra_headers=header,
        )

    compacted = client.responses.compact(model="answer-model", extra_headers=header)

    *messages, last = compacted.output
    listed = client.conversations.items.list(thread, order="asc")
    users = [item.id for item in listed if getattr(item, "role", None) == "user"]
    assert [m.id for m in messages] == users == ["msg_wm1_0", "msg_wm3_0"]  # as listed
    assert [text_of(m) for m in messages] == [
        "Please remember I am vegetarian.",
        "Book a table for two.",
    ]
    assert notes_of(last)["facts"] == ["Please remember I am vegetarian."]
    with pytest.raises(openai.NotFoundError):
        client.responses.compact(model="answer-model", extra_headers={"X-Thread-Id": "no-such"})


def resent(compacted: Any, question: str) -> list[Any]:
    """A compaction's output as a client resends it, with its next question."""
    history = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
    return [*history, {"role": "user", "content": question}]


@pytest.mark.parametrize("named", [True, False], ids=["under-its-id", "without-an-id"])
def test_a_compacted_thread_resent_continues_it_whole(
    named: bool, client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    thread = f"kept-{uuid.uuid4().hex}"
    header = {"X-Thread-Id": thread}
    for text in ("Please remember I am vegetarian.", "Book a table for two."):
        client.responses.create(model="answer-model", input=text, extra_headers=header)
    compacted = client.responses.compact(model="answer-model", extra_headers=header)

    raw = client.responses.with_raw_response.create(
        model="answer-model",
        input=resent(compacted, "At eight?"),
        extra_headers=header if named else {},
    )

    assert raw.headers["X-Thread-Id"] == thread  # the thread the compaction stands for

    said = [(t["role"], t["content"]) for t in turns(api, thread)]
    assert said == [
        ("user", "Please remember I am vegetarian."),
        ("assistant", "Noted."),
        ("user", "Book a table for two."),
        ("assistant", "Noted."),
        ("user", "At eight?"),
        ("assistant", "Noted."),
    ]  # not edited to the compacted history: every answer stays


def test_a_compaction_naming_another_tenants_thread_continues_nothing_of_it(
    client: openai.OpenAI, service: LiveServer, database_url: str, api: httpx.Client
) -> None:
    thread = f"theirs-{uuid.uuid4().hex}"
    client.responses.create(
        model="answer-model", input="My secret is 42.", extra_headers={"X-Thread-Id": thread}
    )
    theirs = client.responses.compact(model="answer-model", extra_headers={"X-Thread-Id": thread})
    other = create_key(database_url, f"t-compact-{uuid.uuid4().hex}", "tests").secret
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=other, max_retries=0) as stranger:
        raw = stranger.responses.with_raw_response.create(
            model="answer-model", input=resent(theirs, "What is my secret?")
        )
        mine = raw.headers["X-Thread-Id"]
        with pytest.raises(openai.NotFoundError):
            stranger.conversations.items.list(thread)
    assert mine != thread
    assert len(turns(api, thread)) == 2  # theirs, untouched


def test_with_the_clients_history_the_model_reads_the_compacted_history_as_sent(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    thread = f"own-{uuid.uuid4().hex}"
    header = {"X-Thread-Id": thread}
    client.responses.create(
        model="answer-model", input="Please remember I am Ada.", extra_headers=header
    )
    compacted = client.responses.compact(model="answer-model", extra_headers=header)

    client.responses.create(
        model="answer-model",
        input=resent(compacted, "Who am I?"),
        extra_headers={**header, "X-Workingmem-History": "client"},
    )

    read = [r for r in upstream.requests if r.get("model") == "answer-model"][-1]["messages"]
    assert [m["role"] for m in read] == ["user", "user", "user"]  # as the client sent it
    assert LEAD in read[1]["content"]
    assert len(turns(api, thread)) == 4  # the thread continued, whole


def test_a_compaction_resent_after_its_thread_went_on_parts_from_it(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    """Another client went on with the thread after the compaction: the compacted history is
    the thread up to there, then its own question; it parts into a thread of its own, and
    the thread that went on is left whole."""
    thread = f"went-on-{uuid.uuid4().hex}"
    header = {"X-Thread-Id": thread}
    for text in ("Please remember I am vegetarian.", "Book a table for two."):
        client.responses.create(model="answer-model", input=text, extra_headers=header)
    compacted = client.responses.compact(model="answer-model", extra_headers=header)
    client.responses.create(model="answer-model", input="Cancel it.", extra_headers=header)

    raw = client.responses.with_raw_response.create(
        model="answer-model", input=resent(compacted, "At eight?")
    )

    assert len(turns(api, thread)) == 6  # the thread that went on, whole
    own = raw.headers["X-Thread-Id"]
    assert own != thread
    said = [t["content"] for t in turns(api, own)]
    assert said == [
        "Please remember I am vegetarian.",
        "Noted.",
        "Book a table for two.",
        "Noted.",
        "At eight?",
        "Noted.",
    ]  # the thread's turns up to the compaction, then its own


def test_what_follows_a_resent_compaction_is_new_even_when_it_says_what_the_thread_opened_with(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    thread = f"again-{uuid.uuid4().hex}"
    header = {"X-Thread-Id": thread}
    client.responses.create(model="answer-model", input="Hi.", extra_headers=header)
    compacted = client.responses.compact(model="answer-model", extra_headers=header)

    client.responses.create(model="answer-model", input=resent(compacted, "Hi."))

    assert [t["content"] for t in turns(api, thread)] == ["Hi.", "Noted.", "Hi.", "Noted."]
