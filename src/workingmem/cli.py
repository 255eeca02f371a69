"""The `workingmem` command: thin commands over the library.

    $ workingmem demo                          # store a conversation, show what the model gets
    $ workingmem serve --upstream http://127.0.0.1:8000/v1   # the memory gateway on :8080
    $ workingmem keys create --tenant acme     # an API key; serve then needs one per request
    $ workingmem threads show th1 --tenant acme

Needs the ``server`` extra (typer, rich, FastAPI, uvicorn). Every command's help has an example.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.metadata
import json
import os
from collections.abc import Coroutine
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

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
    WorkingMemoryError,
    open_store,
)
from .demo import DemoResult
from .embedded import LOCAL_MODEL_ENV, LOCAL_MODEL_SHA256_ENV, LocalModelFile
from .gateway import ThreadMemory
from .llm import LOCAL_MODEL
from .service.settings import LOCAL_TENANT
from .stores.documents import Scope
from .stores.keys import ApiKey, ApiKeyStore, NewApiKey
from .types import Thread, Turn

__all__ = ["app", "main"]

# Plain help (no rich panels): options show a metavar where they take a value and nothing
# where they are flags, instead of typer's type tags (<str>, <bool>).
HELP_STYLE: Any = None
app = typer.Typer(
    help="workingmem: conversation memory for LLM applications.",
    no_args_is_help=True,
    rich_markup_mode=HELP_STYLE,
)
console = Console()
errors = Console(stderr=True)
keys_app = typer.Typer(
    help="API keys of the service, one tenant each: create, list, revoke.\n\n"
    "Example: workingmem keys create --tenant acme --label 'chat backend'",
    no_args_is_help=True,
    rich_markup_mode=HELP_STYLE,
)
threads_app = typer.Typer(
    help="A tenant's threads and their memory: list, show, forget.\n\n"
    "Example: workingmem threads list --tenant acme",
    no_args_is_help=True,
    rich_markup_mode=HELP_STYLE,
)
app.add_typer(keys_app, name="keys")
app.add_typer(threads_app, name="threads")

T = TypeVar("T")
Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Database URL or SQLite file; default $WORKINGMEM_DATABASE_URL, "
        "else .workingmem/memory.db",
    ),
]
TenantOpt = Annotated[str, typer.Option("--tenant", metavar="TENANT", help="The tenant.")]
MemoryTemplateOpt = Annotated[
    Path | None,
    typer.Option(
        "--working-memory-template",
        metavar="FILE",
        help="Give the model an editable working memory (spec 003) shaped by this Markdown "
        "template.",
    ),
]
MemorySchemaOpt = Annotated[
    Path | None,
    typer.Option(
        "--working-memory-schema",
        metavar="FILE",
        help="Give the model an editable working memory (spec 003) that this JSON Schema "
        "file describes.",
    ),
]
MemoryScopeOpt = Annotated[
    str | None,
    typer.Option(
        "--working-memory-scope",
        metavar="SCOPE",
        help="'conversation' (one working memory per thread, the default) or 'user' (one per "
        "user, shared by the user's threads); alone, a free-form working memory.",
    ),
]
LocalTenantOpt = Annotated[
    str,
    typer.Option(
        "--tenant",
        metavar="TENANT",
        help=f"The tenant; default '{LOCAL_TENANT}', the one a server without API keys serves.",
    ),
]
LocalModelOpt = Annotated[
    Path | None,
    typer.Option(
        "--local-model",
        metavar="PATH",
        envvar=LOCAL_MODEL_ENV,
        help=f"Another GGUF file for the local model (a 0.5-1.5B instruct model writes better "
        f"summaries), used when no upstream is configured; default {LOCAL_MODEL}.",
    ),
]
LocalModelSha256Opt = Annotated[
    str | None,
    typer.Option(
        "--local-model-sha256",
        metavar="HEX",
        envvar=LOCAL_MODEL_SHA256_ENV,
        help="The SHA-256 the --local-model file must have, checked before it is loaded.",
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"workingmem {importlib.metadata.version('workingmem')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """workingmem: conversation memory for LLM applications.

    Example: workingmem serve --upstream http://127.0.0.1:8000/v1
    """


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
    from .demo import DEMO_USER_MESSAGES, run_demo
    from .embedded import choose_upstream, upstream_env

    agent_memory = _agent_memory(
        working_memory_template, working_memory_schema, working_memory_scope
    )
    chosen = None
    if any(upstream_env()):
        _local_model_unused(local_model, "OPENAI_BASE_URL / OPENAI_API_KEY")
    else:
        chosen = _local_model_file(local_model, local_model_sha256)
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
            progress.console.print(f"[dim]assistant:[/] {escape(_short(answer, 200))}")

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


def _agent_memory(
    template: Path | None, schema: Path | None, scope: str | None
) -> AgentMemoryConfig | None:
    """The working memory the options ask for; None when they ask for none. A file that
    cannot be read or a setting the library refuses ends the command with one line (2)."""
    if template is None and schema is None and scope is None:
        return None
    try:
        return AgentMemoryConfig(
            template=template.read_text(encoding="utf-8") if template else None,
            schema=json.loads(schema.read_text(encoding="utf-8")) if schema else None,
            scope=cast(Scope, scope or "conversation"),
        )
    except OSError as exc:
        errors.print(f"[red]error:[/] cannot read {escape(str(exc.filename))}: {exc.strerror}")
    except json.JSONDecodeError as exc:
        errors.print(f"[red]error:[/] {escape(str(schema))} is not JSON: {escape(str(exc))}")
    except WorkingMemoryError as exc:
        errors.print(f"[red]error:[/] working memory: {escape(str(exc))}")
    raise typer.Exit(2)


def _local_model_file(path: Path | None, sha256: str | None) -> LocalModelFile | None:
    """The other GGUF file the options name, checked; None for SmolLM2. A missing file, one
    that is not a GGUF or has another SHA-256 ends the command with one line (2); no
    llama-cpp-python, with the command that installs it (1)."""
    from .embedded import local_model_file
    from .llm._weights import LocalModelUnavailableError

    if path is None:
        if sha256 is not None:
            errors.print(
                "[red]error:[/] --local-model-sha256 (or $WORKINGMEM_LOCAL_MODEL_SHA256) needs "
                "--local-model (or $WORKINGMEM_LOCAL_MODEL): the default model's SHA-256 is "
                "always checked",
                soft_wrap=True,  # one line, whatever the terminal's width
            )
            raise typer.Exit(2)
        return None
    try:
        return local_model_file(path, sha256)
    except ImportError as exc:
        errors.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from exc
    except LocalModelUnavailableError as exc:
        errors.print(f"[red]error:[/] --local-model: {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from exc


def _local_model_unused(path: Path | None, upstream: str) -> None:
    if path is not None:
        console.print(
            f"Not using --local-model {escape(str(path))}: an upstream is configured "
            f"({escape(upstream)})."
        )


def _kind(agent_memory: AgentMemoryConfig) -> str:
    if agent_memory.schema is not None:
        return "JSON schema"
    return "Markdown template" if agent_memory.template is not None else "free-form"


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
        f"\nDone: {_count(result.turns, 'turn')} in thread [bold]{result.thread_id}[/] of "
        f"tenant 'local' in {db or '.workingmem/memory.db'}, "
        f"summary version {result.state.version}."
    )
    console.print(
        "Next: [bold]workingmem serve[/] and open "
        f"http://127.0.0.1:8080/ui/threads/{result.thread_id} to see and forget this memory; "
        "point any OpenAI client at http://127.0.0.1:8080/v1 with an X-Thread-Id header."
    )


def _count(number: int, noun: str) -> str:
    """``1 turn``, ``2 turns``."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@app.command()
