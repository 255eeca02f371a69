"""A second process on a thread: one more FunctionAgent run on the same database, printing the
messages its model received as one JSON line (run by test_llama_index's restart test).

    python _llama_index_restart.py sqlite:///memory.db TENANT THREAD "question"
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM

import workingmem as wm
from workingmem.integrations.llama_index import WorkingMemoryBuffer

SYSTEM_PROMPT = "You are a helpful assistant."


async def continue_thread(url: str, tenant_id: str, thread_id: str, question: str) -> None:
    seen: list[list[dict[str, Any]]] = []

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        seen.append([{"role": m.role.value, "content": m.content} for m in messages])
        return ChatMessage(role=MessageRole.ASSISTANT, content="You are Ada.")

    memory = WorkingMemoryBuffer(
        store=url,
        tenant_id=tenant_id,
        thread_id=thread_id,
        config=wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW),
    )
    agent = FunctionAgent(
        llm=MockFunctionCallingLLM(response_generator=respond), system_prompt=SYSTEM_PROMPT
    )
    await agent.run(user_msg=question, memory=memory)
    await memory.aclose()
    print(json.dumps(seen[0]))


if __name__ == "__main__":
    asyncio.run(continue_thread(*sys.argv[1:5]))
