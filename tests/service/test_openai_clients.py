"""The chat endpoint as the `openai` SDK's users really call it: the whole history resent on
every call, client-side tools, streaming tool calls, structured outputs, a regenerate, an edit,
every request parameter forwarded. Real SDK, real HTTP, the scripted upstream behind."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel

import workingmem as wm
from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key
from .test_openai_sdk import until

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


CALL_IDS = itertools.count()


def agent_upstream(request: dict[str, Any]) -> Reply:
    """A model with a weather tool: a question about the weather gets a call, a tool result
    an answer that uses it, anything else an echo."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    last = request["messages"][-1]
    if last["role"] == "tool":
        return Reply(f"It is {last['content']} there.")
    text = last["content"] if isinstance(last["content"], str) else ""
    if "weather" in text:  # each call an id of its own, as a real model gives
        call_id = f"call_{next(CALL_IDS)}"
        return Reply(None, tool_calls=[tool_call("get_weather", {"city": "Lyon"}, id=call_id)])
    if "json" in text:
        return Reply('{"city": "Lyon", "celsius": 21}')
    return Reply(f"You said: {text}")


def answer_requests(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


@pytest.fixture
def client(service: LiveServer, key: str, upstream: ScriptedUpstream) -> Iterator[openai.OpenAI]:
    upstream.responder = agent_upstream
    with openai.OpenAI(
        base_url=f"{service.url}/v1",
        api_key=key,
        max_retries=0,
        timeout=10,
        default_headers={"X-Thread-Id": "agent"},
    ) as sdk:
        yield sdk


def stored(api: httpx.Client, thread: str = "agent") -> list[dict[str, Any]]:
    """The thread's turns, read back over the REST API."""
    page = api.get(f"/v1/threads/{thread}/messages", params={"limit": 100})
    assert page.status_code == 200, page.text
    return list(page.json()["data"])


def run_tool(call: Any) -> str:
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Lyon"}
    return "sunny, 21 C"


def agent_turn(client: openai.OpenAI, history: list[ChatCompletionMessageParam], text: str) -> str:
    """One turn of a client-side agent loop, resending the whole history each call."""
    history.append({"role": "user", "content": text})
    while True:
        answer = client.chat.completions.create(
            model="answer-model", messages=history, tools=[WEATHER_TOOL]
        )
        message = answer.choices[0].message
        history.append(message.model_dump(exclude_none=True))  # type: ignore[arg-type]
        if not message.tool_calls:
            assert answer.choices[0].finish_reason == "stop"
            return message.content or ""
        assert answer.choices[0].finish_reason == "tool_calls"
        for call in message.tool_calls:
            assert call.type == "function"
            history.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call)})


def test_a_client_tool_loop_resending_its_history_stores_each_turn_once(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    history: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are a weather bot."}
    ]
    assert agent_turn(client, history, "Hi") == "You said: Hi"
    assert agent_turn(client, history, "What is the weather in Lyon?") == (
        "It is sunny, 21 C there."
    )
    assert agent_turn(client, history, "And the weather tomorrow?") == "It is sunny, 21 C there."
    assert agent_turn(client, history, "Thanks") == "You said: Thanks"
    # every turn once, in the client's order, the tool units whole
    roles = [m["role"] for m in stored(api)]
    assert roles == ["user", "assistant"] + ["user", "assistant", "tool", "assistant"] * 2 + [
        "user",
        "assistant",
    ]
    assert [m["role"] for m in history[1:]] == roles
    requests = answer_requests(upstream)
    assert all(WEATHER_TOOL in r["tools"] for r in requests)  # the client's tool, as sent
    after_tool = requests[2]  # the call's result reached the model, right after its call
    call_id = after_tool["messages"][-2]["tool_calls"][0]["id"]
    assert after_tool["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": "sunny, 21 C",
    }
    assert after_tool["messages"][0]["content"].startswith("You are a weather bot.")


