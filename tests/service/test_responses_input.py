"""A Responses request's input when it continues a response or a conversation: new items only
(OpenAI's contract), even where they repeat what the thread holds, and ``item_reference``
items, which stand for an item of that thread, else for the tenant's item wherever it is (a
request that names no thread: a client that resends its history with references to the answers
it was given, as the AI SDK does). Real SDK, real HTTP, the scripted upstream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from workingmem.llm.testing import ScriptedUpstream

from .live import LiveServer, create_key
from .test_responses_api import answers, thread_of, turns


@pytest.fixture
def client(service: LiveServer, key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10) as sdk:
        yield sdk


def sent(upstream: ScriptedUpstream) -> list[tuple[str, Any]]:
    """What the model was last given, after the system message: (role, content)."""
    return [(m["role"], m["content"]) for m in answers(upstream)[-1]["messages"][1:]]


def continuing(client: openai.OpenAI, how: str) -> tuple[dict[str, Any], str]:
    """A thread of one exchange ("Hi." and its answer), and how a request continues it."""
    if how == "previous_response_id":
        first, thread = thread_of(client, input="Hi.")
        return {"previous_response_id": first.id}, thread
    conversation = client.conversations.create()
    thread_of(client, input="Hi.", conversation=conversation.id)
    return {"conversation": conversation.id}, conversation.id


@pytest.mark.parametrize("how", ["previous_response_id", "conversation"])
def test_input_that_repeats_the_threads_first_message_is_new_not_an_edit(
    how: str, client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    continues, thread = continuing(client, how)
    # a chat client resending [Hi.] would regenerate the first answer; this input is new
    again, _ = thread_of(client, input="Hi.", **continues)
    assert sent(upstream) == [("user", "Hi."), ("assistant", "You said: Hi."), ("user", "Hi.")]
    later = (
        {**continues, "previous_response_id": again.id}
        if "previous_response_id" in continues
        else continues
    )
    thread_of(
        client,
        input=[{"role": "user", "content": "Hi."}, {"role": "user", "content": "Bye."}],
        **later,
    )
    assert [t["content"] for t in turns(api, thread)] == [
        "Hi.",
        "You said: Hi.",
        "Hi.",
        "You said: Hi.",
        "Hi.",
        "Bye.",
        "You said: Bye.",
    ]


def test_an_item_reference_is_the_item_it_names_with_or_without_its_type(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    first, thread = thread_of(client, input="My name is Ada.")
    question = client.responses.input_items.list(first.id).data[0].id
    answer = first.output[0].id
    assert answer is not None
    second, _ = thread_of(
        client,
        previous_response_id=first.id,
        input=[{"type": "item_reference", "id": question}, {"role": "user", "content": "Again?"}],
    )
    assert sent(upstream)[-2:] == [("user", "My name is Ada."), ("user", "Again?")]
    # OpenAI's types leave the type out: {"id": ...} alone is a reference
    untyped: Any = [{"id": answer}, {"role": "user", "content": "And?"}]
    thread_of(client, previous_response_id=second.id, input=untyped)
    assert sent(upstream)[-2:] == [("assistant", "You said: My name is Ada."), ("user", "And?")]
    assert [t["content"] for t in turns(api, thread)][-3:] == [
        "You said: My name is Ada.",
        "And?",
        "You said: And?",
    ]


def test_a_conversations_items_may_name_its_items_by_reference(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    conversation = client.conversations.create(
        items=[{"role": "user", "content": "I live in Lyon."}]
    )
    lyon = client.conversations.items.list(conversation.id).data[0].id
    reference: Any = [{"type": "item_reference", "id": lyon}]
    added = client.conversations.items.create(conversation.id, items=reference)
    assert added.data[0].id != lyon
    assert added.model_dump()["data"][0]["content"][0]["text"] == "I live in Lyon."
    thread_of(client, conversation=conversation.id, input="Where?")
    assert sent(upstream) == [
        ("user", "I live in Lyon."),
        ("user", "I live in Lyon."),
        ("user", "Where?"),
    ]


def test_a_reference_to_an_item_the_thread_lacks_is_not_found_and_stores_nothing(
    client: openai.OpenAI, service: LiveServer, database_url: str, api: httpx.Client
) -> None:
    first, thread = thread_of(client, input="Mine.")
    answer = first.output[0].id
    assert answer is not None
    missing: Any = [{"type": "item_reference", "id": "msg_nope"}, {"role": "user", "content": "?"}]
    with pytest.raises(openai.NotFoundError) as nope:
        client.responses.create(model="answer-model", previous_response_id=first.id, input=missing)
    empty: Any = [{"type": "item_reference", "id": ""}, {"role": "user", "content": "?"}]
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="answer-model", previous_response_id=first.id, input=empty)
    assert bad.value.response.json()["error"]["param"] == "input[0].id"
    assert len(turns(api, thread)) == 2
    fresh: Any = [{"type": "item_reference", "id": answer}, {"role": "user", "content": "?"}]
    other = create_key(database_url, "someone-else", "tests").secret
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=other, max_retries=0) as stranger:
        theirs = stranger.conversations.create()
        with pytest.raises(openai.NotFoundError) as foreign:
            stranger.responses.create(model="answer-model", conversation=theirs.id, input=fresh)
        with pytest.raises(openai.NotFoundError):
            stranger.conversations.items.create(
                theirs.id, items=[{"type": "item_reference", "id": answer}]
            )
        with pytest.raises(openai.NotFoundError):  # naming no thread: the tenant's items only
            stranger.responses.create(model="answer-model", input=fresh)
        assert stranger.conversations.items.list(theirs.id).data == []
    # another tenant's item reads exactly as a missing one
    assert (
        foreign.value.response.json()["error"]["code"]
        == nope.value.response.json()["error"]["code"]
    )
    assert foreign.value.message == nope.value.message.replace("msg_nope", answer)


def test_a_history_resent_with_references_to_its_answers_continues_its_thread(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """The AI SDK on the Responses API, with no thread id: it resends the conversation, each
    answer it was given as a reference to the stored item."""
    history: list[Any] = [{"role": "user", "content": "I live in Lyon."}]
    first, thread = thread_of(client, input=history)
    for question in ("I am Ada.", "Where do I live?"):
        history += [{"type": "item_reference", "id": item.id} for item in first.output] + [
            {"role": "user", "content": question}
        ]
        first, again = thread_of(client, input=history)
        assert again == thread

    assert sent(upstream)[-3:] == [
        ("user", "I am Ada."),
        ("assistant", "You said: I am Ada."),
        ("user", "Where do I live?"),
    ]
    assert [t["content"] for t in turns(api, thread)] == [
        "I live in Lyon.",
        "You said: I live in Lyon.",
        "I am Ada.",
        "You said: I am Ada.",
        "Where do I live?",
        "You said: Where do I live?",
    ]


def test_a_reference_names_an_item_of_another_thread_of_the_tenant(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    elsewhere, _ = thread_of(client, input="My budget is 4,000 euros.")
    budget = elsewhere.output[0].id
    _, thread = thread_of(client, input="Plan a trip.", extra_headers={"X-Thread-Id": "trip"})

    reference: Any = [{"type": "item_reference", "id": budget}, {"role": "user", "content": "Ok?"}]
    thread_of(client, input=reference, extra_headers={"X-Thread-Id": "trip"})

    assert sent(upstream)[-2:] == [
        ("assistant", "You said: My budget is 4,000 euros."),
        ("user", "Ok?"),
    ]
    assert [t["content"] for t in turns(api, thread)][-3:] == [
        "You said: My budget is 4,000 euros.",
        "Ok?",
        "You said: Ok?",
    ]


def test_a_reference_to_an_item_with_a_nul_in_its_text_is_found_in_its_thread(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """PostgreSQL's JSON operators refuse the text's escape; its index holds the item all the
    same."""
    own: Any = [{"id": "msg_own", "type": "message", "role": "user", "content": "nul \u0000 here"}]
    thread_of(client, input=own, extra_headers={"X-Thread-Id": "nul"})

    again: Any = [{"type": "item_reference", "id": "msg_own"}, {"role": "user", "content": "?"}]
    thread_of(client, input=again, extra_headers={"X-Thread-Id": "nul"})

    assert sent(upstream)[-2:] == [("user", "nul \u0000 here"), ("user", "?")]


def test_the_document_says_an_untyped_item_with_a_role_is_no_reference(
    api: httpx.Client,
) -> None:
    """An item without its type is a reference only without a role (a message has one): the
    published schema says what the server does, so that no client builds the other."""
    document = api.get("/openapi.json").json()
    schema = {**document["components"]["schemas"]["ItemReferenceItem"], **document}
    jsonschema.validate({"id": "msg_1"}, schema)
    jsonschema.validate({"type": "item_reference", "id": "msg_1", "role": "user"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": "msg_1", "role": {"any": "thing"}}, schema)
