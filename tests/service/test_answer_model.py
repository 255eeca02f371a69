"""The chat answer names the model that answered, as the upstream named it (a snapshot's id
where the client asked for the alias), streamed or not, whichever API the upstream speaks: a
client that prices or logs answers by model reads the same name either way. The `openai` SDK
over real HTTP, the scripted upstream speaking chat, Responses or Anthropic's Messages."""

from __future__ import annotations

from typing import Any

import openai

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

SNAPSHOT = "answer-model-2026-01-01"
ASK: Any = [{"role": "user", "content": "Weather in Lyon?"}]
WEATHER: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


def test_a_streamed_answer_names_the_model_as_one_not_streamed(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = lambda request: Reply("It is sunny.", model=SNAPSHOT)
    whole = served.chat.completions.create(
        model="answer-model", messages=ASK, extra_headers={"X-Thread-Id": "m1"}
    )
    chunks = list(
        served.chat.completions.create(
            model="answer-model", messages=ASK, stream=True, extra_headers={"X-Thread-Id": "m2"}
        )
    )
    assert whole.model == SNAPSHOT
    assert {chunk.model for chunk in chunks} == {SNAPSHOT}


def test_a_streamed_call_names_the_model_that_made_it(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """An answer without text (a call of the client's tool): the model its answer named."""
    call = tool_call("get_weather", {}, id="call_w")
    upstream.responder = lambda request: Reply(None, tool_calls=[call], model=SNAPSHOT)
    chunks = list(
        served.chat.completions.create(
            model="answer-model",
            messages=ASK,
            tools=[WEATHER],
            stream=True,
            extra_headers={"X-Thread-Id": "m3"},
        )
    )
    assert {chunk.model for chunk in chunks} == {SNAPSHOT}
    called = [c.model_dump() for c in chunks[-2].choices[0].delta.tool_calls or ()]
    assert [c["function"]["name"] for c in called] == ["get_weather"]
