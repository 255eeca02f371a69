"""Schema mode without a store: what a merge keeps, what null means, what validation refuses.

These are the cases that hurt Mastra's users (a model padding every field with null, an
empty list, a partial object), for a Pydantic model and for a JSON Schema dict alike.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import workingmem as wm
from workingmem.agent_memory import AgentMemoryConfig
from workingmem.agent_memory.modes import SchemaMode


class Profile(BaseModel):
    name: str | None = None
    timezone: str | None = None


class Notes(BaseModel):
    user_profile: Profile | None = None
    tasks: list[str] = []
    mood: str = "neutral"
    nickname: str | None
    """Nullable with no default: null is a value here."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tasks: list[str] = []


NOTES_DICT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "user_profile": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "timezone": {"type": "string"}},
        },
        "tasks": {"type": "array", "items": {"type": "string"}},
        "nickname": {"type": ["string", "null"]},
    },
}

STORED = {"user_profile": {"name": "Ada", "timezone": "Europe/Paris"}, "tasks": ["a", "b"]}


def mode(schema: Any) -> SchemaMode:
    compiled = AgentMemoryConfig(schema=schema).mode
    assert isinstance(compiled, SchemaMode)
    return compiled


def apply(schema: Any, current: dict[str, Any] | None, content: object) -> dict[str, Any]:
    stored = None if current is None else json.dumps(current)
    result: dict[str, Any] = json.loads(mode(schema).apply(current=stored, content=content).content)
    return result


SCHEMAS = [pytest.param(Notes, id="pydantic"), pytest.param(NOTES_DICT, id="json-schema")]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_model_padding_every_unset_field_with_null_wipes_nothing(schema: Any) -> None:
    """Nulls for fields whose null is not a value leave the stored values as they were."""
    padded = {
        "user_profile": {"name": None, "timezone": "UTC"},
        "tasks": None,
        "mood": None,
    }
    if schema is NOTES_DICT:
        del padded["mood"]
    merged = apply(schema, {**STORED, "nickname": "A"}, padded)
    assert merged["user_profile"] == {"name": "Ada", "timezone": "UTC"}
    assert merged["tasks"] == ["a", "b"]
    assert merged["nickname"] == "A"


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_null_padded_object_for_a_missing_key_creates_nothing(schema: Any) -> None:
    merged = apply(schema, {"tasks": ["a"], "nickname": None}, {"user_profile": {"name": None}})
    assert "user_profile" not in merged


def test_a_pydantic_optional_field_defaulting_to_none_treats_null_as_not_given() -> None:
    """``x: T | None = None``: null is the default, so a null sent means "no change"."""
    result = mode(Notes).apply(
        current=json.dumps({**STORED, "nickname": None}),
        content={"user_profile": None},
    )
    assert json.loads(result.content)["user_profile"] == STORED["user_profile"]
    assert result.ignored_nulls == ("$.user_profile",)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_null_is_stored_where_null_is_a_value_of_the_field(schema: Any) -> None:
    merged = apply(schema, {**STORED, "nickname": "A"}, {"nickname": None})
    assert merged["nickname"] is None


@pytest.mark.parametrize("schema", SCHEMAS)
def test_an_empty_list_empties_the_list(schema: Any) -> None:
    merged = apply(schema, {**STORED, "nickname": None}, {"tasks": []})
    assert merged["tasks"] == []
    assert merged["user_profile"] == STORED["user_profile"]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_list_replaces_the_stored_list_whole(schema: Any) -> None:
    merged = apply(schema, {**STORED, "nickname": None}, {"tasks": ["c"]})
    assert merged["tasks"] == ["c"]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_partial_object_merges_key_by_key(schema: Any) -> None:
    merged = apply(schema, {**STORED, "nickname": None}, {"user_profile": {"timezone": "UTC"}})
    assert merged["user_profile"] == {"name": "Ada", "timezone": "UTC"}
    assert merged["tasks"] == ["a", "b"]


