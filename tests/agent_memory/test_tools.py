"""The tools: valid definitions in both formats, and an executor that answers every call with
text, whatever shape of arguments a model sends, and that never lets a model pick the ids."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict

import workingmem as wm
from tests.helpers import DocumentIds
from workingmem.agent_memory import TOOL_NAMES, AgentMemory, AgentMemoryConfig
from workingmem.stores.documents import DocumentStore

TEMPLATE = "# Profile\n- Name:\n- Timezone:\n"


class Profile(BaseModel):
    name: str | None = None


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile: Profile | None = None
    tasks: list[str] = []


RECURSIVE = {
    "type": "object",
    "definitions": {
        "item": {
            "type": "object",
            "properties": {"sub": {"$ref": "#/definitions/item"}, "back": {"$ref": "#"}},
        }
    },
    "properties": {"root": {"$ref": "#/definitions/item"}, "same": {"$ref": "#/properties/root"}},
}

CONFIGS = [
    pytest.param({}, id="free-form"),
    pytest.param({"template": TEMPLATE}, id="template"),
    pytest.param({"schema": Notes}, id="pydantic-schema"),
    pytest.param({"schema": RECURSIVE}, id="json-schema-with-refs"),
]


def agent(store: wm.ThreadStore | None = None, **config: Any) -> AgentMemory:
    documents: Any = store
    assert store is None or isinstance(store, DocumentStore)
    return AgentMemory(store=documents, config=AgentMemoryConfig(**config))


# -- definitions -------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
def test_openai_definitions_are_functions_with_object_parameters(config: dict[str, Any]) -> None:
    tools = agent(**config).openai_tools()
    assert [t["function"]["name"] for t in tools] == list(TOOL_NAMES)
    for tool in tools:
        assert tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert tool["function"]["description"]
        parameters = tool["function"]["parameters"]
        assert parameters["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(parameters)
        json.dumps(parameters)


@pytest.mark.parametrize("config", CONFIGS)
def test_anthropic_definitions_carry_the_same_input_schemas(config: dict[str, Any]) -> None:
    memory = agent(**config)
    anthropic = memory.anthropic_tools()
    openai = memory.openai_tools()
    assert [set(t) for t in anthropic] == [{"name", "description", "input_schema"}] * 3
    assert [t["input_schema"] for t in anthropic] == [t["function"]["parameters"] for t in openai]


def test_text_modes_take_content_as_a_string() -> None:
    update = agent(template=TEMPLATE).openai_tools()[1]["function"]["parameters"]
    assert update["properties"]["content"]["type"] == "string"
    assert update["required"] == ["content"]


def test_schema_mode_types_content_with_the_schema_and_its_references_resolve() -> None:
    """The definitions move to the top of the arguments schema: the $refs still resolve."""
    update = agent(schema=Notes).openai_tools()[1]["function"]["parameters"]
    content = update["properties"]["content"]
    assert content["type"] == "object"
    assert "fields that change" in content["description"]
    validator = jsonschema.Draft202012Validator(update)
    assert validator.is_valid({"content": {"profile": {"name": "Ada"}, "tasks": ["a"]}})
    assert not validator.is_valid({"content": {"profile": {"name": 5}}})
    assert not validator.is_valid({"content": {"unknown": 1}})


def test_references_into_the_schema_itself_are_rebased_under_content() -> None:
    update = agent(schema=RECURSIVE).openai_tools()[1]["function"]["parameters"]
    validator = jsonschema.Draft202012Validator(update)
    assert validator.is_valid({"content": {"root": {"sub": {}}, "same": {"sub": {"sub": {}}}}})
    assert validator.is_valid({"content": {"root": {"back": {"root": {}}}}})
    assert not validator.is_valid({"content": {"same": {"sub": 5}}})
    assert not validator.is_valid({"content": {"root": {"back": {"root": 5}}}})


def test_a_disabled_memory_offers_no_tools() -> None:
    assert agent(enabled=False).openai_tools() == []
    assert agent(enabled=False).anthropic_tools() == []


# -- the executor ------------------------------------------------------------------------------


async def run(memory: AgentMemory, name: str, arguments: object, tenant: str) -> str:
    return await memory.execute_tool(
        name, arguments, tenant_id=tenant, conversation_id="c1", user_id="u1"
    )


GOOD = {"profile": {"name": "Ada"}, "tasks": ["a"]}


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(json.dumps({"content": GOOD}), id="json-text"),
        pytest.param({"content": GOOD}, id="object"),
        pytest.param({"content": json.dumps(GOOD)}, id="content-as-json-text"),
        pytest.param(json.dumps(json.dumps({"content": GOOD})), id="json-text-of-json-text"),
        pytest.param(
            {"content": {**GOOD, "profile": {"name": "Ada"}}, "user_id": "u2", "tenant_id": "x"},
            id="extra-keys-naming-other-ids",
        ),
    ],
)
async def test_update_accepts_the_shapes_models_send(
    store: wm.ThreadStore, tenant: str, arguments: object
) -> None:
    """Each shape stores the same document, under the application's ids only."""
    memory = agent(store, schema=Notes, scope="user")
    text = await run(memory, "update_working_memory", arguments, tenant)
    assert text.startswith("Saved the working memory (version 1, "), text
    stored = await memory.get_working_memory(tenant_id=tenant, user_id="u1")
    assert json.loads(stored or "") == GOOD
    assert await memory.get_working_memory(tenant_id=tenant, user_id="u2") is None
    assert await memory.get_working_memory(tenant_id="x", user_id="u1") is None


