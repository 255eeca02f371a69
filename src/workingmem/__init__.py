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

from .config import DISABLED_WINDOW_TURNS, Profile, WorkingMemoryConfig
from .errors import (
    ConflictError,
    ContextOverflowError,
    NotFoundError,
    StoreError,
    ValidationError,
    WorkingMemoryError,
)
from .memory import WorkingMemory, WorkingMemoryProtocol
from .stores import SQLiteStore, StateWrite, ThreadStore, open_store
from .tokens import Tokenizer, count_tokens, tokenizer_for
from .types import (
    CountedTurn,
    Fact,
    Message,
    ModelInfo,
    Strategy,
    Thread,
    ToolCall,
    Turn,
    WorkingMemoryLoad,
    WorkingMemoryState,
)

__version__ = "0.1.0"

__all__ = [
    "DISABLED_WINDOW_TURNS",
    "ConflictError",
    "ContextOverflowError",
    "CountedTurn",
    "Fact",
    "Message",
    "ModelInfo",
    "NotFoundError",
    "Profile",
    "SQLiteStore",
    "StateWrite",
    "StoreError",
    "Strategy",
    "Thread",
    "ThreadStore",
    "Tokenizer",
    "ToolCall",
    "Turn",
    "ValidationError",
    "WorkingMemory",
    "WorkingMemoryConfig",
    "WorkingMemoryError",
    "WorkingMemoryLoad",
    "WorkingMemoryProtocol",
    "WorkingMemoryState",
    "__version__",
    "count_tokens",
    "open_store",
    "tokenizer_for",
]
