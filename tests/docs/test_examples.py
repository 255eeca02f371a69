"""Every code example in the README and on the documentation site runs: an example that no
longer works fails CI.

- ``python`` blocks run as written, each a whole program, in a fresh directory. A model they
  name is reached through ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``: a scripted upstream on
  127.0.0.1 (it echoes the last user message, and answers the cheap model's summary calls with
  valid JSON). An example that talks to the gateway at ``http://127.0.0.1:8080`` talks to one
  this test serves on a free port in front of that upstream (the address is the one thing
  rewritten). A block whose prints are followed by ``#>`` lines must print exactly those;
  every block passes ruff. A block that imports a client with an environment of its own
  (LiteLLM: ``tests/clients/litellm``) runs in that environment's Python. An example closes
  what it opens: an unclosed client's warning would fail whichever test runs next.
- ``bash`` (``sh``, ``shell``, ``console``) blocks: every ``workingmem`` command in them
  parses, options and values included.
- ``json`` blocks parse; an MCP host's configuration starts a ``workingmem`` command that parses.
- ``javascript`` blocks run in Node.js beside the client they import, as its test installs it
  (``tests/clients/ai-sdk``, ``tests/clients/openai-agents``), against the gateway served as
  for Python; ``//>`` lines are what they must print.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from pytest_examples import CodeExample, EvalExample, find_examples
from pytest_examples.config import ExamplesConfig
from typer.core import TyperGroup

from tests.helpers import summarizing_responder
from tests.service.live import LiveServer
from workingmem.cli import app
from workingmem.llm.testing import ScriptedResponse, ScriptedUpstream, echo
from workingmem.service import ServiceSettings, create_app

ROOT = Path(__file__).resolve().parents[2]
JS_CLIENTS = {"@openai/agents": "openai-agents", "ai": "ai-sdk"}
"""The package a JavaScript example imports, and the folder of the client test that installs it."""
PY_CLIENTS = {"litellm": ("litellm", {"LITELLM_LOCAL_MODEL_COST_MAP": "True"})}
"""The module a Python example imports that the project's environment lacks: the folder of the
client test whose virtual environment (``.venv``) has it, and what its run adds to the
environment (LiteLLM: its own copy of its price list, not one fetched from the network)."""
PAGES = [ROOT / "README.md", ROOT / "docs"]
GATEWAY_ADDRESS = "127.0.0.1:8080"
"""Where the examples say the gateway is (`workingmem serve`'s default port)."""

pytestmark = [
    # LlamaIndex's workflow lists its agent's attributes with inspect.getmembers, deprecated
    # pydantic ones included: its doing, not the example's (see test_llama_index.py).
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20:inspect"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211:inspect"),
]


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _examples(language: str) -> list[Any]:
    """The blocks of one language on every page, each a test named by its page and line."""
    found = []
    for page in sorted(
        p for base in PAGES for p in ([base] if base.is_file() else base.rglob("*.md"))
    ):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S):
            line = text[: match.start()].count("\n") + 1
            found.append(pytest.param(match.group(1), id=f"{_relative(page)}:{line}"))
    return found


def _python_examples() -> list[Any]:
    return [
        pytest.param(example, id=f"{_relative(example.path)}:{example.start_line}")
        for example in find_examples(*PAGES)  # every ```py... block: none escapes the test
    ]


def responder(request: dict[str, Any]) -> ScriptedResponse:
    """The examples' model: summaries for the cheap model's calls, else an echo."""
    if request.get("response_format") is not None:
        return summarizing_responder(request)
    return echo(request)


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ScriptedUpstream]:
    """A fresh directory and a scripted model behind the SDKs' own environment variables."""
    with ScriptedUpstream(responder=responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url.removesuffix("/v1"))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")
        monkeypatch.chdir(tmp_path)
        yield server


@pytest.mark.parametrize("example", _python_examples())
def test_the_python_example_runs(
    example: CodeExample,
    eval_example: EvalExample,
    upstream: ScriptedUpstream,
    tmp_path: Path,
) -> None:
    # set_config's own signature stops at py310; the config it builds takes py311
    eval_example.config = ExamplesConfig(
        line_length=100, ruff_line_length=100, target_version="py311", isort=True
    )
    eval_example.lint_ruff(example)
    if GATEWAY_ADDRESS in example.source:
        settings = ServiceSettings(
            database_url=f"sqlite:///{tmp_path / 'gateway.db'}",
            upstream_base_url=upstream.base_url,
            upstream_api_key="unused",
        )
        with LiveServer(create_app(settings)) as gateway:
            served = f"127.0.0.1:{gateway.port}"
            _run(
                eval_example,
                dataclasses.replace(
                    example, source=example.source.replace(GATEWAY_ADDRESS, served)
                ),
            )
    else:
        _run(eval_example, example)


