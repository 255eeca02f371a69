"""AgentMemory's programmatic API on SQLite and PostgreSQL: each mode in each scope, isolation,
missing ids, caps, history and roll back, clearing, and the disabled memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import workingmem as wm
from tests.helpers import DocumentIds, DocumentOwner
from workingmem.agent_memory import AgentMemory, AgentMemoryConfig
from workingmem.stores.documents import MEMORY_FILES_PREFIX, DocumentStore

pytestmark = pytest.mark.asyncio

TEMPLATE = "# Profile\n- Name:\n- Timezone:\n"


class Notes(BaseModel):
    tasks: list[str] = []
    name: str | None = None


MODES: dict[str, dict[str, Any]] = {
    "free-form": {},
    "template": {"template": TEMPLATE},
    "schema": {"schema": Notes},
}
FIRST: dict[str, object] = {
    "free-form": "Ada likes tea.",
    "template": "# Profile\n- Name: Ada\n- Timezone:\n",
    "schema": {"tasks": ["book a table"]},
}
SECOND: dict[str, object] = {
    "free-form": "Ada likes tea and trains.",
    "template": "# Profile\n- Name: Ada\n- Timezone: UTC\n",
    "schema": {"name": "Ada"},
}
STORED_FIRST = {
    "free-form": "Ada likes tea.",
    "template": "# Profile\n- Name: Ada\n- Timezone:\n",
    "schema": '{"tasks":["book a table"]}',
}
STORED_SECOND = {
    "free-form": "Ada likes tea and trains.",
    "template": "# Profile\n- Name: Ada\n- Timezone: UTC\n",
    "schema": '{"tasks":["book a table"],"name":"Ada"}',
}


def documents(store: wm.ThreadStore) -> DocumentStore:
    """Both stores implement the DocumentStore protocol."""
    assert isinstance(store, DocumentStore)
    return store


def agent(store: wm.ThreadStore, **config: Any) -> AgentMemory:
    return AgentMemory(store=documents(store), config=AgentMemoryConfig(**config))


@pytest.mark.parametrize("scope", ["conversation", "user"])
@pytest.mark.parametrize("mode", list(MODES))
async def test_each_mode_in_each_scope_stores_gets_updates_and_clears(
    store: wm.ThreadStore, tenant: str, mode: str, scope: str
) -> None:
    """get is None until written; updates are stored in the mode's form; clear empties it."""
    memory = agent(store, scope=scope, **MODES[mode])
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1", "user_id": "u1"}
    assert await memory.get_working_memory(**ids) is None
    first = await memory.update_working_memory(**ids, content=FIRST[mode])
    assert first.changed
    assert first.document.version == 1
    assert await memory.get_working_memory(**ids) == STORED_FIRST[mode]
    await memory.update_working_memory(**ids, content=SECOND[mode])
    assert await memory.get_working_memory(**ids) == STORED_SECOND[mode]
    await memory.clear_working_memory(**ids)
    assert await memory.get_working_memory(**ids) is None


@pytest.mark.parametrize("mode", list(MODES))
async def test_user_scope_is_shared_by_the_users_conversations_only(
    store: wm.ThreadStore, tenant: str, mode: str
) -> None:
    """One user's two conversations share a document; another user, another tenant do not."""
    memory = agent(store, scope="user", **MODES[mode])
    await memory.update_working_memory(
        tenant_id=tenant, conversation_id="c1", user_id="u1", content=FIRST[mode]
    )
    assert (
        await memory.get_working_memory(tenant_id=tenant, conversation_id="c2", user_id="u1")
        == STORED_FIRST[mode]
    )
    assert (
        await memory.get_working_memory(tenant_id=tenant, conversation_id="c1", user_id="u2")
        is None
    )
    assert (
        await memory.get_working_memory(
            tenant_id=f"{tenant}-other", conversation_id="c1", user_id="u1"
        )
        is None
    )


@pytest.mark.parametrize("mode", list(MODES))
async def test_conversation_scope_is_not_shared_across_conversations_or_tenants(
    store: wm.ThreadStore, tenant: str, mode: str
) -> None:
    memory = agent(store, **MODES[mode])
    await memory.update_working_memory(
        tenant_id=tenant, conversation_id="c1", user_id="u1", content=FIRST[mode]
    )
    same_user_other_chat = await memory.get_working_memory(
        tenant_id=tenant, conversation_id="c2", user_id="u1"
    )
    same_chat_other_tenant = await memory.get_working_memory(
        tenant_id=f"{tenant}-other", conversation_id="c1"
    )
    assert same_user_other_chat is None
    assert same_chat_other_tenant is None


