"""LlamaIndex's OpenAI LLM as an app uses it (tests/service/test_llama_index_openai.py), in the
virtual environment of its own that `scripts/install dev` makes here (the package pins
openai<3). A `FunctionAgent` with a weather tool runs three questions:

    python agent.py memory <model base URL> <database URL> <tenant>
        the model is the OpenAI LLM at that URL, the history a `WorkingMemoryBuffer` on the
        database (thread ``support-42``);
    python agent.py gateway <gateway base URL> <API key>
        the model is the OpenAI LLM at the gateway, the thread named by ``X-Thread-Id``
        (``li-thread``), then one streamed chat.

Prints {"answers": [...]} as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai import OpenAI

import workingmem as wm
from workingmem.integrations.llama_index import WorkingMemoryBuffer

QUESTIONS = ["My name is Ada.", "What is the weather in Lyon?", "Thanks"]


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def with_memory(base_url: str, database_url: str, tenant: str) -> list[str]:
    memory = WorkingMemoryBuffer(
        store=database_url,
        tenant_id=tenant,
        thread_id="support-42",
        config=wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW),
    )
    llm = OpenAI(model="gpt-4o-mini", api_base=base_url, api_key="unused", max_retries=0)
    agent = FunctionAgent(llm=llm, tools=[get_weather])
    try:
        return [str(await agent.run(user_msg=text, memory=memory)) for text in QUESTIONS]
    finally:
        await memory.aclose()


async def through_gateway(base_url: str, key: str) -> list[str]:
    llm = OpenAI(
        model="gpt-4o-mini",
        api_base=base_url,
        api_key=key,
        max_retries=0,
        default_headers={"X-Thread-Id": "li-thread"},
    )
    agent = FunctionAgent(llm=llm, tools=[get_weather])
    answers = [str(await agent.run(user_msg=text)) for text in QUESTIONS]
    streamed = await llm.astream_chat([ChatMessage(role="user", content="Streamed hello")])
    answers.append("".join([piece.delta or "" async for piece in streamed]))
    return answers


def main() -> None:
    mode, *args = sys.argv[1:]
    run = with_memory(*args) if mode == "memory" else through_gateway(*args)
    print(json.dumps({"answers": asyncio.run(run)}))


if __name__ == "__main__":
    main()