def test_streamed_tool_calls_reach_the_client_and_are_stored(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    stream = client.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "What is the weather?"}],
        tools=[WEATHER_TOOL],
        stream=True,
    )
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in stream:
        for delta_call in chunk.choices[0].delta.tool_calls or () if chunk.choices else ():
            slot = calls.setdefault(delta_call.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] += delta_call.id or ""
            if delta_call.function is not None:
                slot["name"] += delta_call.function.name or ""
                slot["arguments"] += delta_call.function.arguments or ""
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    assert finish == "tool_calls"
    assert list(calls) == [0]
    assert (calls[0]["name"], calls[0]["arguments"]) == ("get_weather", '{"city": "Lyon"}')
    assert stored(api)[-1]["tool_calls"][0]["id"] == calls[0]["id"]


def made_up_call(request: dict[str, Any]) -> Reply:
    """A model that calls a tool it was not offered (a weaker model makes names up), then
    answers the client's error result."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return Reply(f"Sorry: {last['content']}")
    return Reply("Let me look.", tool_calls=[tool_call("bash", {"cmd": "ls"}, id="call_bash")])


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_of_a_tool_never_offered_reaches_the_client(
    stream: bool, client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """As from the model directly: the client gets the call and answers it (agents answer an
    unknown tool with an error), where an empty answer would leave it nothing to act on."""
    upstream.responder = made_up_call
    history: list[ChatCompletionMessageParam] = [{"role": "user", "content": "List files."}]
    if stream:
        chunks = list(
            client.chat.completions.create(
                model="answer-model", messages=history, tools=[WEATHER_TOOL], stream=True
            )
        )
        calls = [c for chunk in chunks for c in chunk.choices[0].delta.tool_calls or ()]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        assert [(c.id, c.function and c.function.name) for c in calls] == [("call_bash", "bash")]
    else:
        answer = client.chat.completions.create(
            model="answer-model", messages=history, tools=[WEATHER_TOOL]
        )
        assert answer.choices[0].finish_reason == "tool_calls"
        message = answer.choices[0].message
        assert message.content == "Let me look."
        assert [
            (c.id, c.type == "function" and c.function.name) for c in message.tool_calls or ()
        ] == [("call_bash", "bash")]
    history += [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_bash",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_bash", "content": "no tool named bash"},
    ]
    again = client.chat.completions.create(
        model="answer-model", messages=history, tools=[WEATHER_TOOL]
    )
    assert again.choices[0].message.content == "Sorry: no tool named bash"
    assert [(m["role"], m["content"]) for m in stored(api)] == [
        ("user", "List files."),
        ("assistant", "Let me look."),
        ("tool", "no tool named bash"),
        ("assistant", "Sorry: no tool named bash"),
    ]


@pytest.mark.parametrize(
    ("call_fields", "result_fields"),
    [
        pytest.param({"index": 0}, {}, id="a-call-with-its-stream-index"),  # Mistral's too
        pytest.param(
            {"extra_content": {"google": {"thought_signature": "c2ln"}}}, {}, id="gemini-extra"
        ),
        pytest.param({}, {"name": "get_weather"}, id="a-result-with-its-tool-name"),
    ],
)
def test_the_fields_other_servers_give_a_call_are_taken_when_resent(
    call_fields: dict[str, Any],
    result_fields: dict[str, Any],
    client: openai.OpenAI,
    api: httpx.Client,
) -> None:
    """What another OpenAI-compatible server puts on a tool call (and a client on its result)
    comes back in a resent history: taken, not stored, so the thread holds the unit once."""
    call = {
        "id": "call_x",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
        **call_fields,
    }
    history: Any = [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_x", "content": "sunny", **result_fields},
    ]
    answer = client.chat.completions.create(
        model="answer-model", messages=history, tools=[WEATHER_TOOL]
    )
    assert answer.choices[0].message.content == "It is sunny there."
    turns = stored(api)
    assert [t["role"] for t in turns] == ["user", "assistant", "tool", "assistant"]
    assert turns[1]["tool_calls"] == [
        {
            "id": "call_x",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
        }
    ]


class Weather(BaseModel):
    city: str
    celsius: int


def test_structured_outputs_parse_with_a_pydantic_model(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    parsed = client.chat.completions.parse(
        model="answer-model",
        messages=[{"role": "user", "content": "Lyon as json, please"}],
        response_format=Weather,
    )
    assert parsed.choices[0].message.parsed == Weather(city="Lyon", celsius=21)
    sent = answer_requests(upstream)[-1]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Weather"


def test_a_regenerate_replaces_the_last_answer(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    history: list[ChatCompletionMessageParam] = []
    agent_turn(client, history, "one")
    agent_turn(client, history, "two")
    upstream.responder = lambda request: Reply("a better two")
    again = client.chat.completions.create(model="answer-model", messages=history[:-1])
    assert again.choices[0].message.content == "a better two"
    assert [m["content"] for m in stored(api)] == ["one", "You said: one", "two", "a better two"]


def test_an_edit_replaces_the_thread_from_the_edited_turn_and_rolls_the_summary_back(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    history: list[ChatCompletionMessageParam] = []
    for text in ["please remember: tea", "b", "c", "d"]:
        agent_turn(client, history, text)
    # An update is due once the thread grew by 4 turns since the summary the request was built
    # with, and runs in the background, reading what is stored when it runs: the summary ends
    # covering 5 to 8 turns, depending on when the update after the second exchange ran
    # against the third (5: it read the third question before its answer was stored; then
    # nothing is due again). Any of them is past the 4 the edit keeps: it must roll back.
    covered = until(lambda: api.get("/v1/threads/agent/memory").json()["covered_turns"] > 4)
    assert covered, "the summary was never written"
    edited: list[ChatCompletionMessageParam] = [
        *history[:4],
        {"role": "user", "content": "c, edited"},
    ]
    answer = client.chat.completions.create(model="answer-model", messages=edited)
    assert answer.choices[0].message.content == "You said: c, edited"
    assert [m["content"] for m in stored(api)] == [
        "please remember: tea",
        "You said: please remember: tea",
        "b",
        "You said: b",
        "c, edited",
        "You said: c, edited",
    ]
    memory = api.get("/v1/threads/agent/memory").json()
    # rolled back with the removed turns: it covers only the four kept before the edit
    assert memory["covered_turns"] <= 4
    assert all(v["turn_count"] <= 4 for v in memory["summary_versions"])


def test_every_parameter_reaches_the_upstream_and_every_choice_the_client(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = lambda request: Reply(
        "first", more_choices=["second"], extra={"system_fingerprint": "fp_1"}
    )
    answer = client.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "hello"}],
        n=2,
        temperature=0.3,
        top_p=0.9,
        stop=["\n\n"],
        seed=7,
        logit_bias={"1734": -5},
        presence_penalty=0.1,
        frequency_penalty=0.2,
        max_completion_tokens=300,
        user="ada",
        metadata={"app": "tests"},
        parallel_tool_calls=False,
        extra_body={"top_k": 40},
    )
    assert [c.message.content for c in answer.choices] == ["first", "second"]
    assert answer.system_fingerprint == "fp_1"
    sent = answer_requests(upstream)[-1]
    for name, value in {
        "n": 2,
        "temperature": 0.3,
        "top_p": 0.9,
        "stop": ["\n\n"],
        "seed": 7,
        "logit_bias": {"1734": -5},
        "presence_penalty": 0.1,
        "frequency_penalty": 0.2,
        "user": "ada",
        "metadata": {"app": "tests"},
        "parallel_tool_calls": False,
        "top_k": 40,
    }.items():
        assert sent[name] == value, name
    assert sent["max_tokens"] == 300  # the output reserve, as the upstream's cap


def test_the_thread_can_be_named_in_metadata(
    service: LiveServer, key: str, upstream: ScriptedUpstream
) -> None:
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0) as sdk:
        raw = sdk.chat.completions.with_raw_response.create(
            model="answer-model",
            messages=[{"role": "user", "content": "hi"}],
            metadata={"thread_id": "from-metadata"},
        )
        sdk.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": "hi"}],
            metadata={"thread_id": "from-metadata", "app": "tests"},
        )
    assert raw.headers["X-Thread-Id"] == "from-metadata"
    first, second = answer_requests(upstream)[-2:]
    assert "metadata" not in first  # the gateway's own key is not the upstream's
    assert second["metadata"] == {"app": "tests"}


def test_a_client_tool_named_like_the_gateways_own_is_refused(client: openai.OpenAI) -> None:
    tool: Any = {**WEATHER_TOOL, "function": {"name": "update_working_memory"}}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="answer-model", messages=[{"role": "user", "content": "hi"}], tools=[tool]
        )
    assert "the gateway's own" in caught.value.message


def chat(sdk: openai.OpenAI, history: list[ChatCompletionMessageParam], text: str) -> str:
    """One turn of a chat front end that names no thread and resends the whole history; the
    thread the gateway found, as its response says."""
    history.append({"role": "user", "content": text})
    raw = sdk.chat.completions.with_raw_response.create(model="answer-model", messages=history)
    answer = raw.parse().choices[0].message.content or ""
    history.append({"role": "assistant", "content": answer})
    return raw.headers["X-Thread-Id"]


def test_conversations_found_without_an_id_never_mix(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Two chats that open with the same words: the second does not extend the first's
    thread (it has its own answer to come), so it forks it where they part, and each goes on
    in a thread of its own; neither ever sees the other's later turns."""
    upstream.responder = agent_upstream
    ada: list[ChatCompletionMessageParam] = [{"role": "system", "content": "Be brief."}]
    bob: list[ChatCompletionMessageParam] = [{"role": "system", "content": "Be brief."}]
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0) as sdk:
        ada_thread, bob_thread = chat(sdk, ada, "Hi"), chat(sdk, bob, "Hi")
        assert chat(sdk, ada, "I am Ada") == ada_thread
        assert chat(sdk, bob, "I am Bob") == bob_thread
        for _ in range(2):
            assert chat(sdk, ada, "Who am I?") == ada_thread
            assert chat(sdk, bob, "Who am I?") == bob_thread
    assert ada_thread != bob_thread
    assert bob_thread == f"{ada_thread}-1"  # a fork of the family that opens so
    ada_text = json.dumps([m["content"] for m in stored(api, ada_thread)])
    bob_text = json.dumps([m["content"] for m in stored(api, bob_thread)])
    assert "Ada" in ada_text
    assert "Bob" not in ada_text
    assert "Bob" in bob_text
    assert "Ada" not in bob_text
    assert len(stored(api, ada_thread)) == len(ada) - 1 == len(stored(api, bob_thread))
    for request in answer_requests(upstream)[2:]:
        sent = json.dumps(request["messages"])
        assert not ("Ada" in sent and "Bob" in sent)  # never the other's turns