async def test_a_user_id_equal_to_a_conversation_id_names_another_document(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The scope is part of the key: user "x" and conversation "x" never share."""
    per_chat = agent(store)
    per_user = agent(store, scope="user")
    await per_chat.update_working_memory(tenant_id=tenant, conversation_id="x", content="chat")
    assert await per_user.get_working_memory(tenant_id=tenant, user_id="x") is None


@pytest.mark.parametrize(
    ("scope", "given", "missing"),
    [
        pytest.param("conversation", {"user_id": "u1"}, "conversation_id", id="conversation"),
        pytest.param("user", {"conversation_id": "c1"}, "user_id", id="user"),
    ],
)
async def test_a_missing_id_is_an_error_naming_it_never_a_shared_document(
    store: wm.ThreadStore, tenant: str, scope: str, given: DocumentOwner, missing: str
) -> None:
    memory = agent(store, scope=scope)
    for call in (
        memory.get_working_memory(tenant_id=tenant, **given),
        memory.update_working_memory(tenant_id=tenant, **given, content="x"),
        memory.clear_working_memory(tenant_id=tenant, **given),
        memory.get_working_memory_history(tenant_id=tenant, **given),
    ):
        with pytest.raises(wm.ValidationError) as caught:
            await call
        assert caught.value.field == missing
        assert scope in caught.value.reason


@pytest.mark.parametrize(
    ("ids", "field"),
    [
        pytest.param({"tenant_id": ""}, "tenant_id", id="empty-tenant"),
        pytest.param({"conversation_id": "a\nb"}, "conversation_id", id="control-char"),
        pytest.param({"conversation_id": "x" * 257}, "conversation_id", id="too-long"),
    ],
)
async def test_bad_ids_are_refused(
    store: wm.ThreadStore, tenant: str, ids: dict[str, str], field: str
) -> None:
    memory = agent(store)
    call: dict[str, Any] = {"tenant_id": tenant, "conversation_id": "c1", **ids}
    with pytest.raises(wm.ValidationError) as caught:
        await memory.update_working_memory(**call, content="x")
    assert caught.value.field == field


async def test_a_user_id_in_the_memory_tools_namespace_is_refused(
    store: wm.ThreadStore, tenant: str
) -> None:
    """The memory tool keeps a user's files under "memory-files:<user>": an agent memory whose
    user is named so would read and overwrite them."""
    memory = agent(store, scope="user")
    with pytest.raises(wm.ValidationError) as caught:
        await memory.update_working_memory(
            tenant_id=tenant, user_id=MEMORY_FILES_PREFIX + "ada", content="x"
        )
    assert caught.value.field == "user_id"
    assert "reserved" in caught.value.reason


@pytest.mark.parametrize("mode", ["free-form", "template"])
async def test_text_over_the_cap_is_refused_with_the_size_and_the_limit_changing_nothing(
    store: wm.ThreadStore, tenant: str, mode: str
) -> None:
    memory = agent(store, max_chars=40, **MODES[mode])
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await memory.update_working_memory(**ids, content="kept")
    with pytest.raises(wm.ValidationError) as caught:
        await memory.update_working_memory(**ids, content="x" * 41)
    assert "is 41 characters; the limit is 40" in str(caught.value)
    assert await memory.get_working_memory(**ids) == "kept"


@pytest.mark.parametrize("content", ["", "   \n", None, {"text": "x"}])
async def test_text_modes_refuse_blank_or_non_text_content(
    store: wm.ThreadStore, tenant: str, content: object
) -> None:
    """An empty update is not a way to clear: it is refused and the document stays."""
    memory = agent(store, template=TEMPLATE)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await memory.update_working_memory(**ids, content="# Profile\n- Name: Ada\n")
    with pytest.raises(wm.ValidationError):
        await memory.update_working_memory(**ids, content=content)
    assert await memory.get_working_memory(**ids) == "# Profile\n- Name: Ada\n"


async def test_invalid_schema_content_changes_nothing(store: wm.ThreadStore, tenant: str) -> None:
    memory = agent(store, schema=Notes)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await memory.update_working_memory(**ids, content={"tasks": ["a"]})
    with pytest.raises(wm.ValidationError) as caught:
        await memory.update_working_memory(**ids, content={"tasks": "b"})
    assert caught.value.field == "$.tasks"
    assert await memory.get_working_memory(**ids) == '{"tasks":["a"]}'
    history = await memory.get_working_memory_history(**ids)
    assert [v.version for v in history] == [1]


async def test_an_update_that_changes_nothing_writes_no_version(
    store: wm.ThreadStore, tenant: str
) -> None:
    memory = agent(store, schema=Notes)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await memory.update_working_memory(**ids, content={"tasks": ["a"]})
    again = await memory.update_working_memory(**ids, content={"tasks": None, "name": None})
    assert not again.changed
    assert again.ignored_nulls == ("$.tasks", "$.name")
    assert again.document.version == 1


async def test_every_version_is_kept_and_one_can_be_rolled_back(
    store: wm.ThreadStore, tenant: str
) -> None:
    """History lists versions newest first with their reason; a roll back is a new version."""
    memory = agent(store, scope="user")
    ids: DocumentIds = {"tenant_id": tenant, "user_id": "u1"}
    for text in ("one", "two", "three"):
        await memory.update_working_memory(**ids, content=text)
    await memory.clear_working_memory(**ids)
    history = await memory.get_working_memory_history(**ids)
    assert [(v.version, v.content, v.reason) for v in history] == [
        (4, None, "clear"),
        (3, "three", "update"),
        (2, "two", "update"),
        (1, "one", "update"),
    ]
    restored = await memory.rollback_working_memory(**ids, version=2)
    assert (restored.version, restored.content, restored.reason) == (5, "two", "rollback")
    assert await memory.get_working_memory(**ids) == "two"
    with pytest.raises(wm.NotFoundError):
        await memory.rollback_working_memory(**ids, version=99)


async def test_a_roll_back_is_checked_against_todays_mode(
    store: wm.ThreadStore, tenant: str
) -> None:
    """A version written under a bigger cap cannot come back past today's cap."""
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await agent(store).update_working_memory(**ids, content="x" * 50)
    await agent(store).update_working_memory(**ids, content="short")
    with pytest.raises(wm.ValidationError):
        await agent(store, max_chars=10).rollback_working_memory(**ids, version=1)
    assert await agent(store).get_working_memory(**ids) == "short"


async def test_the_history_keeps_only_the_newest_versions(
    store: wm.ThreadStore, tenant: str
) -> None:
    memory = agent(store, keep_versions=3)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    for i in range(1, 7):
        await memory.update_working_memory(**ids, content=f"v{i}")
    history = await memory.get_working_memory_history(**ids)
    assert [v.version for v in history] == [6, 5, 4]


async def test_clear_with_erase_history_forgets_every_version(
    store: wm.ThreadStore, tenant: str
) -> None:
    memory = agent(store)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await memory.update_working_memory(**ids, content="secret")
    await memory.clear_working_memory(**ids, erase_history=True)
    assert await memory.get_working_memory(**ids) is None
    assert await memory.get_working_memory_history(**ids) == []
    again = await memory.update_working_memory(**ids, content="fresh")
    assert again.document.version == 1


async def test_clearing_an_empty_memory_writes_nothing(store: wm.ThreadStore, tenant: str) -> None:
    memory = agent(store)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await memory.clear_working_memory(**ids)
    assert await memory.get_working_memory_history(**ids) == []


async def test_an_explicit_expected_version_is_a_compare_and_set(
    store: wm.ThreadStore, tenant: str
) -> None:
    memory = agent(store, schema=Notes)
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    seen = await memory.get_working_memory_document(**ids)
    assert seen.version == 0
    await memory.update_working_memory(**ids, content={"tasks": ["a"]}, expected_version=0)
    with pytest.raises(wm.ConflictError):
        await memory.update_working_memory(**ids, content={"tasks": ["b"]}, expected_version=0)
    assert json.loads(await memory.get_working_memory(**ids) or "") == {"tasks": ["a"]}


async def test_a_disabled_memory_reads_nothing_refuses_updates_and_still_clears(
    store: wm.ThreadStore, tenant: str
) -> None:
    ids: DocumentIds = {"tenant_id": tenant, "conversation_id": "c1"}
    await agent(store).update_working_memory(**ids, content="stored while enabled")
    off = agent(store, enabled=False)
    assert await off.get_working_memory(**ids) is None
    assert await off.get_working_memory_history(**ids) == []
    assert await off.get_working_memory_instructions(**ids) == ""
    assert off.openai_tools() == []
    assert off.anthropic_tools() == []
    with pytest.raises(wm.ValidationError) as caught:
        await off.update_working_memory(**ids, content="x")
    assert caught.value.field == "enabled"
    await off.clear_working_memory(**ids)
    assert await agent(store).get_working_memory(**ids) is None
