"""Imports flow one way: the layers drawn in the style guide, checked on every module's source.

errors, types         the bottom: errors import nothing of the package, types only errors
strategies, tokens,   pure: only types, errors and themselves; no driver, SDK or web stack
messages, formats
stores, llm           I/O: never the layers that combine them, nor each other
memory ... gateway    combine them
service, cli          on top: the only homes of the web and CLI stacks; nothing imports cli
integrations          on top of the library, beside service: nothing of the library imports
                      them, and each framework is imported by its own integration alone

Every import counts, also one inside a function or under ``TYPE_CHECKING``: a deferred import
still ties the layers together. Each module's source is read with `ast`, not imported, so a
violation is reported as the module, the import and its line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import workingmem

PACKAGE = Path(workingmem.__file__).resolve().parent

DRIVERS_AND_SDKS = (
    "sqlite3",
    "psycopg",
    "psycopg_pool",
    "openai",
    "anthropic",
    "httpx",
    "llama_cpp",
)
WEB_STACK = ("fastapi", "starlette", "uvicorn")
CLI_STACK = ("typer", "rich")
FRAMEWORKS = {
    "agents": "workingmem.integrations.openai_agents",
    "langchain": "workingmem.integrations.langchain",
    "langchain_core": "workingmem.integrations.langchain",
    "langgraph": "workingmem.integrations.langchain",
    "pydantic_ai": "workingmem.integrations.pydantic_ai",
    "llama_index": "workingmem.integrations.llama_index",
    "anthropic": "workingmem.integrations.anthropic_memory workingmem.llm.anthropic_client",
    "mcp": "workingmem.service.mcp",
}
"""Each agent framework (an SDK) and the modules that may import it: its integration (and,
for an SDK that is also an upstream's, its LLM client), space-separated."""

Imports = Mapping[str, tuple[tuple[str, int], ...]]
"""Module name -> what it imports (absolute names) and on which line."""


@dataclass(frozen=True)
class Rule:
    """Modules within `importers` (but not within `exempt`) import nothing within `forbidden`,
    unless it is also within `allowed`."""

    why: str
    importers: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()


def within(name: str, prefixes: Iterable[str]) -> bool:
    """`name` is one of `prefixes` or inside one (``a.b.c`` is within ``a.b``; ``a.bc`` is not)."""
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> tuple[tuple[str, int], ...]:
    """Every name `path` imports, made absolute: ``from .base import X`` in
    ``workingmem.stores.sqlite`` gives ``workingmem.stores.base`` and ``workingmem.stores.base.X``
    (the second may be a submodule)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            found.append((source, node.lineno))
            found.extend((f"{source}.{alias.name}", node.lineno) for alias in node.names)
    return tuple(found)


def package_imports() -> Imports:
    return {module_name(path): imports_of(path) for path in sorted(PACKAGE.rglob("*.py"))}


def violations(rule: Rule, imports: Imports) -> list[str]:
    """One line per offending import: the module, what it imports, where, and why not.

    ``from ..service import create_app`` is reported once, as ``workingmem.service``, not
    again as ``workingmem.service.create_app``.
    """
    found: list[str] = []
    for module, names in imports.items():
        if not within(module, rule.importers) or within(module, rule.exempt):
            continue
        offending = [
            (name, line)
            for name, line in names
            if within(name, rule.forbidden) and not within(name, rule.allowed)
        ]
        found.extend(
            f"{module} imports {name} (line {line}): {rule.why}"
            for name, line in offending
            if not any(
                other_line == line and other != name and within(name, [other])
                for other, other_line in offending
            )
        )
    return found


def pure(package: str) -> Rule:
    return Rule(
        why=f"{package} is pure: it imports only types, errors, data URLs and itself, and does "
        "no I/O",
        importers=(package,),
        forbidden=("workingmem", *DRIVERS_AND_SDKS, *WEB_STACK, *CLI_STACK),
        allowed=("workingmem.types", "workingmem.errors", "workingmem.data_urls", package),
    )


RULES = [
    pytest.param(
        Rule(
            why="errors are the bottom layer: they import nothing of the package",
            importers=("workingmem.errors",),
            forbidden=("workingmem",),
        ),
        id="errors-are-the-bottom",
    ),
    pytest.param(
        Rule(
            why="types sit on the errors alone: settings raise the library's ValidationError",
            importers=("workingmem.types",),
            forbidden=("workingmem",),
            allowed=("workingmem.errors", "workingmem.types"),
        ),
        id="types-import-only-errors",
    ),
    pytest.param(
        Rule(
            why="data URLs sit beside the errors: the pure packages read files through them",
            importers=("workingmem.data_urls",),
            forbidden=("workingmem", *DRIVERS_AND_SDKS),
            allowed=("workingmem.data_urls",),
        ),
        id="data-urls-import-nothing",
    ),
    pytest.param(pure("workingmem.strategies"), id="strategies-are-pure"),
    pytest.param(pure("workingmem.tokens"), id="tokens-are-pure"),
    pytest.param(pure("workingmem.messages"), id="messages-are-pure"),
    pytest.param(pure("workingmem.formats"), id="formats-are-pure"),
    pytest.param(
        Rule(
            why="stores do I/O for the layers above; they never reach up, nor call a model",
            importers=("workingmem.stores",),
            forbidden=(
                "workingmem.llm",
                "workingmem.memory",
                "workingmem.context",
                "workingmem.gateway",
                "workingmem.service",
                "workingmem.cli",
            ),
        ),
        id="stores-never-reach-up",
    ),
    pytest.param(
        Rule(
            why="llm does I/O for the layers above; it never reaches up, nor into the stores",
            importers=("workingmem.llm",),
            forbidden=(
                "workingmem.stores",
                "workingmem.memory",
                "workingmem.context",
                "workingmem.gateway",
                "workingmem.service",
                "workingmem.cli",
            ),
        ),
        id="llm-never-reaches-up",
    ),
    pytest.param(
        Rule(
            why="the web and CLI stacks are extras: only service and cli may import them",
            importers=("workingmem",),
            forbidden=(*WEB_STACK, *CLI_STACK),
            exempt=("workingmem.service", "workingmem.cli"),
        ),
        id="web-and-cli-stacks-only-on-top",
    ),
    pytest.param(
        Rule(
            why="integrations adapt the library to frameworks: the library never needs them",
            importers=("workingmem",),
            forbidden=("workingmem.integrations",),
            exempt=("workingmem.integrations",),
        ),
        id="nothing-imports-integrations",
    ),
    *(
        pytest.param(
            Rule(
                why=f"{framework} is an extra: only {home} may import it",
                importers=("workingmem",),
                forbidden=(framework,),
                exempt=tuple(home.split()),
            ),
            id=f"{framework}-only-in-its-integration",
        )
        for framework, home in FRAMEWORKS.items()
    ),
    pytest.param(
        Rule(
            why="cli is the top: the library never imports it",
            importers=("workingmem",),
            forbidden=("workingmem.cli",),
            exempt=("workingmem.cli",),
        ),
        id="nothing-imports-cli",
    ),
]


@pytest.mark.parametrize("rule", RULES)
def test_imports_flow_one_way(rule: Rule) -> None:
    found = violations(rule, package_imports())
    assert not found, "\n".join(found)


def test_the_scan_sees_every_kind_of_import() -> None:
    """The rules above pass on what the scan finds, so the scan must find real imports:
    plain, from-relative (also ``..``), and the names a from-import takes."""
    imports = {module: {name for name, _ in names} for module, names in package_imports().items()}
    assert "typer" in imports["workingmem.cli._app"]  # inside a try block
    assert "workingmem.stores.sql.SQLStore" in imports["workingmem.stores.sqlite"]  # from .sql
    assert "workingmem.types.Turn" in imports["workingmem.messages"]
    assert "workingmem.__version__" in imports["workingmem.service.app"]
    assert {"workingmem.types", "workingmem.errors", "workingmem.strategies"} <= set(imports)


def test_a_violation_names_the_module_the_import_and_the_line() -> None:
    imports = {
        "workingmem.strategies.window": (("workingmem.types.Turn", 3), ("psycopg", 7)),
        "workingmem.strategies.summary_buffer": (
            ("workingmem.stores.base", 5),
            ("workingmem.stores.base.StateWrite", 5),
        ),
    }
    why = "workingmem.strategies is pure: it imports only types, errors, data URLs and itself, "
    assert violations(pure("workingmem.strategies"), imports) == [
        f"workingmem.strategies.window imports psycopg (line 7): {why}and does no I/O",
        "workingmem.strategies.summary_buffer imports workingmem.stores.base (line 5): "
        f"{why}and does no I/O",
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("workingmem.gateway", True, id="itself"),
        pytest.param("workingmem.gateway.Gateway", True, id="inside"),
        pytest.param("workingmem.gateway_config", False, id="a-longer-name-is-not-inside"),
    ],
)
def test_within_is_by_dotted_part(name: str, expected: bool) -> None:
    assert within(name, ["workingmem.gateway"]) is expected
