"""System and developer messages in a Responses input: the call's instructions, as a chat
client's system message is, not turns of the thread; carried along a chain of
``previous_response_id``, as OpenAI carries an input's items. Real SDK, real HTTP, the
scripted upstream (a chat upstream: what it is sent shows where each text went)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from .test_responses_api import answers, client, thread_of, turns

__all__ = ["client"]  # the fixture, used by name

BRIEF: Any = {"role": "system", "content": "Be brief."}


def system_and_rest(request: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The system message the upstream got, and the messages after it."""
    first, *rest = request["messages"]
    assert first["role"] == "system"
    return first["content"], rest


def test_a_resent_history_opens_with_its_instructions_every_call(
    client: openai.OpenAI, api: httpx.Client, upstream: Any
) -> None:
    """As LangChain sends it: the system message first in every call's input. It is the
    call's system prompt (after `instructions`), never a turn, so the thread is the
    conversation alone and the resent history is found as the same thread."""
    history: list[Any] = [BRIEF, {"role": "user", "content": "Hi"}]
    first, thread = thread_of(client, input=history, instructions="You plan trips.")
    history += [
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "And?"},
    ]
    developer = {"role": "developer", "content": "Be brief."}  # the same text, either role
    _, again = thread_of(client, input=[developer, *history[1:]], instructions="You plan trips.")
    assert again == thread
    assert [(t["role"], t["content"]) for t in turns(api, thread)] == [
        ("user", "Hi"),
        ("assistant", "You said: Hi"),
        ("user", "And?"),
        ("assistant", "You said: And?"),
    ]
    (system, rest), (system_again, rest_again) = map(system_and_rest, answers(upstream)[-2:])
    assert system.startswith("You plan trips.\n\nBe brief.")
    assert system_again.startswith("You plan trips.\n\nBe brief.")
    assert "Be brief." not in str(rest) + str(rest_again)


def test_a_chain_carries_its_inputs_instructions_not_its_instructions_field(
    client: openai.OpenAI, upstream: Any
) -> None:
    """Continuing from a response, the system and developer messages of the chain's inputs
    stay the model's instructions; `instructions` themselves do not carry over (OpenAI's
    rule); a message added later in the chain joins them."""
    first = client.responses.create(
        model="answer-model",
        instructions="Only this call.",
        input=[
            {"role": "developer", "content": "Answer in French."},
            {"role": "user", "content": "Hi"},
        ],
    )
    second = client.responses.create(
        model="answer-model", previous_response_id=first.id, input="And then?"
    )
    client.responses.create(
        model="answer-model",
        previous_response_id=second.id,
        input=[BRIEF, {"role": "user", "content": "Last one."}],
    )
    systems = [system_and_rest(request)[0] for request in answers(upstream)[-3:]]
    assert systems[0].startswith("Only this call.\n\nAnswer in French.")
    assert systems[1].startswith("Answer in French.")
    assert "Only this call." not in systems[1]
    assert systems[2].startswith("Answer in French.\n\nBe brief.")


def test_an_input_of_instructions_alone_and_a_conversations_stay_items(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    """An input with nothing else is the input, as before; a conversation's system message
    is an item of it (its items list shows it, as OpenAI's does)."""
    _, thread = thread_of(client, input=[BRIEF])
    assert [t["content"] for t in turns(api, thread)][:1] == ["Be brief."]
    conversation = client.conversations.create()
    client.responses.create(
        model="answer-model",
        conversation=conversation.id,
        input=[BRIEF, {"role": "user", "content": "Hi"}],
    )
    items = client.conversations.items.list(conversation.id, order="asc")
    assert [getattr(item, "role", None) for item in items][:2] == ["system", "user"]


def test_with_the_clients_history_its_instructions_are_the_system_message(
    client: openai.OpenAI, api: httpx.Client, upstream: Any
) -> None:
    """R28 with `history: client`: the upstream gets the instructions, then the input's own
    messages, never the system message as a user's; the thread keeps the conversation."""
    _, thread = thread_of(
        client,
        input=[BRIEF, {"role": "user", "content": "Hi"}],
        instructions="You plan trips.",
        extra_headers={"X-Workingmem-History": "client"},
    )
    sent = answers(upstream)[-1]["messages"]
    assert sent == [
        {"role": "system", "content": "You plan trips.\n\nBe brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert [t["content"] for t in turns(api, thread)] == ["Hi", "You said: Hi"]


def test_a_stored_prompt_no_chat_upstream_reads_is_a_400_naming_it(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    """A prompt kept at OpenAI, by id: a chat upstream cannot read it, and answering without
    it would answer without the instructions the client chose."""
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model="answer-model", input="Plan my day.", prompt={"id": "pmpt_trip"}
        )
    assert refused.value.body["param"] == "prompt"  # type: ignore[index]
    assert "send the prompt's text as instructions" in refused.value.message
    assert api.get("/v1/threads").json()["data"] == []  # nothing stored
