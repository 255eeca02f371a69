"""The `workingmem` command: thin commands over the library.

    $ workingmem demo                 # store a short conversation, show what the model would get
    $ workingmem demo --budget 300    # a tighter budget: watch the window shrink

Needs the ``server`` extra (typer, rich).
"""

from __future__ import annotations

import asyncio
import uuid

try:
    import typer
    from rich.console import Console
    from rich.table import Table
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise SystemExit(
        "the workingmem command needs the server extra: pip install 'workingmem[server]'"
    ) from exc

from . import ModelInfo, Profile, Strategy, WorkingMemory, WorkingMemoryConfig, open_store

__all__ = ["app", "main"]

app = typer.Typer(
    help="workingmem: conversation memory for LLM applications.", no_args_is_help=True
)
console = Console()

_DEMO_CONVERSATION = [
    ("user", "Hi! I'm Ada, I'm planning a week in Lyon in May."),
    ("assistant", "Lovely! What would you like to do there?"),
    ("user", "Mostly food. I'm vegetarian, and I don't drink alcohol."),
    ("assistant", "Lyon has great vegetarian bouchons; I'll skip the wine bars."),
    ("user", "I'll travel with my sister Grace; she loves museums."),
    ("assistant", "The Musée des Confluences is a must for her."),
    ("user", "Our budget is about 1,200 euros for the two of us, hotel excluded."),
    ("assistant", "That's comfortable for a week of food and museums."),
    ("user", "Can you suggest a plan for the first day?"),
]


@app.callback()
def _root() -> None:
    """workingmem: conversation memory for LLM applications.

    Example: workingmem demo
    """


@app.command()
def demo(
    db: str | None = typer.Option(
        None, help="Database URL or SQLite file; default .workingmem/memory.db"
    ),
    budget: int = typer.Option(400, help="Tokens left for the history (budget_tokens)."),
    model: str = typer.Option("gpt-4o", help="The model whose tokenizer counts."),
) -> None:
    """Store a short conversation and show the window the model would receive.

    Example: workingmem demo --budget 300
    """
    asyncio.run(_demo(db, budget, model))


async def _demo(db: str | None, budget: int, model_id: str) -> None:
    thread_id = f"demo-{uuid.uuid4().hex[:8]}"
    model = ModelInfo(id=model_id, context_window=128_000)
    async with await open_store(db) as store:
        await store.append(
            tenant_id="local",
            thread_id=thread_id,
            messages=[{"role": r, "content": c} for r, c in _DEMO_CONVERSATION],
            user_id="ada",
        )
        memory = WorkingMemory(
            store=store, config=WorkingMemoryConfig(strategy=Strategy.SLIDING_WINDOW)
        )
        loaded = await memory.load(
            tenant_id="local",
            thread_id=thread_id,
            model=model,
            profile=Profile(id="default"),
            budget_tokens=budget,
        )
        state = await memory.get_state(tenant_id="local", thread_id=thread_id)

    console.print(
        f"Stored thread [bold]{thread_id}[/] ({len(_DEMO_CONVERSATION)} turns) "
        f"in {db or '.workingmem/memory.db'}."
    )
    table = Table(title=f"SLIDING_WINDOW for {model_id}, budget {budget} tokens")
    table.add_column("role")
    table.add_column("content")
    for message in loaded.messages:
        table.add_row(message["role"], str(message["content"]))
    console.print(table)
    console.print(
        f"Window: {len(loaded.messages)} turns, {loaded.tokens} tokens "
        f"({loaded.dropped_turns} older turns left out)."
    )
    console.print(
        f"Stored memory state: summary {state.summary!r}, {len(state.facts)} facts, "
        f"turn_count {state.turn_count} (SLIDING_WINDOW stores none)."
    )


def main() -> None:
    """Entry point of the `workingmem` command."""
    app()
