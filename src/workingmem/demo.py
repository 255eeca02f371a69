"""`workingmem demo`: a short conversation through the gateway, then what the model received.

    result = await run_demo(db=None, on_turn=print)   # SQLite + the local model, no set-up

Plays a scripted user of about 15 messages (30 turns with the answers) through
`Gateway.ask` under SUMMARY_BUFFER, on the embedded defaults (the SQLite file and, unless an
upstream is configured, the local model), waits for the background summary updates, and then
assembles the last request twice, under SLIDING_WINDOW and under SUMMARY_BUFFER, so the two
can be compared: their tokens, the notes, the facts.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from .agent_memory import AgentMemoryConfig
from .config import Profile
from .context import AssembledContext
from .embedded import Upstream, choose_upstream
from .gateway import Gateway
from .stores import open_store
from .types import Strategy, WorkingMemoryState

__all__ = ["DEMO_TENANT", "DEMO_USER_MESSAGES", "DemoResult", "run_demo"]

DEMO_TENANT = "local"
"""The tenant `workingmem serve` shows when it has no API keys: the demo's thread is there."""

DEMO_USER_MESSAGES = (
    "Hi! My name is Ada and I'm planning a week in Lyon in May.",
    "I'm vegetarian, so food matters a lot to me.",
    "My sister Grace is coming with me; she loves museums.",
    "Our budget is 1,200 euros for the two of us, hotel excluded.",
    "What should we see on the first day?",
    "Are there good markets in Lyon?",
    "How do we get from the airport to the old town?",
    "Is May a rainy month there?",
    "Can you suggest a day trip outside the city?",
    "What is a traditional dish I could try?",
    "Grace wants to see Roman ruins. Any idea?",
    "Should we buy a city pass?",
    "What is a good area to stay in?",
    "Any tips for the last evening?",
    "Remind me: what do you know about me and my trip?",
)
"""The scripted user; the early messages plant facts the summary should keep."""


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo did and what the model received on the last call."""

    thread_id: str
    upstream: str
    turns: int
    answers: list[str]
    state: WorkingMemoryState
    sliding: AssembledContext
    summary: AssembledContext
    working_memory: str | None = None
    """What the model wrote in its working memory (None without one, or when it wrote none)."""


DEMO_RECALL_RATIO = 0.5
"""The demo recalls older turns (the full-text search of `recall_ratio`), as a long
conversation should."""


async def run_demo(
    *,
    db: str | None = None,
    messages: tuple[str, ...] = DEMO_USER_MESSAGES,
    on_turn: Callable[[int, str, str], None] | None = None,
    upstream: Upstream | None = None,
    agent_memory: AgentMemoryConfig | None = None,
) -> DemoResult:
    """Plays the conversation; `on_turn(index, question, answer)` after each answer.

    With `agent_memory`, the model has its working-memory tools (spec 003) and the result
    says what it wrote there."""
    chosen = upstream or choose_upstream()
    config = chosen.config.model_copy(
        update={
            "working_memory": chosen.config.working_memory.model_copy(
                update={"strategy": Strategy.SUMMARY_BUFFER, "recall_ratio": DEMO_RECALL_RATIO}
            )
        }
    )
    thread_id = f"demo-{uuid.uuid4().hex[:8]}"
    answers: list[str] = []
    try:
        async with (
            await open_store(db) as store,
            Gateway(
                store=store,
                llm=chosen.client,
                config=config,
                templates=chosen.templates,
                agent_memory=agent_memory,
            ) as gateway,
        ):
            model = config.model_info(config.default_model)
            contexts: dict[Strategy, AssembledContext] = {}
            for index, question in enumerate(messages):
                if index == len(messages) - 1:
                    # The last request, assembled both ways before it is answered (ask then
                    # answers the stored question without storing it twice).
                    await gateway.when_idle()
                    await store.append(
                        tenant_id=DEMO_TENANT,
                        thread_id=thread_id,
                        user_id="ada",
                        messages=[{"role": "user", "content": question}],
                    )
                    for strategy in (Strategy.SLIDING_WINDOW, Strategy.SUMMARY_BUFFER):
                        contexts[strategy] = await gateway.assembler.build(
                            tenant_id=DEMO_TENANT,
                            thread_id=thread_id,
                            user_id="ada",
                            profile=Profile(id=f"demo-{strategy.value}", working_memory=strategy),
                            model=model,
                        )
                result = await gateway.ask(
                    tenant_id=DEMO_TENANT, thread_id=thread_id, user_id="ada", message=question
                )
                answers.append(result.answer)
                if on_turn is not None:
                    on_turn(index, question, result.answer)
            await gateway.when_idle()
            state = await gateway.memory.get_state(tenant_id=DEMO_TENANT, thread_id=thread_id)
            thread = await store.get_thread(tenant_id=DEMO_TENANT, thread_id=thread_id)
            working = None
            if gateway.agent_memory is not None:
                working = await gateway.agent_memory.get_working_memory(
                    tenant_id=DEMO_TENANT, conversation_id=thread_id, user_id="ada"
                )
    finally:
        if upstream is None:
            await chosen.aclose()
    return DemoResult(
        thread_id=thread_id,
        upstream=chosen.description,
        turns=thread.turn_count,
        answers=answers,
        state=state,
        sliding=contexts[Strategy.SLIDING_WINDOW],
        summary=contexts[Strategy.SUMMARY_BUFFER],
        working_memory=working,
    )
