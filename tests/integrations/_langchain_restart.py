"""A new process continuing a LangChain thread from its database file (test_langchain's restart).

    python _langchain_restart.py sqlite:///memory.db TENANT THREAD "question" "answer"

Runs one `invoke` of a fresh agent, no checkpointer (nothing of the earlier process survives
but the database), and prints the messages its model received as OpenAI chat dicts, in JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

from langchain.agents import create_agent
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

from workingmem.config import WorkingMemoryConfig
from workingmem.integrations.langchain import WorkingMemoryMiddleware
from workingmem.types import Strategy


class RecordingModel(GenericFakeChatModel):
    """The scripted fake model, recording what it receives."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return cast(Runnable[LanguageModelInput, AIMessage], self)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def main(url: str, tenant: str, thread: str, question: str, answer: str) -> None:
    middleware = WorkingMemoryMiddleware(
        store=url,
        tenant_id=tenant,
        config=WorkingMemoryConfig(strategy=Strategy.SLIDING_WINDOW),
    )
    model = RecordingModel(messages=iter([AIMessage(answer)]), disable_streaming=True)
    agent = create_agent(model, middleware=[middleware])
    agent.invoke(
        {"messages": [{"role": "user", "content": question}]},
        {"configurable": {"thread_id": thread}},
    )
    middleware.close()
    print(json.dumps(convert_to_openai_messages(model.requests[-1])))


if __name__ == "__main__":
    main(*sys.argv[1:6])
