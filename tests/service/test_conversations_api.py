"""``/v1/conversations`` with the `openai` SDK: a conversation is a thread; its items are its
turns, verbatim, listed with ids that retrieve, page and delete them; ``responses.create`` with
``conversation`` continues it with the memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

from .live import LiveServer, create_key
from .test_responses_api import WEATHER, answers, turns, upstream_model


@pytest.fixture
def client(service: LiveServer, key: str, upstream: ScriptedUpstream) -> Iterator[openai.OpenAI]:
    upstream.responder = upstream_model
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10) as sdk:
        yield sdk


def idof(item: Any) -> str:
    """An item's id (every listed item has one; the SDK's types allow None for some kinds)."""
    assert isinstance(item.id, str)
    return item.id


def texts(items: Any) -> list[str]:
    """What each listed item says: a message's text, a call's name, an output's output."""
    said = []
    for item in items:
        if item.type == "message":
            said.append(" ".join(part.text for part in item.content))
        elif item.type == "function_call":
            said.append(f"call {item.name}")
        else:
            said.append(f"output {item.output}")
    return said


def test_a_conversation_with_items_added_is_answered_with_them(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    conversation = client.conversations.create(
        items=[{"role": "user", "content": "My name is Ada."}], metadata={"topic": "intro"}
    )
    assert conversation.id.startswith("conv_")
    assert conversation.metadata == {"topic": "intro"}
    added = client.conversations.items.create(
        conversation.id,
        items=[
            {"role": "assistant", "content": "Hello Ada."},
            {"role": "user", "content": "I live in Lyon."},
        ],
    )
    assert texts(added.data) == ["Hello Ada.", "I live in Lyon."]
    answer = client.responses.create(
        model="answer-model", input="Where do I live?", conversation=conversation.id
    )
    assert answer.conversation is not None
    assert answer.conversation.id == conversation.id
    sent = [m["content"] for m in answers(upstream)[-1]["messages"] if m["role"] != "system"]
    assert sent == [
        "My name is Ada.",
        "Hello Ada.",
        "I live in Lyon.",
        "Where do I live?",
    ]
    listed = list(client.conversations.items.list(conversation.id, order="asc"))
    assert texts(listed) == [*sent, "You said: Where do I live?"]
    assert listed[-1].id == answer.output[0].id  # the answer's item, under the id it was shown
    assert len({item.id for item in listed}) == len(listed)
    newest_first = client.conversations.items.list(conversation.id, limit=2).data
    assert [i.id for i in newest_first] == [listed[-1].id, listed[-2].id]
    assert len(turns(api, conversation.id)) == 5


def test_items_page_retrieve_and_delete(client: openai.OpenAI, api: httpx.Client) -> None:
    items: Any = [{"role": "user", "content": f"note {n}"} for n in range(7)]
    conversation = client.conversations.create(items=items)
    page = client.conversations.items.list(conversation.id, order="asc", limit=3)
    assert texts(page.data) == ["note 0", "note 1", "note 2"]
    assert page.has_more
    assert texts(list(client.conversations.items.list(conversation.id, order="asc", limit=3))) == [
        f"note {n}" for n in range(7)
    ]  # the SDK's paging follows `after`
    later = client.conversations.items.list(conversation.id, order="desc", after=idof(page.data[1]))
    assert texts(later.data) == ["note 0"]
    one = client.conversations.items.retrieve(idof(page.data[2]), conversation_id=conversation.id)
    assert texts([one]) == ["note 2"]
    client.conversations.items.delete(idof(page.data[2]), conversation_id=conversation.id)
    assert [m["content"] for m in turns(api, conversation.id)] == [
        f"note {n}" for n in (0, 1, 3, 4, 5, 6)
    ]
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve("msg_nothing", conversation_id=conversation.id)


def test_deleting_a_call_leaves_its_output_as_an_item_of_its_own(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    asked = client.responses.create(model="answer-model", input="weather in Lyon?", tools=[WEATHER])
    conversation = client.conversations.create()
    call = asked.output[0]
    assert call.type == "function_call"
    client.conversations.items.create(
        conversation.id,
        items=[
            {"role": "user", "content": "weather in Lyon?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
    )
    listed = list(client.conversations.items.list(conversation.id, order="asc"))
    assert texts(listed) == ["weather in Lyon?", "call get_weather", "output sunny"]
    client.conversations.items.delete(idof(listed[1]), conversation_id=conversation.id)
    assert [m["role"] for m in turns(api, conversation.id)] == ["user", "user"]
    remaining = list(client.conversations.items.list(conversation.id, order="asc"))
    assert texts(remaining) == ["weather in Lyon?", "output sunny"]  # kept, verbatim


def test_the_gateways_own_memory_rounds_are_not_items(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """R30: the round in which the model saved to the working memory is stored in the thread,
    but it is not the client's: not listed, not found by a position id, and still hidden after
    an item before it is deleted."""
    conversation = client.conversations.create(items=[{"role": "user", "content": "Hello."}])
    upstream.push(
        Reply(None, tool_calls=[tool_call("update_working_memory", {"content": "- Ada\n"})]),
        Reply("Saved."),
    )
    answer = client.responses.create(
        model="answer-model", input="My name is Ada.", conversation=conversation.id
    )
    assert [m["role"] for m in turns(api, conversation.id)] == [
        "user",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    listed = list(client.conversations.items.list(conversation.id, order="asc"))
    assert texts(listed) == ["Hello.", "My name is Ada.", "Saved."]
    newest = list(client.conversations.items.list(conversation.id, order="desc", limit=1))
    assert texts(newest) == ["Saved.", "My name is Ada.", "Hello."]
    inputs = client.responses.input_items.list(answer.id, order="asc")
    assert texts(inputs.data) == ["My name is Ada."]  # this request's input
    for hidden in ("fc_wm3_0", "fco_wm4_0"):
        with pytest.raises(openai.NotFoundError):
            client.conversations.items.retrieve(hidden, conversation_id=conversation.id)
    client.conversations.items.delete(idof(listed[0]), conversation_id=conversation.id)
    remaining = list(client.conversations.items.list(conversation.id, order="asc"))
    assert texts(remaining) == ["My name is Ada.", "Saved."]


def test_update_and_delete_a_conversation(client: openai.OpenAI, api: httpx.Client) -> None:
    conversation = client.conversations.create(items=[{"role": "user", "content": "Hi"}])
    updated = client.conversations.update(conversation.id, metadata={"a": "b"})
    assert updated.metadata == {"a": "b"}
    assert client.conversations.retrieve(conversation.id).metadata == {"a": "b"}
    deleted = client.conversations.delete(conversation.id)
    assert deleted.deleted
    assert deleted.id == conversation.id
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conversation.id)
    assert api.get(f"/v1/threads/{conversation.id}/messages").status_code == 404


def test_every_thread_is_a_conversation(client: openai.OpenAI) -> None:
    client.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "via chat"}],
        extra_headers={"X-Thread-Id": "chat-thread"},
    )
    assert client.conversations.retrieve("chat-thread").metadata == {}
    listed = list(client.conversations.items.list("chat-thread", order="asc"))
    assert texts(listed) == ["via chat", "You said: via chat"]


def test_another_tenants_conversation_is_not_found(
    client: openai.OpenAI, service: LiveServer, database_url: str
) -> None:
    conversation = client.conversations.create(items=[{"role": "user", "content": "secret"}])
    item = client.conversations.items.list(conversation.id).data[0]
    other = create_key(database_url, "another-tenant", "tests").secret
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=other, max_retries=0) as stranger:
        for attempt in (
            lambda: stranger.conversations.retrieve(conversation.id),
            lambda: stranger.conversations.update(conversation.id, metadata={"x": "y"}),
            lambda: stranger.conversations.items.list(conversation.id),
            lambda: stranger.conversations.items.retrieve(
                idof(item), conversation_id=conversation.id
            ),
            lambda: stranger.conversations.items.delete(
                idof(item), conversation_id=conversation.id
            ),
            lambda: stranger.conversations.items.create(
                conversation.id, items=[{"role": "user", "content": "x"}]
            ),
            lambda: stranger.conversations.delete(conversation.id),
            lambda: stranger.responses.create(
                model="answer-model", input="x", conversation=conversation.id
            ),
        ):
            with pytest.raises(openai.NotFoundError):
                attempt()
    assert texts(client.conversations.items.list(conversation.id).data) == ["secret"]
