"""`workingmem serve` and `workingmem mcp`: the memory gateway over HTTP, and a user's
working memory to an MCP client over stdio."""

from __future__ import annotations

import asyncio
import copy
import os
from dataclasses import replace
from typing import Annotated, Any, Literal

import typer
import uvicorn
from rich.markup import escape

from .. import GatewayConfig, WorkingMemoryError, open_store
from ..llm import LOCAL_MODEL
from ..service.settings import LOCAL_TENANT
from ._app import (
    Db,
    LocalModelOpt,
    LocalModelSha256Opt,
    LocalTenantOpt,
    MemorySchemaOpt,
    MemoryScopeOpt,
    MemoryTemplateOpt,
    agent_memory_option,
    app,
    console,
    errors,
    local_model_option,
    local_model_unused,
    memory_kind,
    run,
)
from ._keys import key_store


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
    context_window: Annotated[
        int | None,
        typer.Option(
            metavar="TOKENS",
            min=1_000,
            help="The context window of the models the gateway answers with (the memory and "
            "the answer's cap must fit it). Default: 128,000; 200,000 with --upstream-api "
            "anthropic, as every Claude model has.",
        ),
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
    from ..embedded import ANTHROPIC_GATEWAY_CONFIG, upstream_env
    from ..service import ServiceSettings, create_app
    from ..service.app import APP_FACTORY
    from ..service.settings import SETTINGS_ENV
    from ..service.state import is_loopback

    agent_memory = agent_memory_option(
        working_memory_template, working_memory_schema, working_memory_scope
    )
    have_keys = run(_has_keys(db), "Opening the database…")
    if not have_keys and not is_loopback(host):
        errors.print(
            f"[red]Refusing to bind {escape(host)}:[/] the database has no API keys, so the "
            "server would serve its local tenant to anyone who can reach it. Create a key "
            "(workingmem keys create --tenant NAME) or bind to 127.0.0.1."
        )
        raise typer.Exit(2)
    defaults = ANTHROPIC_GATEWAY_CONFIG if upstream_api == "anthropic" else GatewayConfig()
    config = defaults.model_copy(
        update={
            "default_model": model or defaults.default_model,
            "cheap_model": cheap_model or model or defaults.cheap_model,
            "default_context_window": context_window or defaults.default_context_window,
        }
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
        local_model_unused(local_model, "--upstream-api anthropic")
        console.print(f"Upstream: {escape(upstream or env_url or 'Anthropic')} (Messages API).")
    elif upstream or env_url or env_key:
        local_model_unused(local_model, "--upstream, OPENAI_BASE_URL or OPENAI_API_KEY")
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
        chosen = local_model_option(local_model, local_model_sha256)
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
            f"Working memory: on ({memory_kind(agent_memory)}, "
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
    from ..service.mcp import Principal, build_mcp_server, fixed, mcp_memory, run_stdio

    config = agent_memory_option(working_memory_template, working_memory_schema, "user")
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
    from ..llm._weights import INSTALL_COMMAND

    if not _local_model_available():
        errors.print(
            "[red]error:[/] no upstream is configured (--upstream, OPENAI_BASE_URL or "
            "OPENAI_API_KEY) and the local model is not installed: "
            f"{escape(INSTALL_COMMAND)}"
        )
        raise typer.Exit(1)


def _local_model_available() -> bool:
    from ..llm.local import LocalModelClient

    return LocalModelClient.available()


async def _has_keys(db: str | None) -> bool:
    async with await open_store(db) as store:
        return await key_store(store).has_api_keys()