def test_a_new_conversation_without_an_id_is_a_new_thread(
    service: LiveServer, key: str, upstream: ScriptedUpstream
) -> None:
    upstream.responder = agent_upstream
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0) as sdk:
        first = chat(sdk, [], "A first question")
        other = chat(sdk, [], "Another first question")
    assert first != other
    assert first.startswith("conv-")


def test_the_models_a_request_may_name_are_listed(client: openai.OpenAI) -> None:
    listed = {model.id: model.owned_by for model in client.models.list()}
    assert listed == {
        "default": "workingmem",
        "support": "workingmem",
        "answer-model": "upstream",
        "cheap-model": "upstream",
    }
    assert client.models.retrieve("support").owned_by == "workingmem"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def memory_and_weather(request: dict[str, Any]) -> Reply:
    """A model that writes its agent memory (the gateway's tool) before it calls the client's
    weather tool: in a round of its own on the first question, in the same answer on the
    second."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    last = request["messages"][-1]
    memory = tool_call("update_working_memory", {"content": "# User\n- Name: Ada\n"}, id="m1")
    weather = tool_call("get_weather", {"city": "Lyon"}, id="w1")
    if last["role"] == "tool":
        if last["tool_call_id"].startswith("m"):
            return Reply(None, tool_calls=[weather])
        return Reply(f"It is {last['content']}.")
    if last["content"] == "Weather?":
        return Reply("Noting your name.", tool_calls=[memory])
    if last["content"] == "Weather again?":
        both = [{**memory, "id": "m2"}, {**weather, "id": "w2"}]
        return Reply("Checking.", tool_calls=both)
    return Reply(f"You said: {last['content']}")


def test_the_gateways_own_tool_rounds_stay_on_the_server(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    upstream.responder = memory_and_weather
    history: list[ChatCompletionMessageParam] = []
    assert agent_turn(client, history, "Weather?") == "It is sunny, 21 C."
    assert agent_turn(client, history, "Weather again?") == "It is sunny, 21 C."
    assert agent_turn(client, history, "Thanks") == "You said: Thanks"
    seen = json.dumps(history)
    assert "update_working_memory" not in seen  # the client never saw the gateway's calls
    assert "Checking." in seen  # but the text that came with them
    turns = stored(api)
    client_view = [t for t in turns if "m" not in (t.get("tool_call_id") or "")]
    client_view = [
        t
        for t in client_view
        if not any(c["function"]["name"] == "update_working_memory" for c in t["tool_calls"] or ())
    ]
    assert len(client_view) == len(history)  # each of the client's turns stored once
    assert len(turns) == len(history) + 4  # and the two agent-memory rounds, each a unit
    memory = api.get("/v1/threads/agent/memory").json()
    assert memory["working_memory"]["content"] == "# User\n- Name: Ada\n"


def test_history_client_sends_the_clients_messages_byte_for_byte(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """A coding agent's prompt cache needs its request untouched: with history "client" the
    upstream gets exactly the client's messages (and tools), while the turns are stored."""
    history: list[ChatCompletionMessageParam] = [
        {"role": "developer", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}], "name": "ada"},
    ]
    for text in ["Hi again", "And now the weather?"]:
        answer = client.chat.completions.create(
            model="answer-model",
            messages=history,
            tools=[WEATHER_TOOL],
            extra_headers={"X-Workingmem-History": "client"},
        )
        sent = answer_requests(upstream)[-1]
        assert json.dumps(sent["messages"]) == json.dumps(history)  # same values, same order
        assert sent["tools"] == [WEATHER_TOOL]  # no gateway tool added to the prefix
        history.append(answer.choices[0].message.model_dump(exclude_none=True))  # type: ignore[arg-type]
        history.append({"role": "user", "content": text})
    assert len(stored(api)) == len(history) - 2  # all stored but the system message and the last
    # and the memory updated all the same (R28)
    assert until(lambda: api.get("/v1/threads/agent/memory").json()["covered_turns"] >= 4)


