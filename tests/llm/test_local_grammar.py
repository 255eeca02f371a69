"""The local model's structured output: what it writes under a JSON schema is JSON that the
schema accepts, and a schema it cannot honour is a 400 before any generation.

The generations run the real model (SmolLM2-135M through llama.cpp) with the grammar
`schema_grammar` writes, at a temperature that lets it wander; jsonschema judges the output.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from workingmem.llm import CallKind, CallMeta, Completion, LLMError
from workingmem.llm.local import LOCAL_MODEL, LocalModelClient, schema_grammar
from workingmem.summarizer import Caps, response_schema

META = CallMeta(tenant_id="t1", kind=CallKind.ANSWER, model=LOCAL_MODEL, thread_id="th1")


async def answer_under(
    model: LocalModelClient,
    schema: dict[str, Any],
    *,
    max_tokens: int = 1000,
    temperature: float | None = None,
) -> Completion:
    """The model's answer to a request for JSON under `schema`."""
    return await model.complete(
        model=LOCAL_MODEL,
        messages=[{"role": "user", "content": "Describe a cat as JSON."}],
        meta=META,
        max_tokens=max_tokens,
        temperature=temperature,
        response_format={"type": "json_schema", "json_schema": {"name": "m", "schema": schema}},
    )


def required(**properties: Any) -> dict[str, Any]:
    """An object schema whose properties are all required (OpenAI's strict shape)."""
    return {"type": "object", "properties": properties, "required": list(properties)}


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(
            required(
                mood={"enum": ["happy", "sad", 3, None]},
                kind={"const": "cat"},
                label={"enum": ['say "meow"\\n']},
            ),
            id="enum-and-const",
        ),
        pytest.param(
            required(
                age={"anyOf": [{"type": "integer"}, {"type": "null"}]},
                name={"type": ["string", "null"], "maxLength": 12},
                weight={"oneOf": [{"type": "number"}, {"type": "boolean"}]},
            ),
            id="alternatives",
        ),
        pytest.param(
            required(
                tags={
                    "type": "array",
                    "items": {"type": "string", "minLength": 2, "maxLength": 8},
                    "minItems": 2,
                    "maxItems": 3,
                },
                scores={"type": "array", "items": {"type": "number"}, "maxItems": 2},
                none={"type": "array", "items": {"type": "integer"}, "maxItems": 0},
            ),
            id="bounded-arrays",
        ),
        pytest.param(
            required(
                owner=required(name={"type": "string", "maxLength": 10}, ok={"type": "boolean"}),
                empty={"type": "object", "additionalProperties": False},
                anything={"type": "object"},
                **{"two words": {"type": "integer"}},
            ),
            id="nested-objects",
        ),
        pytest.param(
            required(story={"type": "string", "minLength": 3, "maxLength": 1500}),
            id="string-past-the-repetition-limit",
        ),
        pytest.param(
            required(ids={"type": "array", "items": {"type": "integer"}, "maxItems": 1500}),
            id="items-past-the-repetition-limit",
        ),
        pytest.param(
            required(anything=True, nothing={"type": "array", "items": False}),
            id="boolean-schemas",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 20},
                    "zip": {"type": "integer"},
                },
                "required": ["city"],
            },
            id="optional-property-by-llama-cpp",
        ),
        pytest.param(
            required(code={"type": "string", "pattern": "^[A-Z]{3}$"}), id="pattern-by-llama-cpp"
        ),
    ],
)
async def test_what_the_model_writes_under_a_schema_is_json_the_schema_accepts(
    model: LocalModelClient, schema: dict[str, Any]
) -> None:
    """Whichever converter writes the grammar (ours for OpenAI's strict shapes, llama-cpp's
    for the rest), an answer the model finished parses and validates: the grammar allows
    nothing else. (One cut by `max_tokens` is a prefix of such an answer, at a temperature
    that lets the model ramble in a string of 1,500 characters or a list of 1,500 items.)"""
    finished = 0
    for temperature in (0.2, 1.2):
        completion = await answer_under(model, schema, temperature=temperature)
        if completion.finish_reason == "length":
            continue
        jsonschema.validate(json.loads(completion.text), schema)
        finished += 1
    assert finished, "the model finished no answer under this schema"


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        pytest.param(
            required(name={"type": "string", "minLength": True}),
            "not valid: True is not of type 'integer' at #/properties/name/minLength",
            id="a-bool-for-a-count",
        ),
        pytest.param(
            required(a={"type": "tuple"}), "not valid: 'tuple' is not valid", id="unknown-type"
        ),
        pytest.param(
            {"type": "object", "anyOf": []}, "should be non-empty at #/anyOf", id="no-option"
        ),
        pytest.param(required(a={"enum": []}), "no JSON value satisfies", id="empty-enum"),
        pytest.param(
            required(a={"type": "string", "minLength": 5, "maxLength": 2}),
            "minLength 5 is over maxLength 2",
            id="string-bounds-crossed",
        ),
        pytest.param(
            required(a={"type": "array", "items": {}, "minItems": 3, "maxItems": 1}),
            "minItems 3 is over maxItems 1",
            id="array-bounds-crossed",
        ),
        pytest.param(
            required(a={"type": "array", "items": False, "minItems": 1}),
            "minItems 1 of items that cannot be",
            id="items-that-cannot-be",
        ),
        pytest.param(required(a=False), "a false schema", id="a-required-false"),
        pytest.param(
            required(a={"type": "string", "maxLength": 200_000}),
            "writes at most 100,000 characters or items",
            id="longer-than-any-answer",
        ),
    ],
)
async def test_a_schema_the_model_cannot_honour_is_a_400_naming_why(
    model: LocalModelClient, schema: dict[str, Any], words: str
) -> None:
    """An invalid or unsatisfiable schema is refused before any generation (a converter would
    write a grammar of a guess, and the model an answer the schema refuses)."""
    with pytest.raises(LLMError) as caught:
        await answer_under(model, schema)
    assert caught.value.status_code == 400
    assert words in str(caught.value)


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(response_schema(Caps(4000, 50, 300)), id="summary-default-caps"),
        pytest.param(response_schema(Caps(100_000, 1000, 10_000)), id="summary-largest-caps"),
        pytest.param({"type": "string", "minLength": 5, "maxLength": 2345}, id="long-string"),
        pytest.param({"type": "string", "minLength": 2345}, id="long-least-string"),
        pytest.param(
            {"type": "array", "items": {"type": "integer"}, "minItems": 1200, "maxItems": 5000},
            id="long-array",
        ),
        pytest.param({}, id="any-object"),
    ],
)
def test_no_grammar_repeats_anything_more_than_llama_cpp_allows(schema: dict[str, Any]) -> None:
    """llama.cpp refuses a repetition count of 2,000 or more; long strings become chains."""
    grammar = schema_grammar(schema)
    counts = [
        int(count)
        for bounds in re.findall(r"\{(\d+)(?:,(\d*))?\}", grammar)
        for count in bounds
        if count
    ]
    assert counts
    assert max(counts) < 2000
    assert "root ::=" in grammar