async def test_nulls_for_unset_fields_keep_what_is_stored_and_are_reported(
    store: wm.ThreadStore, tenant: str
) -> None:
    memory = agent(store, schema=Notes)
    await run(memory, "update_working_memory", {"content": GOOD}, tenant)
    text = await run(
        memory,
        "update_working_memory",
        {"content": {"profile": {"name": None}, "tasks": ["b"]}},
        tenant,
    )
    assert "version 2" in text
    assert "$.profile.name" in text
    stored = await memory.get_working_memory(tenant_id=tenant, conversation_id="c1")
    assert json.loads(stored or "") == {"profile": {"name": "Ada"}, "tasks": ["b"]}
    same = await run(memory, "update_working_memory", {"content": {"profile": None}}, tenant)
    assert same.startswith("No change"), same


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        pytest.param({"content": {"tasks": "a"}}, "$.tasks", id="wrong-type"),
        pytest.param(
            {"content": {"tasks": ["a"], "mood": "x"}}, "$.mood", id="extra-key-forbidden"
        ),
        pytest.param({"content": [1, 2]}, "JSON object", id="content-a-list"),
        pytest.param({"content": "tasks: a"}, "not JSON", id="content-not-json"),
        pytest.param({"content": None}, "clear_working_memory", id="content-null"),
        pytest.param({"tasks": ["a"]}, "'content'", id="patch-without-content"),
        pytest.param({}, "'content'", id="empty-object"),
        pytest.param(None, "'content'", id="none"),
        pytest.param("", "'content'", id="empty-string"),
        pytest.param("null", "'content'", id="json-null"),
        pytest.param("{not json", "not valid JSON", id="garbage"),
        pytest.param("[1, 2]", "JSON object", id="json-array"),
        pytest.param(5, "JSON object", id="number"),
        pytest.param(b'{"content": {}}', "JSON object", id="bytes"),
    ],
)
async def test_bad_update_arguments_give_the_model_an_error_and_change_nothing(
    store: wm.ThreadStore, tenant: str, arguments: object, words: str
) -> None:
    memory = agent(store, schema=Notes)
    await run(memory, "update_working_memory", {"content": GOOD}, tenant)
    text = await run(memory, "update_working_memory", arguments, tenant)
    assert text.startswith("Error: "), text
    assert words in text
    assert len(text) < 300
    stored = await memory.get_working_memory(tenant_id=tenant, conversation_id="c1")
    assert json.loads(stored or "") == GOOD


@pytest.mark.parametrize(
    ("content", "words"),
    [
        pytest.param({"name": "Ada"}, "must be a string", id="object"),
        pytest.param("", "is empty", id="empty"),
        pytest.param(42, "must be a string", id="number"),
        pytest.param("x" * 101, "is 101 characters; the limit is 100", id="over-cap"),
    ],
)
async def test_bad_text_content_gives_the_model_an_error(
    store: wm.ThreadStore, tenant: str, content: object, words: str
) -> None:
    memory = agent(store, template=TEMPLATE, max_chars=100)
    text = await run(memory, "update_working_memory", {"content": content}, tenant)
    assert text.startswith("Error: ")
    assert words in text
    assert await memory.get_working_memory(tenant_id=tenant, conversation_id="c1") is None


async def test_get_offers_the_template_while_empty_then_the_content(
    store: wm.ThreadStore, tenant: str
) -> None:
    memory = agent(store, template=TEMPLATE)
    empty = await run(memory, "get_working_memory", None, tenant)
    assert "empty" in empty
    assert TEMPLATE in empty
    saved = "# Profile\n- Name: Ada\n- Timezone: UTC\n"
    await run(memory, "update_working_memory", json.dumps({"content": saved}), tenant)
    assert await run(memory, "get_working_memory", "{}", tenant) == saved


@pytest.mark.parametrize(
    "arguments", [None, "", "{}", {}, {"user_id": "u2"}, "null", '"{}"'], ids=repr
)
async def test_get_and_clear_take_no_arguments_and_ignore_extra_keys(
    store: wm.ThreadStore, tenant: str, arguments: object
) -> None:
    memory = agent(store, scope="user")
    other: DocumentIds = {"tenant_id": tenant, "user_id": "u2"}
    await memory.update_working_memory(**other, content="u2's notes")
    await run(memory, "update_working_memory", {"content": "u1's notes"}, tenant)
    assert await run(memory, "get_working_memory", arguments, tenant) == "u1's notes"
    assert await run(memory, "clear_working_memory", arguments, tenant) == (
        "Cleared the working memory."
    )
    assert await run(memory, "get_working_memory", arguments, tenant) == (
        "The working memory is empty."
    )
    assert await memory.get_working_memory(**other) == "u2's notes"


async def test_an_unknown_tool_is_an_error_text_listing_the_tools(
    store: wm.ThreadStore, tenant: str
) -> None:
    text = await run(agent(store), "remember", {"content": "x"}, tenant)
    assert text.startswith("Error: unknown tool 'remember'")
    assert all(name in text for name in TOOL_NAMES)


async def test_a_disabled_memory_answers_tool_calls_with_an_error_text(
    store: wm.ThreadStore, tenant: str
) -> None:
    text = await run(agent(store, enabled=False), "get_working_memory", None, tenant)
    assert text.startswith("Error: working memory is disabled")


async def test_a_missing_application_id_raises_for_the_application(
    store: wm.ThreadStore, tenant: str
) -> None:
    """Only the application can fix a missing id, so it is raised, not told to the model."""
    memory = agent(store, scope="user")
    with pytest.raises(wm.ValidationError) as caught:
        await memory.execute_tool(
            "get_working_memory", None, tenant_id=tenant, conversation_id="c1"
        )
    assert caught.value.field == "user_id"
