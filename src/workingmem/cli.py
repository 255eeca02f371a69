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
import uuid
from collections.abc import Coroutine
from datetime import datetime
from typing import Annotated, Any, TypeVar

try:
    import typer
    import uvicorn
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise SystemExit(
        "the workingmem command needs the server extra: pip install 'workingmem[server]'"
    ) from exc

from . import (
    AgentMemoryConfig,
    Gateway,
    GatewayConfig,
    ModelInfo,
    OpenAIClient,
    Profile,
    Strategy,
    WorkingMemory,
    WorkingMemoryConfig,
    WorkingMemoryError,
    open_store,
)
from .gateway import ThreadMemory
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

    Example: workingmem serve --upstream http://127.0.0.1:8000/v1
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
            help="The OpenAI-compatible upstream's base URL (…/v1); default $OPENAI_BASE_URL, "
            "else OpenAI. Its key comes from $OPENAI_API_KEY."
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
