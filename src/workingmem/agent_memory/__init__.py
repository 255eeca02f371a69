"""Agent-editable working memory (spec 003): Markdown template, JSON schema or free-form.

    from workingmem.agent_memory import AgentMemory, AgentMemoryConfig

    agent_memory = AgentMemory(store=store, config=AgentMemoryConfig(
        template="# Profile\\n- Name:\\n- Timezone:\\n", scope="user"))
    system += await agent_memory.get_working_memory_instructions(
        tenant_id="t1", conversation_id="c1", user_id="u1")
    tools = agent_memory.openai_tools()          # or anthropic_tools()
    text = await agent_memory.execute_tool(name, arguments, tenant_id="t1",
                                           conversation_id="c1", user_id="u1")

Modules: `config` (the settings), `modes` (what each mode accepts and stores), `schema` (JSON
Schema: validation, where null is allowed), `merge` (the schema-mode update rules),
`instructions` (the system-prompt block), `tools` (definitions and the executor), `memory`
(`AgentMemory`, the programmatic API). Documents live in a `DocumentStore`
(`workingmem.stores.documents`), which `SQLiteStore` and `PostgresStore` implement.
"""

from __future__ import annotations

from ..stores.documents import DocumentStore, Scope, WorkingMemoryDocument
from .config import DEFAULT_MAX_CHARS, AgentMemoryConfig
from .memory import AgentMemory, WorkingMemoryUpdate
from .tools import TOOL_NAMES

__all__ = [
    "DEFAULT_MAX_CHARS",
    "TOOL_NAMES",
    "AgentMemory",
    "AgentMemoryConfig",
    "DocumentStore",
    "Scope",
    "WorkingMemoryDocument",
    "WorkingMemoryUpdate",
]
