"""The `workingmem` command's parts every command uses: the app, its consoles, the options
several commands share (and what they turn into), and running a command's async work."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
from collections.abc import Coroutine
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

try:
    import typer
    import uvicorn  # noqa: F401 - serve's, checked here with the rest of the extra
    from rich.console import Console
    from rich.markup import escape
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise SystemExit(
        "the workingmem command needs the server extra: pip install 'workingmem[server]'"
    ) from exc

from .. import AgentMemoryConfig, WorkingMemoryError
from ..embedded import LOCAL_MODEL_ENV, LOCAL_MODEL_SHA256_ENV, LocalModelFile
from ..llm import LOCAL_MODEL
from ..service.settings import LOCAL_TENANT
from ..stores.documents import Scope

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


def run(work: Coroutine[Any, Any, T], doing: str) -> T:
    """Runs one piece of async work with a spinner; a library error ends the command (1)."""
    try:
        with console.status(doing):
            return asyncio.run(work)
    except WorkingMemoryError as exc:
        errors.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from exc


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment is not None else "—"


def plural(number: int, noun: str) -> str:
    """``1 turn``, ``2 turns``."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def agent_memory_option(
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


def local_model_option(path: Path | None, sha256: str | None) -> LocalModelFile | None:
    """The other GGUF file the options name, checked; None for SmolLM2. A missing file, one
    that is not a GGUF or has another SHA-256 ends the command with one line (2); no
    llama-cpp-python, with the command that installs it (1)."""
    from ..embedded import local_model_file
    from ..llm._weights import LocalModelUnavailableError

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


def local_model_unused(path: Path | None, upstream: str) -> None:
    if path is not None:
        console.print(
            f"Not using --local-model {escape(str(path))}: an upstream is configured "
            f"({escape(upstream)})."
        )


def memory_kind(agent_memory: AgentMemoryConfig) -> str:
    if agent_memory.schema is not None:
        return "JSON schema"
    return "Markdown template" if agent_memory.template is not None else "free-form"