def doctor() -> None:
    """Check the local model: load it, generate a few tokens, say what was found or what is
    wrong and how to fix it.

    Prints the llama-cpp-python build and the CPU features it uses, the weights and their
    checksum, the worker process, the speed and the threads. Exits 1 when a check fails.

    Example: workingmem doctor
    """
    from .doctor import check_local_model

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
        str,
        typer.Option(
            metavar="HOST", help="The address to bind; without API keys only loopback is allowed."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="The port.", min=0, max=65535)] = 8080,
    upstream: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="The OpenAI-compatible upstream's base URL (…/v1); default $OPENAI_BASE_URL "
            "(or OpenAI when only $OPENAI_API_KEY is set), else the local model on the CPU. "
            "Its key comes from $OPENAI_API_KEY. With --upstream-api anthropic: default "
            "$ANTHROPIC_BASE_URL, else Anthropic's API; the key from $ANTHROPIC_API_KEY.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(metavar="MODEL", help="The default answering model (a request's model wins)."),
    ] = None,
    cheap_model: Annotated[
        str | None,
        typer.Option(metavar="MODEL", help="The model of the background summary updates."),
    ] = None,
    working_memory_template: MemoryTemplateOpt = None,
    working_memory_schema: MemorySchemaOpt = None,
    working_memory_scope: MemoryScopeOpt = None,
    upstream_api: Annotated[
        Literal["chat", "responses", "anthropic"],
        typer.Option(
            metavar="API",
            help="What the upstream speaks: 'chat' (chat completions: vLLM, llama.cpp, Ollama, "
            "OpenAI), 'responses' (OpenAI's Responses API: reasoning items round-trip) or "
            "'anthropic' (Anthropic's Messages API: thinking blocks round-trip).",
        ),
    ] = "chat",
    upstream_timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            min=1,
            max=3600,
            help="How long one upstream attempt may take; a request waits at most this "
            "times (retries + 1).",
        ),
    ] = 60.0,
    upstream_retries: Annotated[
        int,
        typer.Option(
            metavar="N", min=0, max=10, help="Retries of an upstream call (429, 5xx, timeouts)."
        ),
    ] = 1,
    workers: Annotated[
        int,
        typer.Option(
            metavar="N",
            min=1,
            max=64,
            help="Worker processes sharing the port and the database, to use more cores; "
            "more than 1 needs an upstream (the local model would be loaded once per process).",
        ),
    ] = 1,
    mcp_user: Annotated[
        str,
        typer.Option(
            metavar="USER",
            help="The user whose working memory an MCP client at /mcp edits when it sends no "
            "X-User-Id header.",
        ),
    ] = "default",
    recall: Annotated[
        float | None,
        typer.Option(
            metavar="RATIO",
            min=0.0,
            max=0.95,
            help="The share of the history's tokens for turns recalled from earlier in the "
            "thread (full-text search for the words of the newest user turn); 0.5 suits long "
            "conversations. Off by default.",
        ),
    ] = None,
    local_model: LocalModelOpt = None,
    local_model_sha256: LocalModelSha256Opt = None,
) -> None:
    """Run the memory gateway: OpenAI's /v1/chat/completions with memory, REST, a web page.

    Point any OpenAI client at http://HOST:PORT/v1, send only the new message with an
    X-Thread-Id header, and the model gets the thread's memory. With API keys in the database
    every request needs one; without keys it serves one local tenant, on loopback only.
    The page is at http://HOST:PORT/ui/; MCP clients reach the working memory (per user) at
    http://HOST:PORT/mcp. With no upstream, the local model answers on the CPU:
    SmolLM2-135M-Instruct, or the GGUF file --local-model names (checked before serving).

    With --workers N, N processes serve the same port and database (SQLite in WAL mode, or
    PostgreSQL); one ask at a time per thread and one memory update at a time hold across
    them through the database's leases.

    Example: OPENAI_API_KEY=sk-... workingmem serve --upstream https://api.openai.com/v1
    (or ANTHROPIC_API_KEY=... workingmem serve --upstream-api anthropic)
    """
    from .embedded import ANTHROPIC_GATEWAY_CONFIG, upstream_env
    from .service import ServiceSettings, create_app
    from .service.app import APP_FACTORY
    from .service.settings import SETTINGS_ENV
    from .service.state import is_loopback

    agent_memory = _agent_memory(
        working_memory_template, working_memory_schema, working_memory_scope
    )
    have_keys = _run(_has_keys(db), "Opening the database…")
    if not have_keys and not is_loopback(host):
        errors.print(
            f"[red]Refusing to bind {escape(host)}:[/] the database has no API keys, so the "
            "server would serve its local tenant to anyone who can reach it. Create a key "
            "(workingmem keys create --tenant NAME) or bind to 127.0.0.1."
        )
        raise typer.Exit(2)
    defaults = ANTHROPIC_GATEWAY_CONFIG if upstream_api == "anthropic" else GatewayConfig()
    config = GatewayConfig(
        default_model=model or defaults.default_model,
        cheap_model=cheap_model or model or defaults.cheap_model,
    )
    settings = ServiceSettings(
        database_url=db,
        upstream_base_url=upstream,
        upstream_api_key=upstream_env(upstream_api)[1],
        upstream_api=upstream_api,
        upstream_timeout=upstream_timeout,
        upstream_max_retries=upstream_retries,
        gateway=config,
        agent_memory=agent_memory,
        mcp_user=mcp_user,
        recall_ratio=recall,
        tune_gc=True,  # the process is the server's own
    )
    if have_keys:
        console.print("API keys: every request needs 'Authorization: Bearer <key>'.")
    else:
        console.print(
            "No API keys in the database: serving the single local tenant 'local', on loopback "
            "only. Create a key with 'workingmem keys create --tenant NAME' to serve tenants."
        )
    env_url, env_key = upstream_env(upstream_api)
    if upstream_api == "anthropic":
        _local_model_unused(local_model, "--upstream-api anthropic")
        console.print(f"Upstream: {escape(upstream or env_url or 'Anthropic')} (Messages API).")
    elif upstream or env_url or env_key:
        _local_model_unused(local_model, "--upstream, OPENAI_BASE_URL or OPENAI_API_KEY")
        console.print(f"Upstream: {escape(upstream or env_url or 'OpenAI')}.")
    else:
        if workers > 1:
            errors.print(
                f"[red]error:[/] --workers {workers} needs an upstream (--upstream, "
                "OPENAI_BASE_URL or OPENAI_API_KEY): the local model would be loaded once per "
                "worker, each copy competing for the same cores. Serve the local model with "
                "one worker."
            )
            raise typer.Exit(2)
        chosen = _local_model_file(local_model, local_model_sha256)
        if chosen is None:
            _require_local_model()
        else:  # checked: the server's start-up finds its hash and vocabulary in this process
            settings = replace(
                settings, local_model_path=str(chosen.path), local_model_sha256=chosen.sha256
            )
        console.print(
            f"Upstream: none configured, so the local model "
            f"{escape(chosen.path.name) if chosen else LOCAL_MODEL} answers, on the CPU "
            "(no key, no network). Set --upstream or OPENAI_API_KEY to use another model."
        )
    if agent_memory is not None:
        console.print(
            f"Working memory: on ({_kind(agent_memory)}, "
            f"{agent_memory.scope} scope); the model edits it through three tools, and "
            "/v1/threads/{id}/working-memory shows it."
        )
    shown = f"[{host}]" if ":" in host else host
    console.print(f"OpenAI base URL: http://{shown}:{port}/v1 · page: http://{shown}:{port}/ui/")
    console.print(f"MCP (the working memory, per user): http://{shown}:{port}/mcp")
    if workers == 1:
        uvicorn.run(create_app(settings), host=host, port=port, log_config=_log_config())
        return
    console.print(f"Workers: {workers} processes on one port, sharing the database.")
    # Each worker builds its own app from the settings it finds in its environment.
    os.environ[SETTINGS_ENV] = settings.to_json()
    uvicorn.run(
        APP_FACTORY, factory=True, workers=workers, host=host, port=port, log_config=_log_config()
    )


