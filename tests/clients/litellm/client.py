"""LiteLLM's SDK as an app uses it with the gateway (tests/service/test_litellm.py), in the
virtual environment of its own that `scripts/install dev` makes here:

    python client.py <gateway URL> <API key> <the weather tool, chat's JSON>

- ``openai/`` models at ``<gateway>/v1``: a thread named by ``X-Thread-Id`` (``lite-chat``), a
  question then a streamed one; a tool loop that resends its whole history and names no thread
  (the call, its result, the answer); the Responses API (``litellm.responses``), a thread named
  by the header (``lite-resp``) then a response chained to it by ``previous_response_id``;
- ``anthropic/`` models at ``<gateway>`` (the Messages API): a tool loop on a named thread
  (``lite-anth``), then a streamed question on it.

Prints {"answers": [...], "calls": [...]} as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import litellm


def streamed(chunks: Any) -> str:
    """A streamed answer's text."""
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


def tool_loop(question: str, tools: list[Any], calls: list[str], **model: Any) -> str:
    """The model calls get_weather, the app runs it and resends the whole history."""
    history: list[dict[str, Any]] = [{"role": "user", "content": question}]
    first = litellm.completion(messages=history, tools=tools, **model).choices[0].message
    call = first.tool_calls[0]
    calls.append(f"{call.function.name} {json.loads(call.function.arguments)['city']}")
    history.append(first.model_dump(exclude_none=True))
    history.append({"role": "tool", "tool_call_id": call.id, "content": "sunny in Lyon"})
    answer = litellm.completion(messages=history, tools=tools, **model).choices[0].message
    return str(answer.content)


def main(url: str, key: str, tools: list[Any]) -> dict[str, list[str]]:
    answers: list[str] = []
    calls: list[str] = []
    chat: dict[str, Any] = {"model": "openai/gpt-4o-mini", "api_base": f"{url}/v1", "api_key": key}
    named = {**chat, "extra_headers": {"X-Thread-Id": "lite-chat"}}
    ask = [{"role": "user", "content": "My name is Ada."}]
    answers.append(litellm.completion(messages=ask, **named).choices[0].message.content)
    ask = [{"role": "user", "content": "What is my name?"}]
    chunks = litellm.completion(
        messages=ask, stream=True, stream_options={"include_usage": True}, **named
    )
    answers.append(streamed(chunks))
    answers.append(tool_loop("What is the weather in Lyon?", tools, calls, **chat))

    first = litellm.responses(
        input="Hello over Responses", extra_headers={"X-Thread-Id": "lite-resp"}, **chat
    )
    answers.append(first.output_text)
    then = litellm.responses(input="And again", previous_response_id=first.id, **chat)
    answers.append(then.output_text)

    claude: dict[str, Any] = {
        "model": "anthropic/gpt-4o-mini",
        "api_base": url,
        "api_key": key,
        "max_tokens": 200,
        "extra_headers": {"X-Thread-Id": "lite-anth"},
    }
    answers.append(tool_loop("What is the weather in Lyon?", tools, calls, **claude))
    ask = [{"role": "user", "content": "Thanks"}]
    answers.append(streamed(litellm.completion(messages=ask, stream=True, **claude)))
    return {"answers": answers, "calls": calls}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], [json.loads(sys.argv[3])])))
