"""AgentMemoryConfig: one mode at a time, bad settings fail when built, getters tell the mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

import workingmem as wm
from workingmem.agent_memory import AgentMemory, AgentMemoryConfig, WorkingMemoryDocument
from workingmem.stores.documents import DocumentStore

TEMPLATE = "# Profile\n- Name:\n- Role:\n\n# Goals\n-\n"


class Notes(BaseModel):
    tasks: list[str] = []


class Hooks(BaseModel):
    """A model Pydantic cannot describe in JSON Schema (a callable field)."""

    on_change: Callable[[], None]


class _NoStore:
    """A store that must not be touched: the getters are pure."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was used: {name}")


def memory(config: AgentMemoryConfig) -> AgentMemory:
    store: DocumentStore = _NoStore()
    return AgentMemory(store=store, config=config)


def test_the_default_is_a_free_form_memory_per_conversation() -> None:
    config = AgentMemoryConfig()
    assert (config.enabled, config.scope, config.template, config.schema) == (
        True,
        "conversation",
        None,
        None,
    )
    assert config.max_chars == 8_000
    agent = memory(config)
    assert agent.get_working_memory_format() is None
    assert agent.get_working_memory_template() is None
    assert agent.get_working_memory_schema() is None


def test_a_template_makes_a_markdown_memory() -> None:
    agent = memory(AgentMemoryConfig(template=TEMPLATE))
    assert agent.get_working_memory_format() == "markdown"
    assert agent.get_working_memory_template() == TEMPLATE
    assert agent.get_working_memory_schema() is None


def test_a_pydantic_schema_makes_a_json_memory_with_its_json_schema() -> None:
    agent = memory(AgentMemoryConfig(schema=Notes, scope="user"))
    assert agent.get_working_memory_format() == "json"
    assert agent.get_working_memory_template() is None
    schema = agent.get_working_memory_schema()
    assert schema is not None
    assert schema["type"] == "object"
    assert schema["properties"]["tasks"]["type"] == "array"


def test_the_schema_getter_returns_a_copy() -> None:
    """Changing what the getter returned changes nothing in the memory."""
    raw: dict[str, Any] = {"type": "object", "properties": {"tasks": {"type": "array"}}}
    agent = memory(AgentMemoryConfig(schema=raw))
    got = agent.get_working_memory_schema()
    assert got == raw
    assert got is not None
    got["properties"].clear()
    raw["properties"].clear()
    assert agent.get_working_memory_schema() == {
        "type": "object",
        "properties": {"tasks": {"type": "array"}},
    }


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        pytest.param(
            {"template": TEMPLATE, "schema": Notes}, "template", "exclude", id="template-and-schema"
        ),
        pytest.param({"schema": {"type": "array"}}, "schema", "object", id="schema-not-an-object"),
        pytest.param({"schema": {"type": 5}}, "schema", "valid JSON Schema", id="invalid-schema"),
        pytest.param({"schema": "tasks: list"}, "schema", "Pydantic model", id="schema-a-string"),
        pytest.param({"schema": Hooks}, "schema", "Hooks has no JSON Schema", id="model-no-schema"),
        pytest.param(
            {"schema": {"type": "object", "enum": {1, 2}}}, "schema", "must be JSON", id="not-json"
        ),
        pytest.param(
            {"schema": {"type": "object", "properties": {"a": {"$ref": "https://x/y.json"}}}},
            "schema",
            "outside",
            id="remote-ref",
        ),
        pytest.param(
            {"schema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/gone"}}}},
            "schema",
            "'#/$defs/gone' points to nothing",
            id="dangling-ref",
        ),
        pytest.param(
            {"schema": {"type": "object", "properties": {"a": {"$ref": "#gone"}}}},
            "schema",
            "'#gone' points to nothing",
            id="dangling-anchor",
        ),
        pytest.param({"template": "   "}, "template", "non-empty", id="blank-template"),
        pytest.param(
            {"template": "x" * 101, "max_chars": 100}, "template", "101", id="template-over-cap"
        ),
        pytest.param({"scope": "global"}, "scope", "'global'", id="unknown-scope"),
        pytest.param({"max_chars": 0}, "max_chars", "0", id="zero-cap"),
        pytest.param({"keep_versions": 0}, "keep_versions", "0", id="no-history"),
    ],
)
def test_bad_settings_fail_when_built_naming_the_field(
    kwargs: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(wm.ValidationError) as caught:
        AgentMemoryConfig(**kwargs)
    assert caught.value.field == field
    assert words in str(caught.value)


def test_the_document_type_is_exported_from_the_package() -> None:
    doc = WorkingMemoryDocument(scope="user", owner_id="u1", content=None, version=0)
    assert doc.reason is None
