"""``POST /v1/responses/input_tokens`` (the `openai` SDK's ``responses.input_tokens.count``):
the tokens `create` would send upstream now, the thread's memory included, on the thread it
would continue; nothing stored. Real SDK, real HTTP, the scripted upstream."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from .live import LiveServer, create_key
from .test_responses_api import thread_of, turns

QUESTION = "How long is this?"
LONG = "A first message, " * 20
WEATHER = {
    "type": "function",
    "name": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture
def client(service: LiveServer, key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10) as sdk:
        yield sdk


def count(client: openai.OpenAI, **request: object) -> int:
    counted = client.responses.input_tokens.count(model="answer-model", **request)  # type: ignore[arg-type]
    assert counted.object == "response.input_tokens"
    return counted.input_tokens


def test_the_count_has_the_threads_memory_and_stores_nothing(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    header = {"X-Thread-Id": "counted"}
    alone = count(client, input=QUESTION, extra_headers=header)
    assert alone > 0
    assert api.get("/v1/threads/counted/messages").status_code == 404  # nothing stored
    client.responses.create(model="answer-model", input=LONG, extra_headers=header)
    later = count(client, input=QUESTION, tools=[WEATHER], extra_headers=header)
    assert later > alone + 40  # the thread's memory and the tool are in it
    assert len(turns(api, "counted")) == 2


@pytest.mark.parametrize("how", ["previous_response_id", "conversation"])
def test_the_count_continues_the_thread_create_would(how: str, client: openai.OpenAI) -> None:
    alone = count(client, input=QUESTION)
    if how == "previous_response_id":
        first, _ = thread_of(client, input=LONG)
        continues = {"previous_response_id": first.id}
    else:
        conversation = client.conversations.create(items=[{"role": "user", "content": LONG}])
        continues = {"conversation": conversation.id}
    assert count(client, input=QUESTION, **continues) > alone + 40
    assert count(client, **continues) > 40  # no input: the thread's memory alone


def test_an_item_reference_counts_the_item_it_names(client: openai.OpenAI) -> None:
    first, _ = thread_of(client, input=LONG)
    previous = {"previous_response_id": first.id}
    plain = count(client, input=QUESTION, **previous)
    item = client.responses.input_items.list(first.id).data[0]
    referenced = [{"type": "item_reference", "id": item.id}, {"role": "user", "content": QUESTION}]
    assert count(client, input=referenced, **previous) > plain + 40


def test_another_tenants_response_is_not_found_like_a_missing_one(
    client: openai.OpenAI, service: LiveServer, database_url: str
) -> None:
    theirs, _ = thread_of(client, input=LONG)
    other = create_key(database_url, "t-count-other", "tests").secret
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=other, max_retries=0) as stranger:
        with pytest.raises(openai.NotFoundError) as hidden:
            count(stranger, input=QUESTION, previous_response_id=theirs.id)
        with pytest.raises(openai.NotFoundError) as missing:
            count(stranger, input=QUESTION, previous_response_id="resp_missing")
    assert hidden.value.body == {
        **missing.value.body,  # type: ignore[dict-item]
        "message": str(missing.value.body["message"]).replace("resp_missing", theirs.id),  # type: ignore[index]
    }


def test_what_create_refuses_the_count_refuses(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as hosted:
        count(client, input=QUESTION, tools=[{"type": "web_search"}])
    assert hosted.value.body["param"] == "tools[0].type"  # type: ignore[index]
    first, _ = thread_of(client, input=LONG)
    conversation = client.conversations.create()
    with pytest.raises(openai.BadRequestError) as both:
        count(client, input=QUESTION, previous_response_id=first.id, conversation=conversation.id)
    assert both.value.body["param"] == "previous_response_id"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as nothing:
        count(client)
    assert nothing.value.body["param"] == "input"  # type: ignore[index]


def test_the_count_through_every_kind_of_upstream(served: openai.OpenAI) -> None:
    """An Anthropic upstream counts with Claude's own count; the others with the tokenizer."""
    counted = served.responses.input_tokens.count(model="answer-model", input=QUESTION)
    assert counted.input_tokens > 0
