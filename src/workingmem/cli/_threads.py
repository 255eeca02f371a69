"""`workingmem threads`: a tenant's threads and what the gateway remembers of them."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from .. import AgentMemoryConfig, Gateway, open_store
from ..answers import ThreadMemory
from ..service.settings import LOCAL_TENANT
from ..types import Thread, Turn
from ._app import HELP_STYLE, Db, LocalTenantOpt, console, plural, run, when

threads_app = typer.Typer(
    help="A tenant's threads and their memory: list, show, forget.\n\n"
    "Example: workingmem threads list --tenant acme",
    no_args_is_help=True,
    rich_markup_mode=HELP_STYLE,
)


@threads_app.command("list")
def threads_list(
    db: Db = None,
    limit: Annotated[
        int, typer.Option(metavar="N", help="How many threads.", min=1, max=1000)
    ] = 50,
    offset: Annotated[
        int, typer.Option(metavar="N", help="How many of the newest to skip.", min=0)
    ] = 0,
    tenant: LocalTenantOpt = LOCAL_TENANT,
) -> None:
    """List a tenant's threads, most recently updated first.

    Example: workingmem threads list --tenant acme --limit 20
    """
    threads = run(_list_threads(db, tenant, limit, offset), "Reading the threads…")
    if not threads:
        console.print(f"No threads for tenant {escape(tenant)}.")
        return
    table = Table(title=f"Threads of {escape(tenant)}")
    for column in ("thread", "user", "turns", "updated (UTC)"):
        table.add_column(column)
    for thread in threads:
        table.add_row(
            escape(thread.thread_id),
            escape(thread.user_id or "—"),
            str(thread.turn_count),
            when(thread.updated_at),
        )
    console.print(table)


async def _list_threads(db: str | None, tenant: str, limit: int, offset: int) -> list[Thread]:
    async with await open_store(db) as store:
        return await store.list_threads(tenant_id=tenant, limit=limit, offset=offset)


@threads_app.command("show")
def threads_show(
    thread_id: Annotated[str, typer.Argument(metavar="THREAD", help="The thread's id.")],
    db: Db = None,
    messages: Annotated[
        int,
        typer.Option(metavar="N", help="How many of the newest messages to show.", min=0, max=1000),
    ] = 10,
    tenant: LocalTenantOpt = LOCAL_TENANT,
) -> None:
    """Show what the gateway remembers of a thread: summary, facts, working memory, window.

    Example: workingmem threads show th1 --tenant acme --messages 5
    """
    memory, turns = run(_show(db, tenant, thread_id, messages), "Reading the thread…")
    state, thread = memory.state, memory.thread
    console.print(
        f"[bold]{escape(thread.thread_id)}[/] · user {escape(thread.user_id or '—')} · "
        f"{plural(thread.turn_count, 'turn')} · strategy {memory.strategy or 'memory off'}"
    )
    if memory.window_tokens is not None and memory.budget_tokens:
        console.print(f"Window: {memory.window_tokens} of {memory.budget_tokens} tokens.")
    console.print(f"Summary (covers {plural(state.turn_count, 'turn')}, version {state.version}):")
    console.print(escape(state.summary) if state.summary else "  (none)")
    if state.facts:
        facts = Table(title="Facts")
        facts.add_column("turns")
        facts.add_column("fact")
        for fact in state.facts:
            span = "" if fact.first_turn is None else f"{fact.first_turn}-{fact.last_turn}"
            facts.add_row(span, escape(fact.text))
        console.print(facts)
    if memory.agent_memory:
        console.print("Working memory:")
        console.print(escape(memory.agent_memory))
    if turns:
        table = Table(title=f"Newest {len(turns)} messages")
        table.add_column("seq")
        table.add_column("role")
        table.add_column("content")
        for turn in turns:
            content = turn.content if isinstance(turn.content, str) else str(turn.content or "")
            table.add_row(str(turn.seq), turn.role, escape(content))
        console.print(table)


async def _show(
    db: str | None, tenant: str, thread_id: str, count: int
) -> tuple[ThreadMemory, list[Turn]]:
    from ..embedded import default_gateway_config

    async with await open_store(db) as store:
        # Reads only (no model client), sized with the settings serve would use.
        gateway = Gateway(store=store, config=default_gateway_config())
        memory = await gateway.get_thread_memory(tenant_id=tenant, thread_id=thread_id)
        turns: list[Turn] = []
        if count:
            turns = await store.list_turns(
                tenant_id=tenant,
                thread_id=thread_id,
                after_seq=max(0, memory.thread.turn_count - count),
                limit=count,
            )
        return memory, turns


@threads_app.command("forget")
def threads_forget(
    thread_id: Annotated[str, typer.Argument(metavar="THREAD", help="The thread's id.")],
    db: Db = None,
    working_memory: Annotated[
        bool, typer.Option("--working-memory", help="Also erase its working memory.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    tenant: LocalTenantOpt = LOCAL_TENANT,
) -> None:
    """Forget a thread's summary and facts (the messages stay, and are not summarized again).

    Example: workingmem threads forget th1 --tenant acme --yes
    """
    if not yes:
        typer.confirm(f"Forget the memory of thread {thread_id!r} of {tenant!r}?", abort=True)
    run(_forget(db, tenant, thread_id, working_memory), "Forgetting…")
    console.print(f"Forgot the memory of thread [bold]{escape(thread_id)}[/].")


async def _forget(db: str | None, tenant: str, thread_id: str, working_memory: bool) -> None:
    async with await open_store(db) as store:
        agent = AgentMemoryConfig() if working_memory else None  # conversation scope
        gateway = Gateway(store=store, agent_memory=agent)  # forgets: no model client
        await gateway.reset_thread_memory(
            tenant_id=tenant, thread_id=thread_id, working_memory=working_memory
        )


@threads_app.command("delete")
def threads_delete(
    thread_id: Annotated[str, typer.Argument(metavar="THREAD", help="The thread's id.")],
    db: Db = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    tenant: LocalTenantOpt = LOCAL_TENANT,
) -> None:
    """Delete a thread and everything of it: its messages, summary, versions and its
    conversation's working memory (not a reset: nothing of it remains).

    Example: workingmem threads delete th1 --tenant acme --yes
    """
    if not yes:
        typer.confirm(f"Delete thread {thread_id!r} of {tenant!r} and all of it?", abort=True)
    run(_delete(db, tenant, thread_id), "Deleting…")
    console.print(f"Deleted thread [bold]{escape(thread_id)}[/].")


async def _delete(db: str | None, tenant: str, thread_id: str) -> None:
    async with await open_store(db) as store:
        await Gateway(store=store).delete_thread(tenant_id=tenant, thread_id=thread_id)
