"""`workingmem demo` and `workingmem doctor`: the product tried on this machine, with the
local model unless an upstream is set."""

from __future__ import annotations

import asyncio

import typer
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from .. import AgentMemoryConfig, WorkingMemoryError
from ..demo import DemoResult
from ..llm import LOCAL_MODEL
from ._app import (
    Db,
    LocalModelOpt,
    LocalModelSha256Opt,
    MemorySchemaOpt,
    MemoryScopeOpt,
    MemoryTemplateOpt,
    agent_memory_option,
    app,
    console,
    errors,
    local_model_option,
    local_model_unused,
    plural,
    short,
)


@app.command()
def demo(
    db: Db = None,
    working_memory_template: MemoryTemplateOpt = None,
    working_memory_schema: MemorySchemaOpt = None,
    working_memory_scope: MemoryScopeOpt = None,
    local_model: LocalModelOpt = None,
    local_model_sha256: LocalModelSha256Opt = None,
) -> None:
    """Play a 30-turn conversation through the gateway and show what the model received.

    Runs on the embedded defaults: the SQLite file and, unless --upstream is given to serve or
    OPENAI_BASE_URL / OPENAI_API_KEY are set, the local model on the CPU (no key, no network):
    SmolLM2-135M-Instruct, or the GGUF file --local-model names.
    Then it prints, for the last request, what SLIDING_WINDOW and SUMMARY_BUFFER put in front
    of the model: the tokens, the notes, the facts; with a working memory, what the model
    wrote in it.

    Example: workingmem demo --working-memory-template profile.md
    """
    from ..demo import DEMO_USER_MESSAGES, run_demo
    from ..embedded import choose_upstream, upstream_env

    agent_memory = agent_memory_option(
        working_memory_template, working_memory_schema, working_memory_scope
    )
    chosen = None
    if any(upstream_env()):
        local_model_unused(local_model, "OPENAI_BASE_URL / OPENAI_API_KEY")
    else:
        chosen = local_model_option(local_model, local_model_sha256)
    try:
        upstream = choose_upstream(
            local_model=chosen.path if chosen else None,
            local_model_sha256=chosen.sha256 if chosen else None,
        )
    except ImportError as exc:
        errors.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from exc
    console.print(f"Answering with {upstream.description}.")
    total = len(DEMO_USER_MESSAGES)
    with Progress(console=console, transient=False) as progress:
        task = progress.add_task("Conversation", total=total)

        def on_turn(index: int, question: str, answer: str) -> None:
            progress.update(task, advance=1, description=f"Turn {2 * (index + 1)}/{2 * total}")
            progress.console.print(f"[bold]user:[/] {escape(question)}")
            progress.console.print(f"[dim]assistant:[/] {escape(short(answer, 200))}")

        async def play() -> DemoResult:
            try:
                return await run_demo(
                    db=db, on_turn=on_turn, upstream=upstream, agent_memory=agent_memory
                )
            finally:
                await upstream.aclose()

        try:
            result = asyncio.run(play())
        except WorkingMemoryError as exc:
            errors.print(f"[red]error:[/] {escape(str(exc))}")
            raise typer.Exit(1) from exc
    _print_demo(result, db, agent_memory, upstream.local)


def _print_demo(
    result: DemoResult, db: str | None, agent_memory: AgentMemoryConfig | None, local: bool
) -> None:
    table = Table(title="What the model received on the last request")
    table.add_column("")
    table.add_column("SLIDING_WINDOW")
    table.add_column("SUMMARY_BUFFER")
    sliding, summary = result.sliding, result.summary
    table.add_row("tokens", f"{sliding.tokens:,}", f"{summary.tokens:,}")
    table.add_row("verbatim turns", str(len(sliding.messages) - 1), str(len(summary.messages) - 1))
    table.add_row("notes (tokens)", str(sliding.parts["notes"]), str(summary.parts["notes"]))
    notes = summary.loaded.notes if summary.loaded is not None else ""
    table.add_row("notes", "—", escape(notes) or "— (no summary yet)")
    console.print(table)
    facts = result.state.facts
    console.print(f"Facts stored ({len(facts)}):")
    for fact in facts:
        where = f" [dim](turns {fact.first_turn}-{fact.last_turn})[/]" if fact.first_turn else ""
        console.print(f"  - {escape(fact.text)}{where}")
    if agent_memory is not None:
        if result.working_memory:
            console.print(f"Working memory, as the model wrote it ({agent_memory.scope} scope):")
            console.print(escape(result.working_memory))
        elif local:
            console.print(
                "Working memory: empty. The local 135M model answers in text and never calls "
                "the working-memory tools; with an upstream set (OPENAI_BASE_URL / "
                "OPENAI_API_KEY) the model edits it through them."
            )
        else:
            console.print("Working memory: the model wrote nothing in it.")
    console.print(
        f"\nDone: {plural(result.turns, 'turn')} in thread [bold]{result.thread_id}[/] of "
        f"tenant 'local' in {db or '.workingmem/memory.db'}, "
        f"summary version {result.state.version}."
    )
    console.print(
        "Next: [bold]workingmem serve[/] and open "
        f"http://127.0.0.1:8080/ui/threads/{result.thread_id} to see and forget this memory; "
        "point any OpenAI client at http://127.0.0.1:8080/v1 with an X-Thread-Id header."
    )


@app.command()
def doctor() -> None:
    """Check the local model: load it, generate a few tokens, say what was found or what is
    wrong and how to fix it.

    Prints the llama-cpp-python build and the CPU features it uses, the weights and their
    checksum, the worker process, the speed and the threads. Exits 1 when a check fails.

    Example: workingmem doctor
    """
    from ..doctor import check_local_model

    with console.status("Loading the local model in its worker process…"):
        checks = asyncio.run(check_local_model())
    for check in checks:
        mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
        console.print(f"{mark} [bold]{check.name}[/]: {escape(check.detail)}")
        if check.fix:
            console.print(f"     fix: {escape(check.fix)}")
    if not all(check.ok for check in checks):
        raise typer.Exit(1)
    console.print(f"The local model {LOCAL_MODEL} works here.")