def test_string_characters_exclude_raw_control_characters() -> None:
    """json.loads refuses a raw newline inside a string: the grammar never writes one."""
    grammar = schema_grammar({"type": "string", "maxLength": 10})
    assert r"\x00-\x1F" in grammar


def test_a_schema_the_converters_cannot_follow_is_a_400() -> None:
    """A reference to another document: ours does not follow it, llama-cpp's fetches none."""
    remote = {"$ref": "https://example.com/cat.json"}
    with pytest.raises(LLMError, match="cannot follow this JSON schema") as caught:
        schema_grammar(required(cat=remote))
    assert caught.value.status_code == 400


async def test_a_grammar_llama_cpp_refuses_is_a_400_and_the_model_answers_the_next_request(
    model: LocalModelClient,
) -> None:
    """A schema only llama-cpp's converter writes (a pattern) with a long string in it: its
    grammar repeats more than llama.cpp parses. The request is the caller's 400, and the
    worker that refused it answers the next request (it used to die of the sampler it did
    not get)."""
    schema = required(
        note={"type": "string", "maxLength": 4000}, code={"type": "string", "pattern": "^x+$"}
    )
    with pytest.raises(LLMError, match=r"llama\.cpp refuses the grammar") as caught:
        await answer_under(model, schema)
    assert caught.value.status_code == 400
    answer = await answer_under(model, required(n={"type": "integer"}), max_tokens=20)
    assert isinstance(json.loads(answer.text)["n"], int)
