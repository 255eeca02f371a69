"""The chat completion body handed on from the upstream's own response."""

from __future__ import annotations

import copy
from typing import Any

from workingmem.context import AssembledContext
from workingmem.gateway import AskResult
from workingmem.llm import Usage
from workingmem.service.chat_response import completion_body


def _result(response: dict[str, Any], **fields: Any) -> AskResult:
    context = AssembledContext(messages=[], tokens=0, budget_tokens=0, parts={})
    return AskResult(
        answer="It rains.",
        usage=Usage(prompt_tokens=3, completion_tokens=2),
        warnings=[],
        context=context,
        turns=[],
        model="m",
        response=response,
        **fields,
    )


def _upstream() -> dict[str, Any]:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "wm_memory_edit", "arguments": "{}"},
    }
    return {
        "id": "chatcmpl-up",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "draft", "tool_calls": [call]},
                "finish_reason": "tool_calls",
                "logprobs": {"content": [{"token": "It", "logprob": -0.1}]},
            },
            {"index": 1, "message": {}, "finish_reason": "stop"},
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        "system_fingerprint": "fp",
    }


def test_the_body_is_the_upstream_s_with_the_stored_answer_and_the_result_is_untouched() -> None:
    response = _upstream()
    kept = copy.deepcopy(response)
    result = _result(response)

    body = completion_body(result, completion_id="chatcmpl-ours", created=7)

    assert result.response == kept  # the stored result is not written through the body
    assert body["id"] == "chatcmpl-up"
    assert body["object"] == "chat.completion"
    assert body["created"] == 7
    assert body["system_fingerprint"] == "fp"
    first, second = body["choices"]
    assert first["message"] == {"role": "assistant", "content": "It rains."}  # no gateway call
    assert first["finish_reason"] == "stop"
    assert first["logprobs"] == kept["choices"][0]["logprobs"]
    assert second["message"] == {}
    assert body["usage"]["prompt_tokens"] == 3
    assert body["usage"]["completion_tokens"] == 2