def _log_config() -> dict[str, Any]:
    """uvicorn's own logging, and the package's loggers (``workingmem.*``: a line per model
    call, the memory updates and why one failed) on the same console at INFO, each line with
    its logger's name. Without it they would go unseen, or bare through Python's last resort."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["workingmem"] = {
        "()": "uvicorn.logging.DefaultFormatter",
        "fmt": "%(levelprefix)s %(name)s: %(message)s",
    }
    config["handlers"]["workingmem"] = {
        "formatter": "workingmem",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["workingmem"] = {
        "handlers": ["workingmem"],
        "level": "INFO",
        "propagate": False,
    }
    return config


@app.command()
def mcp(
    db: Db = None,
    tenant: LocalTenantOpt = LOCAL_TENANT,
    user: Annotated[
        str,
        typer.Option(
            "--user",
            metavar="USER",
            help="Whose working memory the client reads and writes (one user per process).",
        ),
    ] = "default",
    working_memory_template: MemoryTemplateOpt = None,
    working_memory_schema: MemorySchemaOpt = None,
) -> None:
    """Serve a user's working memory (spec 003) to an MCP client over stdin and stdout.

    Three tools (get_working_memory, update_working_memory, clear_working_memory), a resource
    with the current memory and a prompt with the instruction block. The memory is per user:
    the same document a gateway with --working-memory-scope user gives that user's threads.
    For a desktop client's config file:

    {"command": "workingmem", "args": ["mcp", "--db", "/path/memory.db", "--user", "ada"]}

    Example: workingmem mcp --user ada --working-memory-template profile.md
    """
    from .service.mcp import Principal, build_mcp_server, fixed, mcp_memory, run_stdio

    config = _agent_memory(working_memory_template, working_memory_schema, "user")
    try:
        principal = Principal(tenant, user)
    except WorkingMemoryError as exc:
        errors.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc

    async def serve_stdio() -> None:
        async with await open_store(db) as store:
            server = build_mcp_server(mcp_memory(config, store), principal=fixed(principal))
            await run_stdio(server)

    asyncio.run(serve_stdio())


def _require_local_model() -> None:
    """One clean line, not a traceback, when no upstream is set and the local model is not
    installed."""
    from .llm._weights import INSTALL_COMMAND

    if not _local_model_available():
        errors.print(
            "[red]error:[/] no upstream is configured (--upstream, OPENAI_BASE_URL or "
            "OPENAI_API_KEY) and the local model is not installed: "
            f"{escape(INSTALL_COMMAND)}"
        )
        raise typer.Exit(1)


def _local_model_available() -> bool:
    from .llm.local import LocalModelClient

    return LocalModelClient.available()


async def _has_keys(db: str | None) -> bool:
    async with await open_store(db) as store:
        return await _key_store(store).has_api_keys()


# -- keys ----------------------------------------------------------------------------------


@keys_app.command("create")
def keys_create(
    tenant: TenantOpt,
    label: Annotated[str, typer.Option(metavar="TEXT", help="What the key is for.")] = "",
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
    tenant: Annotated[
        str | None, typer.Option("--tenant", metavar="TENANT", help="Only this tenant's keys.")
    ] = None,
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
    key_id: Annotated[
        str, typer.Argument(metavar="KEY_ID", help="The key's id (key_…), from keys list.")
    ],
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", metavar="TENANT", help="Revoke only if the key is this tenant's."),
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
    memory, turns = _run(_show(db, tenant, thread_id, messages), "Reading the thread…")
    state, thread = memory.state, memory.thread
    console.print(
        f"[bold]{escape(thread.thread_id)}[/] · user {escape(thread.user_id or '—')} · "
        f"{_count(thread.turn_count, 'turn')} · strategy {memory.strategy or 'memory off'}"
    )
    if memory.window_tokens is not None and memory.budget_tokens:
        console.print(f"Window: {memory.window_tokens} of {memory.budget_tokens} tokens.")
    console.print(f"Summary (covers {_count(state.turn_count, 'turn')}, version {state.version}):")
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
    from .embedded import default_gateway_config

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
    _run(_forget(db, tenant, thread_id, working_memory), "Forgetting…")
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
    _run(_delete(db, tenant, thread_id), "Deleting…")
    console.print(f"Deleted thread [bold]{escape(thread_id)}[/].")


async def _delete(db: str | None, tenant: str, thread_id: str) -> None:
    async with await open_store(db) as store:
        await Gateway(store=store).delete_thread(tenant_id=tenant, thread_id=thread_id)


def main() -> None:
    """Entry point of the `workingmem` command."""
    app()