def _run(eval_example: EvalExample, example: CodeExample) -> None:
    client = _py_client(example.source)
    if client is not None:
        _run_in(*client, example.source)
    elif "#>" in example.source:
        eval_example.run_print_check(example)
    else:
        eval_example.run(example)


def _py_client(source: str) -> tuple[Path, dict[str, str]] | None:
    """The Python of the client environment whose module `source` imports, if any, and the
    variables its run adds."""
    for module, (folder, env) in PY_CLIENTS.items():
        if re.search(rf"^(import|from) {re.escape(module)}\b", source, flags=re.M):
            python = ROOT / "tests" / "clients" / folder / ".venv" / "bin" / "python"
            if not python.exists():
                pytest.skip(f"the example needs {_relative(python.parents[2])}/.venv")
            return python, env
    return None


def _run_in(python: Path, env: dict[str, str], source: str) -> None:
    """Runs `source` in `python`, in a fresh directory; its output must be its ``#>`` lines,
    when it has any."""
    with tempfile.TemporaryDirectory() as folder:
        ran = subprocess.run(
            [str(python), "-c", source],
            cwd=folder,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert ran.returncode == 0, ran.stderr
    expected = [line.strip().removeprefix("#> ") for line in source.splitlines() if "#>" in line]
    if expected:
        assert ran.stdout.splitlines() == expected


# -- bash and json ---------------------------------------------------------------------------


def commands_in(block: str) -> Iterator[list[str]]:
    """Each `workingmem` command of a shell block, as its arguments."""
    for line in block.replace("\\\n", " ").splitlines():
        for command in re.split(r"&&|\|\||;|\|", line.split(" #", 1)[0]):
            words = shlex.split(command, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words.pop(0)  # VAR=value before the command
            if words and Path(words[0]).name == "workingmem":
                yield words[1:]


def parse(arguments: list[str]) -> None:
    """Parses a command line as the `workingmem` command would (its options and their values),
    without running it."""
    command = typer.main.get_command(app)
    context = typer.Context(command, info_name="workingmem")
    name, words = "workingmem", list(arguments)
    while isinstance(command, TyperGroup):
        assert words, f"{name} needs a command"
        sub = command.get_command(context, words[0])
        assert sub is not None, f"{name} has no command {words[0]!r}"
        command, name, words = sub, words[0], words[1:]
        context = typer.Context(command, info_name=name, parent=context)
    command.make_context(name, words, parent=context.parent)


@pytest.mark.parametrize("block", _examples("(?:bash|sh|shell|console)"))
def test_every_command_of_the_shell_example_parses(block: str) -> None:
    for arguments in commands_in(block):
        try:
            parse(arguments)
        except Exception as exc:  # a usage error, or no such command
            pytest.fail(f"workingmem {shlex.join(arguments)}: {exc}")


@pytest.mark.parametrize("block", _examples("json"))
def test_the_json_example_parses(block: str) -> None:
    document = json.loads(block)
    for server in document.get("mcpServers", {}).values():
        if "url" in server:  # a host that reaches `workingmem serve`'s /mcp over HTTP
            assert server["url"].endswith("/mcp"), server["url"]
            continue
        assert Path(server["command"]).name == "workingmem"
        parse(server["args"])


def _js_client(block: str) -> Path:
    """The client folder whose packages `block` imports (the first of `JS_CLIENTS` it does)."""
    for package, folder in JS_CLIENTS.items():
        if re.search(rf"from '{re.escape(package)}(/[^']*)?';", block):
            return ROOT / "tests" / "clients" / folder
    raise AssertionError(f"a JavaScript example that imports none of {sorted(JS_CLIENTS)}")


@pytest.mark.parametrize("block", _examples("javascript"))
def test_the_javascript_example_runs(
    block: str, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    client = _js_client(block)
    if shutil.which("node") is None or not (client / "node_modules").is_dir():
        pytest.skip(f"the example needs Node.js and `npm ci` in {_relative(client)}")
    settings = ServiceSettings(
        database_url=f"sqlite:///{tmp_path / 'gateway.db'}",
        upstream_base_url=upstream.base_url,
        upstream_api_key="unused",
    )
    program = client / f"example-{tmp_path.name}.mjs"
    with LiveServer(create_app(settings)) as gateway:
        program.write_text(block.replace(GATEWAY_ADDRESS, f"127.0.0.1:{gateway.port}"))
        try:
            ran = subprocess.run(
                ["node", program.name],
                cwd=client,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            program.unlink()
    assert ran.returncode == 0, ran.stderr
    expected = [line.removeprefix("//> ") for line in block.splitlines() if line.startswith("//>")]
    assert ran.stdout.splitlines() == expected
