"""workingmem: what the model should know from this thread, on every call.

import workingmem as wm

async with await wm.open_store() as store:              # .workingmem/memory.db
    await store.append(tenant_id="t1", thread_id="th1",
                       messages=[{"role": "user", "content": "Hi, I'm Ada."}])
    memory = wm.WorkingMemory(store=store, config=wm.WorkingMemoryConfig(
        strategy=wm.Strategy.SLIDING_WINDOW))
    loaded = await memory.load(tenant_id="t1", thread_id="th1",
                               model=wm.ModelInfo(id="gpt-4o", context_window=128_000),
                               profile=wm.Profile(id="default"), budget_tokens=4_000)
    loaded.messages  # the window, the current user turn last
"""

from .agent_memory import AgentMemory, AgentMemoryConfig, WorkingMemoryUpdate
from .background import BackgroundQueue
from .config import DISABLED_WINDOW_TURNS, Profile, WorkingMemoryConfig
from .context import AssembledContext, AssemblyWarning, ContextAssembler
from .embedded import LOCAL_GATEWAY_CONFIG, Upstream, choose_upstream
from .errors import (
    ConflictError,
    ContextOverflowError,
    NotFoundError,
    StoreError,
    ValidationError,
    WorkingMemoryError,
)
from .gateway import AnswerStream, AskResult, Gateway, ResetResult, ThreadMemory
from .gateway_config import CallPlan, GatewayConfig, Overrides, Profiles
from .llm import (
    CallKind,
    CallMeta,
    Completion,
    GuardedClient,
    LLMClient,
    LLMError,
    LocalModelClient,
    OpenAIClient,
    TokenBudgetGuard,
    Usage,
    UsageGuard,
    UsageRefusedError,
)
from .memory import WorkingMemory, WorkingMemoryProtocol
from .prompts import PromptKind, PromptTemplates
from .rewriter import QueryRewriter
from .stores import SQLiteStore, SQLStore, StateWrite, Store, ThreadStore, open_store
from .stores.documents import DocumentStore, WorkingMemoryDocument
from .summarizer import InvalidOutputError, Summarizer
from .tokens import Tokenizer, count_tokens, tokenizer_for
from .types import (
    CHAT_FORMAT,
    AssistantMessage,
    ChatMessage,
    CountedTurn,
    Fact,
    Message,
    MessageIn,
    ModelInfo,
    NativeItem,
    Strategy,
    SystemMessage,
    Thread,
    ToolCall,
    ToolCallDict,
    ToolMessage,
    Turn,
    UpdateOutcome,
    UpdateReport,
    UserMessage,
    WorkingMemoryLoad,
    WorkingMemoryState,
)

__version__ = "0.1.0"

__all__ = [
    "CHAT_FORMAT",
    "DISABLED_WINDOW_TURNS",
    "LOCAL_GATEWAY_CONFIG",
    "AgentMemory",
    "AgentMemoryConfig",
    "AnswerStream",
    "AskResult",
    "AssembledContext",
    "AssemblyWarning",
    "AssistantMessage",
    "BackgroundQueue",
    "CallKind",
    "CallMeta",
    "CallPlan",
    "ChatMessage",
    "Completion",
    "ConflictError",
    "ContextAssembler",
    "ContextOverflowError",
    "CountedTurn",
    "DocumentStore",
    "Fact",
    "Gateway",
    "GatewayConfig",
    "GuardedClient",
    "InvalidOutputError",
    "LLMClient",
    "LLMError",
    "LocalModelClient",
    "Message",
    "MessageIn",
    "ModelInfo",
    "NativeItem",
    "NotFoundError",
    "OpenAIClient",
    "Overrides",
    "Profile",
    "Profiles",
    "PromptKind",
    "PromptTemplates",
    "QueryRewriter",
    "ResetResult",
    "SQLStore",
    "SQLiteStore",
    "StateWrite",
    "Store",
    "StoreError",
    "Strategy",
    "Summarizer",
    "SystemMessage",
    "Thread",
    "ThreadMemory",
    "ThreadStore",
    "TokenBudgetGuard",
    "Tokenizer",
    "ToolCall",
    "ToolCallDict",
    "ToolMessage",
    "Turn",
    "UpdateOutcome",
    "UpdateReport",
    "Upstream",
    "Usage",
    "UsageGuard",
    "UsageRefusedError",
    "UserMessage",
    "ValidationError",
    "WorkingMemory",
    "WorkingMemoryConfig",
    "WorkingMemoryDocument",
    "WorkingMemoryError",
    "WorkingMemoryLoad",
    "WorkingMemoryProtocol",
    "WorkingMemoryState",
    "WorkingMemoryUpdate",
    "__version__",
    "choose_upstream",
    "count_tokens",
    "open_store",
    "tokenizer_for",
]
