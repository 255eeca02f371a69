"""The `workingmem` command: thin commands over the library.

    $ workingmem demo                          # store a conversation, show what the model gets
    $ workingmem serve --upstream http://127.0.0.1:8000/v1   # the memory gateway on :8080
    $ workingmem keys create --tenant acme     # an API key; serve then needs one per request
    $ workingmem threads show th1 --tenant acme

Needs the ``server`` extra (typer, rich, FastAPI, uvicorn). Every command's help has an example.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from datetime import datetime
from typing import Annotated, Any, TypeVar

try:
    import typer
    import uvicorn
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress
    from rich.table import Table
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise SystemExit(
        "the workingmem command needs the server extra: pip install 'workingmem[server]'"
    ) from exc

from . import (
    AgentMemoryConfig,
    Gateway,
    GatewayConfig,
    OpenAIClient,
    WorkingMemoryError,
    open_store,
)
from .demo import DemoResult
from .gateway import ThreadMemory
from .llm import LOCAL_MODEL
from .stores.keys import ApiKey, ApiKeyStore, NewApiKey
from .types import Thread, Turn

__all__ = ["app", "main"]

app = typer.Typer(
    help="workingmem: conversation memory for LLM applications.", no_args_is_help=True
)
console = Console()
errors = Console(stderr=True)
keys_app = typer.Typer(
    help="API keys of the service, one tenant each: create, list, revoke.\n\n"
    "Example: workingmem keys create --tenant acme --label 'chat backend'",
    no_args_is_help=True,
)
threads_app = typer.Typer(
    help="A tenant's threads and their memory: list, show, forget.\n\n"
    "Example: workingmem threads list --tenant acme",
    no_args_is_help=True,
)
app.add_typer(keys_app, name="keys")
app.add_typer(threads_app, name="threads")

T = TypeVar("T")
Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL or SQLite file; default $WORKINGMEM_DATABASE_URL, "
        "else .workingmem/memory.db",
    ),
]
TenantOpt = Annotated[str, typer.Option("--tenant", help="The tenant.")]


@app.callback()
def _root() -> None:
    """workingmem: conversation memory for LLM applications.

    Example: workingmem serve --upstream http://127.0.0.1:8000/v1
    """


@app.command()
def demo(
    db: Db = None,
) -> None:
    """Play a 30-turn conversation through the gateway and show what the model received.

    Runs on the embedded defaults: the SQLite file and, unless --upstream is given to serve or
    OPENAI_BASE_URL / OPENAI_API_KEY are set, the local model on the CPU (no key, no network).
    Then it prints, for the last request, what SLIDING_WINDOW and SUMMARY_BUFFER put in front
    of the model: the tokens, the notes, the facts.

    Example: workingmem demo
    """
    from .demo import DEMO_USER_MESSAGES, run_demo
    from .embedded import choose_upstream

    try:
        upstream = choose_upstream()
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
            progress.console.print(f"[dim]assistant:[/] {escape(_short(answer, 200))}")

        async def play() -> DemoResult:
            try:
                return await run_demo(db=db, on_turn=on_turn, upstream=upstream)
            finally:
                await upstream.aclose()

        try:
            result = asyncio.run(play())
        except WorkingMemoryError as exc:
            errors.print(f"[red]error:[/] {escape(str(exc))}")
            raise typer.Exit(1) from exc
    _print_demo(result, db)


def _print_demo(result: DemoResult, db: str | None) -> None:
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
    facts = result.state.fact_details
    console.print(f"Facts stored ({len(facts)}):")
    for fact in facts:
        where = f" [dim](turns {fact.first_turn}-{fact.last_turn})[/]" if fact.first_turn else ""
        console.print(f"  - {escape(fact.text)}{where}")
    console.print(
        f"\nDone: {result.turns} turns in thread [bold]{result.thread_id}[/] of tenant 'local' "
        f"in {db or '.workingmem/memory.db'}, summary version {result.state.version}."
    )
    console.print(
        "Next: [bold]workingmem serve[/] and open "
        f"http://127.0.0.1:8080/ui/threads/{result.thread_id} to see and forget this memory; "
        "point any OpenAI client at http://127.0.0.1:8080/v1 with an X-Thread-Id header."
    )


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# -- helpers -------------------------------------------------------------------------------


def _run(work: Coroutine[Any, Any, T], doing: str) -> T:
    """Runs one piece of async work with a spinner; a library error ends the command (1)."""
    try:
        with console.status(doing):
            return asyncio.run(work)
    except WorkingMemoryError as exc:
        errors.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from exc


def _key_store(store: object) -> ApiKeyStore:
    if not isinstance(store, ApiKeyStore):  # pragma: no cover - both stores keep keys
        raise typer.BadParameter("this database keeps no API keys", param_hint="--db")
    return store


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment is not None else "—"


# -- serve ---------------------------------------------------------------------------------


@app.command()
def serve(
    db: Db = None,
    host: Annotated[
        str, typer.Option(help="The address to bind; without API keys only loopback is allowed.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port.", min=0, max=65535)] = 8080,
    upstream: Annotated[
        str | None,
        typer.Option(
            help="The OpenAI-compatible upstream's base URL (…/v1); default $OPENAI_BASE_URL "
            "(or OpenAI when only $OPENAI_API_KEY is set), else the local model on the CPU. "
            "Its key comes from $OPENAI_API_KEY."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="The default answering model (a request's model wins).")
    ] = None,
    cheap_model: Annotated[
        str | None, typer.Option(help="The model of the background summary updates.")
    ] = None,
) -> None:
    """Run the memory gateway: OpenAI's /v1/chat/completions with memory, REST, a web page.

    Point any OpenAI client at http://HOST:PORT/v1, send only the new message with an
    X-Thread-Id header, and the model gets the thread's memory. With API keys in the database
    every request needs one; without keys it serves one local tenant, on loopback only.
    The page is at http://HOST:PORT/ui/.

    Example: OPENAI_API_KEY=sk-... workingmem serve --upstream https://api.openai.com/v1
    """
    from .service import ServiceSettings, create_app
    from .service.state import is_loopback

    have_keys = _run(_has_keys(db), "Opening the database…")
    if not have_keys and not is_loopback(host):
        errors.print(
            f"[red]Refusing to bind {escape(host)}:[/] the database has no API keys, so the "
            "server would serve its local tenant to anyone who can reach it. Create a key "
            "(workingmem keys create --tenant NAME) or bind to 127.0.0.1."
        )
        raise typer.Exit(2)
    defaults = GatewayConfig()
    config = GatewayConfig(
        default_model=model or defaults.default_model,
        cheap_model=cheap_model or model or defaults.cheap_model,
    )
    settings = ServiceSettings(
        database_url=db,
        upstream_base_url=upstream,
        upstream_api_key=os.environ.get("OPENAI_API_KEY") or None,
        gateway=config,
    )
    if have_keys:
        console.print("API keys: every request needs 'Authorization: Bearer <key>'.")
    else:
        console.print(
            "No API keys in the database: serving the single local tenant 'local', on loopback "
            "only. Create a key with 'workingmem keys create --tenant NAME' to serve tenants."
        )
    if upstream or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        where = upstream or os.environ.get("OPENAI_BASE_URL") or "OpenAI"
        console.print(f"Upstream: {escape(where)}.")
    else:
        console.print(
            f"Upstream: none configured, so the local model {LOCAL_MODEL} answers, on the CPU "
            "(no key, no network). Set --upstream or OPENAI_API_KEY to use another model."
        )
    shown = f"[{host}]" if ":" in host else host
    console.print(f"OpenAI base URL: http://{shown}:{port}/v1 · page: http://{shown}:{port}/ui/")
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info")


async def _has_keys(db: str | None) -> bool:
    async with await open_store(db) as store:
        return await _key_store(store).has_api_keys()


# -- keys ----------------------------------------------------------------------------------


@keys_app.command("create")
def keys_create(
    tenant: TenantOpt,
    label: Annotated[str, typer.Option(help="What the key is for.")] = "",
    db: Db = None,
) -> None:
    """Create an API key for a tenant. The key is printed once, alone on the last line.

    Only its SHA-256 is stored: keep the key now, it cannot be shown again.

    Example: workingmem keys create --tenant acme --label "chat backend"
    """
    created = _run(_create_key(db, tenant, label), "Creating the key…")
    console.print(
        f"Created key [bold]{created.key.key_id}[/] for tenant [bold]{escape(tenant)}[/]. "
        "Keep it now: it is shown once."
    )
    typer.echo(created.secret)


async def _create_key(db: str | None, tenant: str, label: str) -> NewApiKey:
    async with await open_store(db) as store:
        return await _key_store(store).create_api_key(tenant_id=tenant, label=label)


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's keys.")] = None,
    db: Db = None,
) -> None:
    """List API keys (never the secrets): id, tenant, label, start of the key, state.

    Example: workingmem keys list --tenant acme
    """
    keys = _run(_list_keys(db, tenant), "Reading the keys…")
    if not keys:
        console.print("No API keys.")
        return
    table = Table(title="API keys")
    table.add_column("id", no_wrap=True)
    for column in ("tenant", "label", "key", "created (UTC)", "state"):
        table.add_column(column)
    for key in keys:
        table.add_row(
            key.key_id,
            escape(key.tenant_id),
            escape(key.label),
            f"{key.hint}…",
            _when(key.created_at),
            "active" if key.active else f"revoked {_when(key.revoked_at)}",
        )
    console.print(table)


async def _list_keys(db: str | None, tenant: str | None) -> list[ApiKey]:
    async with await open_store(db) as store:
        return await _key_store(store).list_api_keys(tenant_id=tenant)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (key_…), from keys list.")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Revoke only if the key is this tenant's.")
    ] = None,
    db: Db = None,
) -> None:
    """Revoke an API key: every later request with it gets 401.

    Example: workingmem keys revoke key_0123456789abcdef --tenant acme
    """
    key = _run(_revoke_key(db, key_id, tenant), "Revoking the key…")
    console.print(
        f"Revoked key [bold]{key.key_id}[/] of tenant [bold]{escape(key.tenant_id)}[/] "
        f"({_when(key.revoked_at)} UTC)."
    )


async def _revoke_key(db: str | None, key_id: str, tenant: str | None) -> ApiKey:
    async with await open_store(db) as store:
        return await _key_store(store).revoke_api_key(key_id=key_id, tenant_id=tenant)


# -- threads -------------------------------------------------------------------------------


@threads_app.command("list")
def threads_list(
    tenant: TenantOpt,
    db: Db = None,
    limit: Annotated[int, typer.Option(help="How many threads.", min=1, max=1000)] = 50,
    offset: Annotated[int, typer.Option(help="How many of the newest to skip.", min=0)] = 0,
) -> None:
    """List a tenant's threads, most recently updated first.

    Example: workingmem threads list --tenant acme --limit 20
    """
    threads = _run(_list_threads(db, tenant, limit, offset), "Reading the threads…")
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
            _when(thread.updated_at),
        )
    console.print(table)


async def _list_threads(db: str | None, tenant: str, limit: int, offset: int) -> list[Thread]:
    async with await open_store(db) as store:
        return await store.list_threads(tenant_id=tenant, limit=limit, offset=offset)


@threads_app.command("show")
def threads_show(
    thread_id: Annotated[str, typer.Argument(help="The thread's id.")],
    tenant: TenantOpt,
    db: Db = None,
    messages: Annotated[
        int, typer.Option(help="How many of the newest messages to show.", min=0, max=1000)
    ] = 10,
) -> None:
    """Show what the gateway remembers of a thread: summary, facts, working memory, window.

    Example: workingmem threads show th1 --tenant acme --messages 5
    """
    memory, turns = _run(_show(db, tenant, thread_id, messages), "Reading the thread…")
    state, thread = memory.state, memory.thread
    console.print(
        f"[bold]{escape(thread.thread_id)}[/] · user {escape(thread.user_id or '—')} · "
        f"{thread.turn_count} turns · strategy {memory.strategy or 'memory off'}"
    )
    if memory.window_tokens is not None and memory.budget_tokens:
        console.print(f"Window: {memory.window_tokens} of {memory.budget_tokens} tokens.")
    console.print(f"Summary (covers {state.turn_count} turns, version {state.version}):")
    console.print(escape(state.summary) if state.summary else "  (none)")
    if state.fact_details or state.facts:
        facts = Table(title="Facts")
        facts.add_column("turns")
        facts.add_column("fact")
        for fact in state.fact_details:
            span = "" if fact.first_turn is None else f"{fact.first_turn}-{fact.last_turn}"
            facts.add_row(span, escape(fact.text))
        console.print(facts)
    if memory.working_memory:
        console.print("Working memory:")
        console.print(escape(memory.working_memory))
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
    async with await open_store(db) as store, OpenAIClient(api_key="unused") as llm:
        gateway = Gateway(store=store, llm=llm)  # reads only: no model is called
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
    thread_id: Annotated[str, typer.Argument(help="The thread's id.")],
    tenant: TenantOpt,
    db: Db = None,
    working_memory: Annotated[
        bool, typer.Option("--working-memory", help="Also erase its working memory.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Forget a thread's summary and facts (the messages stay, and are not summarized again).

    Example: workingmem threads forget th1 --tenant acme --yes
    """
    if not yes:
        typer.confirm(f"Forget the memory of thread {thread_id!r} of {tenant!r}?", abort=True)
    _run(_forget(db, tenant, thread_id, working_memory), "Forgetting…")
    console.print(f"Forgot the memory of thread [bold]{escape(thread_id)}[/].")


async def _forget(db: str | None, tenant: str, thread_id: str, working_memory: bool) -> None:
    async with await open_store(db) as store, OpenAIClient(api_key="unused") as llm:
        agent = AgentMemoryConfig() if working_memory else None  # conversation scope
        gateway = Gateway(store=store, llm=llm, agent_memory=agent)
        await gateway.reset_thread_memory(
            tenant_id=tenant, thread_id=thread_id, working_memory=working_memory
        )


def main() -> None:
    """Entry point of the `workingmem` command."""
    app()