def test_replace_stores_the_update_as_the_whole_document() -> None:
    result = mode(Notes).apply(
        current=json.dumps({**STORED, "nickname": "A"}),
        content={"tasks": ["only"], "nickname": None},
        replace=True,
    )
    assert json.loads(result.content) == {"tasks": ["only"], "nickname": None}


def test_pydantic_stores_no_default_it_did_not_receive() -> None:
    """Defaults stay defaults: the stored document holds what was sent, not padding."""
    assert apply(Notes, None, {"nickname": "A"}) == {"nickname": "A"}


@pytest.mark.parametrize(
    ("schema", "content", "path", "words"),
    [
        pytest.param(Notes, {"tasks": "x", "nickname": None}, "$.tasks", "array", id="pydantic"),
        pytest.param(NOTES_DICT, {"tasks": "x"}, "$.tasks", "array", id="json-schema"),
        pytest.param(
            Notes,
            {"tasks": [1], "nickname": None},
            "$.tasks[0]",
            "string",
            id="pydantic-list-item",
        ),
        pytest.param(
            NOTES_DICT,
            {"user_profile": {"name": 5}},
            "$.user_profile.name",
            "string",
            id="json-schema-nested",
        ),
        pytest.param(Notes, {"tasks": []}, "$.nickname", "required", id="pydantic-required"),
    ],
)
def test_a_wrong_type_names_the_json_path_and_the_problem(
    schema: Any, content: dict[str, Any], path: str, words: str
) -> None:
    with pytest.raises(wm.ValidationError) as caught:
        mode(schema).apply(current=None, content=content)
    assert caught.value.field == path
    assert words in caught.value.reason


@pytest.mark.parametrize("schema", SCHEMAS)
def test_several_problems_name_the_first_and_count_the_rest(schema: Any) -> None:
    """The model reads one problem to fix, and how many more there are; a long value it
    sent is shown cut, not whole (a tool result stays short)."""
    long = "x" * 500
    content = {"user_profile": {"name": 5, "timezone": 6}, "tasks": [7], "nickname": None}
    with pytest.raises(wm.ValidationError) as caught:
        mode(schema).apply(current=None, content=content)
    assert "(and 2 more problems)" in caught.value.reason
    with pytest.raises(wm.ValidationError) as caught:
        mode(schema).apply(current=None, content={"tasks": [{"text": long}], "nickname": None})
    assert "more problem" not in caught.value.reason
    assert long not in caught.value.reason
    assert len(caught.value.reason) < 400


def test_extra_keys_follow_the_schema_ignored_by_a_default_pydantic_model() -> None:
    assert apply(Notes, None, {"nickname": None, "user_id": "u-evil"}) == {"nickname": None}


def test_extra_keys_follow_the_schema_refused_by_extra_forbid() -> None:
    with pytest.raises(wm.ValidationError) as caught:
        mode(Strict).apply(current=None, content={"tasks": [], "user_id": "u"})
    assert caught.value.field == "$.user_id"


def test_extra_keys_follow_the_schema_kept_by_an_open_json_schema() -> None:
    assert apply(NOTES_DICT, None, {"extra": 1}) == {"extra": 1}


def test_extra_keys_follow_the_schema_refused_by_additional_properties_false() -> None:
    closed = {**NOTES_DICT, "additionalProperties": False}
    with pytest.raises(wm.ValidationError) as caught:
        mode(closed).apply(current=None, content={"extra": 1})
    assert "extra" in caught.value.reason


@pytest.mark.parametrize(
    "content",
    [
        pytest.param({"tasks": ["a"]}, id="dict"),
        pytest.param('{"tasks": ["a"]}', id="json-text"),
        pytest.param(json.dumps('{"tasks": ["a"]}'), id="json-text-of-json-text"),
        pytest.param(Strict(tasks=["a"]), id="pydantic-instance"),
    ],
)
def test_content_may_be_an_object_a_json_text_or_a_model(content: object) -> None:
    assert apply(NOTES_DICT, None, content) == {"tasks": ["a"]}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        pytest.param("not json", "not JSON", id="not-json"),
        pytest.param("[1, 2]", "an array", id="array"),
        pytest.param(5, "a number", id="number"),
        pytest.param({"tasks": [float("nan")]}, "JSON", id="nan"),
    ],
)
def test_content_that_is_no_json_object_is_refused(content: object, words: str) -> None:
    with pytest.raises(wm.ValidationError) as caught:
        mode(NOTES_DICT).apply(current=None, content=content)
    assert words in str(caught.value)


