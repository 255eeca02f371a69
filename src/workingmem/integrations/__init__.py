"""workingmem inside the agent frameworks people already use, each behind its own extra.

    from workingmem.integrations.openai_agents import WorkingMemorySession    # [agents]
    from workingmem.integrations.langchain import WorkingMemoryMiddleware     # [langchain]
    from workingmem.integrations.pydantic_ai import WorkingMemoryCapability   # [pydantic-ai]
    from workingmem.integrations.llama_index import WorkingMemoryBuffer       # [llama-index]

Every one of them is a thin adapter over `FrameworkMemory` (the store, the window and notes
before a model call, the new turns after it, the summary updated in the background, the
agent-memory tools): what the framework calls a message or an item is stored verbatim beside
its chat view, and the window the model reads is made of whole units within a token budget.
Importing a module without its extra raises ImportError with the ``pip install`` line.
"""

from ._memory import DEFAULT_MODEL, FrameworkMemory, MemoryContext

__all__ = ["DEFAULT_MODEL", "FrameworkMemory", "MemoryContext"]
