"""One agent run in a process of its own, for the restart test: it continues the thread stored
at a database URL and prints, as JSON, the user prompts its model was given.

    python _pydantic_ai_restart.py sqlite:///memory.db TENANT THREAD "next question"
"""

from __future__ import annotations

import asyncio
import json
import sys

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import workingmem as wm
from workingmem.integrations.pydantic_ai import WorkingMemoryCapability


async def main(url: str, tenant_id: str, thread_id: str, prompt: str) -> None:
    seen: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(
            str(part.content)
            for message in messages
            for part in message.parts
            if isinstance(part, UserPromptPart)
        )
        return ModelResponse(parts=[TextPart(f"answer to {prompt}")])

    memory = WorkingMemoryCapability(
        store=url,
        tenant_id=tenant_id,
        thread_id=thread_id,
        config=wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW),
    )
    try:
        await Agent(FunctionModel(answer), capabilities=[memory]).run(prompt)
    finally:
        await memory.aclose()
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