def test_a_document_over_the_cap_is_refused_with_its_size_and_the_limit() -> None:
    small = AgentMemoryConfig(schema=NOTES_DICT, max_chars=20).mode
    with pytest.raises(wm.ValidationError) as caught:
        small.apply(current=None, content={"tasks": ["a" * 30]})
    assert "is 44 characters as JSON; the limit is 20" in str(caught.value)


def test_a_recursive_schema_merges_and_validates() -> None:
    tree = {
        "type": "object",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "child": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]},
                },
            }
        },
        "properties": {"root": {"$ref": "#/$defs/node"}},
    }
    merged = apply(
        tree,
        {"root": {"label": "a", "child": {"label": "b"}}},
        {"root": {"child": {"child": None, "label": None}}},
    )
    assert merged == {"root": {"label": "a", "child": {"label": "b", "child": None}}}


DEFINITIONS: dict[str, Any] = {
    "maybe": {"type": ["string", "null"]},
    "sure": {"type": "string"},
    "choices": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "anchored": {"$anchor": "perhaps", "type": ["string", "null"]},
}


@pytest.mark.parametrize(
    ("field", "kept"),
    [
        pytest.param({"enum": ["a", None]}, None, id="enum-with-null"),
        pytest.param({"enum": ["a", "b"]}, "a", id="enum-without-null"),
        pytest.param({"const": None}, None, id="const-null"),
        pytest.param({"const": "a"}, "a", id="const-value"),
        pytest.param({"$ref": "#/$defs/maybe"}, None, id="ref-nullable"),
        pytest.param({"$ref": "#/$defs/sure"}, "a", id="ref-not-nullable"),
        pytest.param({"$ref": "#/$defs/choices/anyOf/1"}, None, id="ref-into-a-list"),
        pytest.param({"$ref": "#perhaps"}, None, id="ref-to-an-anchor"),
        pytest.param(
            {"allOf": [{"type": ["string", "null"]}, {"maxLength": 5}]}, None, id="allof-nullable"
        ),
        pytest.param(
            {"allOf": [{"type": ["string", "null"]}, {"type": "string"}]}, "a", id="allof-not"
        ),
        pytest.param({"oneOf": [{"type": "null"}, {"type": "integer"}]}, None, id="oneof-null"),
    ],
)
def test_null_is_stored_exactly_where_the_json_schema_accepts_it(
    field: dict[str, Any], kept: str | None
) -> None:
    """Whatever keyword says it (type, enum, const, a reference, a combination), a null the
    model sends is stored where the field accepts null and ignored where it does not (the
    stored value kept)."""
    schema = {"type": "object", "properties": {"x": field}, "$defs": DEFINITIONS}
    assert apply(schema, {"x": "a"}, {"x": None}) == {"x": kept}


def test_null_follows_the_schema_of_a_key_matched_by_pattern() -> None:
    """Keys matched by `patternProperties` take the matching schema's answer for null."""
    schema = {
        "type": "object",
        "patternProperties": {"^note_": {"type": ["string", "null"]}, "^tag_": {"type": "string"}},
    }
    merged = apply(schema, {"note_1": "a", "tag_1": "b"}, {"note_1": None, "tag_1": None})
    assert merged == {"note_1": None, "tag_1": "b"}


def test_a_key_that_is_not_an_identifier_is_named_quoted_in_the_error() -> None:
    """A refused value under a key with a space is named as a JSON path can name it."""
    schema = {"type": "object", "properties": {"due date": {"type": "string"}}}
    with pytest.raises(wm.ValidationError) as caught:
        apply(schema, None, {"due date": 5})
    assert caught.value.field == '$["due date"]'
    assert "5 is not of type 'string'" in str(caught.value)
