"""Which upstream refusals teach the gateway a model's words (`RefusedFields`), as the servers
word them: OpenAI's and Azure's for their reasoning models, Anthropic's for Claude's newer ones;
and the refusals that teach nothing (a request too long for vLLM names both cap fields too)."""

from __future__ import annotations

from typing import Any

import pytest

from workingmem.llm import LLMError
from workingmem.llm._refused_fields import RefusedFields, refuses_tools

BODY: dict[str, Any] = {"model": "m", "max_tokens": 100, "temperature": 0.0, "messages": []}


def refusal(message: str) -> LLMError:
    return LLMError(message, status_code=400, upstream=True)


@pytest.mark.parametrize(
    ("said", "own", "sent"),
    [
        pytest.param(
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            True,
            {"model": "m", "max_completion_tokens": 100, "temperature": 0.0, "messages": []},
            id="openai-max-tokens",
        ),
        pytest.param(
            "Unsupported value: 'temperature' does not support 0.0 with this model. "
            "Only the default (1) value is supported.",
            True,
            {"model": "m", "max_tokens": 100, "messages": []},
            id="openai-temperature",
        ),
        pytest.param(
            "Unsupported parameter: 'temperature' is not supported with this model.",
            True,
            {"model": "m", "max_tokens": 100, "messages": []},
            id="responses-temperature",
        ),
    ],
)
def test_a_refusal_is_learned_for_the_model(said: str, own: bool, sent: dict[str, Any]) -> None:
    refused = RefusedFields()
    assert refused.adapted("m", dict(BODY), refusal(said), own_temperature=own) == sent
    assert refused.applied("m", dict(BODY), own_temperature=own) == sent  # from then on
    assert refused.applied("other", dict(BODY), own_temperature=own) == BODY  # that model's


@pytest.mark.parametrize(
    ("said", "status", "own"),
    [
        pytest.param(
            "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum "
            "context length is 8192 tokens and your request has 5000 input tokens",
            400,
            True,
            id="vllm-too-long",
        ),
        pytest.param(
            "Unsupported value: 'temperature' does not support 0.2 with this model.",
            400,
            False,  # the client's temperature: its refusal is the client's
            id="the-clients-temperature",
        ),
        pytest.param(
            "Unsupported parameter: 'max_tokens' is not supported with this model.",
            429,
            True,
            id="not-a-400",
        ),
    ],
)
def test_other_refusals_teach_nothing(said: str, status: int, own: bool) -> None:
    refused = RefusedFields()
    error = LLMError(said, status_code=status, upstream=True)
    assert refused.adapted("m", dict(BODY), error, own_temperature=own) is None
    assert refused.applied("m", dict(BODY), own_temperature=own) == BODY


def test_claude_keeps_the_temperature_without_top_p() -> None:
    refused = RefusedFields()
    body = {"model": "c", "temperature": 0.3, "top_p": 0.9, "max_tokens": 10}
    said = "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
    kept = refused.adapted("c", body, refusal(said), own_temperature=False)
    assert kept == {"model": "c", "temperature": 0.3, "max_tokens": 10}
    assert refused.applied("c", {"model": "c", "top_p": 0.9}, own_temperature=False) == {
        "model": "c",
        "top_p": 0.9,  # alone, top_p stays
    }


THOUGHT: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Because.",
            "reasoning": "Because.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                    "extra_content": {"google": {"thought_signature": "s"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ],
}


def without(body: dict[str, Any], *names: str) -> dict[str, Any]:
    messages = [
        {k: v for k, v in m.items() if k not in names}
        | (
            {"tool_calls": [{k: v for k, v in c.items() if k not in names} for c in calls]}
            if (calls := m.get("tool_calls"))
            else {}
        )
        for m in body["messages"]
    ]
    return {**body, "messages": messages}


@pytest.mark.parametrize(
    ("said", "refused"),
    [
        pytest.param(
            "'messages.1' : for 'role:assistant' the following must be satisfied"
            "[('messages.1' : property 'reasoning_content' is unsupported)]",
            ("reasoning_content",),
            id="groq-reasoning-content",
        ),
        pytest.param(
            "messages[1].reasoning: reasoning is not supported with this model",
            ("reasoning",),
            id="groq-reasoning",
        ),
        pytest.param(
            "1 validation error for ChatCompletionRequest\nmessages.1.assistant.reasoning_content\n"
            "  Extra inputs are not permitted [type=extra_forbidden]",
            ("reasoning_content",),
            id="pydantic-extra",
        ),
        pytest.param(
            "Invalid JSON payload received. Unknown name \"extra_content\" at 'messages[1]'",
            ("extra_content",),
            id="a-call-s-field",
        ),
    ],
)
def test_a_refused_message_field_is_left_out_of_every_message(
    said: str, refused: tuple[str, ...]
) -> None:
    learned = RefusedFields()
    sent = without(THOUGHT, *refused)
    assert learned.adapted("m", THOUGHT, refusal(said), own_temperature=False) == sent
    assert learned.applied("m", THOUGHT, own_temperature=False) == sent  # from then on
    assert learned.applied("other", THOUGHT, own_temperature=False) == THOUGHT


@pytest.mark.parametrize(
    "said",
    [
        pytest.param(
            "The `reasoning_content` in the thinking mode must be passed back to the API.",
            id="deepseek-asks-for-it",
        ),
        pytest.param("property 'thinking' is unsupported", id="a-field-no-message-has"),
        pytest.param(
            "'reasoning_effort' is not supported with this model.", id="a-longer-name-only"
        ),
    ],
)
def test_a_refusal_of_no_message_field_teaches_nothing(said: str) -> None:
    learned = RefusedFields()
    assert learned.adapted("m", THOUGHT, refusal(said), own_temperature=False) is None
    assert learned.applied("m", THOUGHT, own_temperature=False) == THOUGHT


@pytest.mark.parametrize(
    ("status", "said", "tools"),
    [
        pytest.param(400, "gemma3:4b does not support tools", True, id="ollama"),
        pytest.param(
            400,
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
            "to be set",
            True,
            id="vllm",
        ),
        pytest.param(500, "tools param requires --jinja flag", True, id="llama.cpp"),
        pytest.param(
            404,
            'No endpoints found that support tool use. Try disabling "update_working_memory".',
            True,
            id="router",
        ),
        pytest.param(400, "`tool calling` is not supported with this model", True, id="groq"),
        pytest.param(400, "Invalid 'tools[0].function.name': string too long", False, id="bad"),
        pytest.param(503, "tools are not supported right now", False, id="unavailable"),
        pytest.param(400, "max_tokens is too large", False, id="other"),
    ],
)
def test_a_refusal_of_the_tools_is_told_from_one_the_tools_could_change(
    status: int, said: str, tools: bool
) -> None:
    assert refuses_tools(LLMError(said, status_code=status, upstream=True)) is tools