def test_a_profile_can_add_the_memory_to_the_clients_own_history(
    database_url: str, tenant: str, upstream: ScriptedUpstream
) -> None:
    upstream.responder = agent_upstream
    coder = wm.Profile(id="coder", history="client", client_history_memory=True)
    key = create_key(database_url, tenant, "coder").secret
    settings = settings_for(database_url, upstream, profiles=[coder])
    with (
        LiveServer(create_app(settings)) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as sdk,
    ):
        sdk.chat.completions.create(
            model="coder",
            messages=[
                {"role": "system", "content": "You code."},
                {"role": "user", "content": "Hi"},
            ],
            extra_headers={"X-Thread-Id": "code"},
        )
    sent = answer_requests(upstream)[-1]["messages"]
    assert sent[0]["content"].startswith("You code.\n\n")
    assert "Working memory" in sent[0]["content"]  # the agent memory's block, added
    assert sent[1:] == [{"role": "user", "content": "Hi"}]


def test_a_bad_message_is_named_by_its_place_in_the_request(client: openai.OpenAI) -> None:
    """Validated once, by the library; the error still points into the client's own list
    (past its system message, and past the turns the thread already has)."""
    history: list[ChatCompletionMessageParam] = [{"role": "system", "content": "Be brief."}]
    agent_turn(client, history, "Hi")
    bad: Any = {"role": "tool", "tool_call_id": "nope", "content": "x"}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="answer-model", messages=[*history, bad])
    assert caught.value.body["param"] == "messages[3].tool_call_id"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as spaced:
        client.chat.completions.create(
            model="answer-model",
            messages=[*history, {"role": "user", "content": "x", "name": " ada"}],
        )
    assert spaced.value.body["param"] == "messages[3].name"  # type: ignore[index]
