"""Agent memory in front of a model that takes no tools, with the `openai` SDK over HTTP: Ollama
refuses a request with tools for a model without tool calling, vLLM for any model unless it
runs with a tool parser, llama.cpp's server unless it runs with ``--jinja``. With agent memory
on, every answer offered its tools and every answer was that 400. The gateway learns from the
first refusal: it asks again without them, and from then on the model gets the working memory
read-only, as notes in its system prompt."""

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

OLLAMA = "gemma3:4b does not support tools"
VLLM = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
WEATHER: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


def without_tools(refusal: str) -> Any:
    """A model that refuses any request with tools; it answers with the name its system
    prompt's notes give, and says whether it was told of tools to call."""

    def respond(request: dict[str, Any]) -> ScriptedResponse:
        if request.get("model") == "cheap-model":
            return summarizing_responder(request)
        if request.get("tools"):
            return StatusError(400, refusal, type="invalid_request_error")
        system = str(request["messages"][0]["content"])
        name = "Ada" if "Name: Ada" in system else "nobody"
        told = "update_working_memory" in system
        return Reply(f"You are {name}; tools {'mentioned' if told else 'unmentioned'}.")

    return respond


@pytest.fixture
def served(database_url: str, tenant: str) -> Iterator[tuple[str, str, ScriptedUpstream]]:
    """(the gateway's URL, a key, its upstream), agent memory on (conftest's template)."""
    with (
        ScriptedUpstream() as upstream,
        LiveServer(create_app(settings_for(database_url, upstream))) as live,
    ):
        yield live.url, create_key(database_url, tenant, "tests").secret, upstream


def answer_requests(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


@pytest.mark.parametrize("refusal", [OLLAMA, VLLM], ids=["ollama", "vllm"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_model_without_tools_answers_with_the_working_memory_read_only(
    served: tuple[str, str, ScriptedUpstream], refusal: str, stream: bool
) -> None:
    url, key, upstream = served
    upstream.responder = without_tools(refusal)
    auth = {"Authorization": f"Bearer {key}"}
    put = httpx.put(
        f"{url}/v1/threads/notes/working-memory",
        headers=auth,
        json={"content": "# User\n- Name: Ada\n"},
    )
    assert put.status_code == 200, put.text
    said = []
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client:
        for thread, question in [("notes", "Who am I?"), ("notes", "Again?"), ("blank", "Hi")]:
            messages: Any = [{"role": "user", "content": question}]
            headers = {"X-Thread-Id": thread}
            if stream:
                chunks = client.chat.completions.create(
                    model="answer-model", messages=messages, extra_headers=headers, stream=True
                )
                said.append("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
            else:
                answer = client.chat.completions.create(
                    model="answer-model", messages=messages, extra_headers=headers
                )
                said.append(answer.choices[0].message.content or "")
    assert said == [
        "You are Ada; tools unmentioned.",
        "You are Ada; tools unmentioned.",
        "You are nobody; tools unmentioned.",
    ]
    sent = answer_requests(upstream)
    assert [bool(r.get("tools")) for r in sent] == [True, False, False, False]  # learned once
    assert "## Working memory" not in str(sent[-1]["messages"][0]["content"])  # empty: no block
    thread = httpx.get(f"{url}/v1/threads/notes/messages", headers=auth).json()["data"]
    assert [m["role"] for m in thread] == ["user", "assistant", "user", "assistant"]


def test_a_refusal_of_the_clients_own_tools_reaches_the_client(
    served: tuple[str, str, ScriptedUpstream],
) -> None:
    """The client's tools are the client's: the model's refusal of them is its answer, and
    the gateway does not drop them to ask again."""
    url, key, upstream = served
    upstream.responder = without_tools(OLLAMA)
    with (
        openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client,
        pytest.raises(openai.BadRequestError) as refused,
    ):
        client.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": "Weather?"}],
            tools=[WEATHER],
            extra_headers={"X-Thread-Id": "client-tools"},
        )
    assert refused.value.status_code == 400
    assert [bool(r.get("tools")) for r in answer_requests(upstream)] == [True]
