"""The command line: every command (sub-commands too) documented with an example; the demo
runs on SQLite; keys and threads round trip on a seeded SQLite file; serve binds loopback only
while the database has no key."""

from __future__ import annotations

import asyncio
import importlib.metadata
import re
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.main import get_command
from typer.testing import CliRunner

import workingmem as wm
from workingmem.cli import app
from workingmem.stores import SQLiteStore

runner = CliRunner()


def _commands(group: object = None, prefix: tuple[str, ...] = ()) -> list[str]:
    """Every command path, groups included: ``keys``, ``keys create``, ..."""
    group = group or get_command(app)
    found: list[str] = []
    for name, command in sorted(getattr(group, "commands", {}).items()):
        path = (*prefix, name)
        found.append(" ".join(path))
        found += _commands(command, path)
    return found


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = runner.invoke(app, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output


def test_the_sub_commands_are_all_there() -> None:
    assert {"serve", "demo", "keys create", "keys list", "keys revoke"} <= set(_commands())
    assert {"threads list", "threads show", "threads forget", "threads delete"} <= set(_commands())


def test_demo_with_a_configured_upstream_plays_the_conversation_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With OPENAI_BASE_URL set, the demo uses that upstream (here a scripted one) instead of
    the local model; it stores 30 turns and compares the two strategies' last request."""
    from tests.helpers import summarizing_responder
    from workingmem.llm.testing import Reply, ScriptedUpstream

    def respond(request: dict[str, Any]) -> Reply:
        if "response_format" in request:
            return summarizing_responder(request)
        return Reply("Noted, let's plan it.")

    monkeypatch.chdir(tmp_path)
    with ScriptedUpstream(responder=respond) as upstream:
        base_url = upstream.base_url
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        result = runner.invoke(app, ["demo"])
        helper_calls = [r for r in upstream.requests if "response_format" in r]
    assert result.exit_code == 0, result.output
    assert "the OpenAI-compatible upstream at" in result.output
    assert base_url.removesuffix("/") in result.output.replace("\n", "")
    assert "What the model received on the last request" in result.output
    assert "SLIDING_WINDOW" in result.output
    assert "Done: 30 turns" in result.output
    assert helper_calls, "SUMMARY_BUFFER never updated"
    assert (tmp_path / ".workingmem" / "memory.db").exists()


def test_keys_create_list_revoke_round_trip(tmp_path: Path) -> None:
    db = str(tmp_path / "keys.db")
    created = runner.invoke(
        app, ["keys", "create", "--tenant", "acme", "--label", "ci", "--db", db]
    )
    assert created.exit_code == 0, created.output
    secret = created.output.strip().splitlines()[-1]
    assert re.fullmatch(r"wm_[A-Za-z0-9_-]{43}", secret), created.output
    key_id = re.search(r"key_[0-9a-f]{16}", created.output)
    assert key_id is not None

    listed = runner.invoke(app, ["keys", "list", "--tenant", "acme", "--db", db])
    assert listed.exit_code == 0, listed.output
    assert key_id.group() in listed.output
    assert "active" in listed.output
    assert secret not in listed.output
    assert secret[:7] in listed.output

    wrong_tenant = runner.invoke(
        app, ["keys", "revoke", key_id.group(), "--tenant", "x", "--db", db]
    )
    assert wrong_tenant.exit_code == 1
    revoked = runner.invoke(app, ["keys", "revoke", key_id.group(), "--db", db])
    assert revoked.exit_code == 0, revoked.output
    after = runner.invoke(app, ["keys", "list", "--db", db])
    assert "revoked" in after.output

    async def found() -> wm.stores.keys.ApiKey | None:
        async with await SQLiteStore.open(db) as store:
            return await store.find_api_key(secret)

    key = asyncio.run(found())
    assert key is not None
    assert not key.active


@pytest.fixture
def seeded(tmp_path: Path) -> str:
    """A SQLite file with a thread of tenant acme whose summary and facts are written."""
    db = str(tmp_path / "memory.db")

    async def seed() -> None:
        async with await SQLiteStore.open(db) as store:
            await store.append(
                tenant_id="acme",
                thread_id="th1",
                user_id="ada",
                messages=[
                    {"role": "user", "content": "I'm Ada, vegetarian."},
                    {"role": "assistant", "content": "Noted!"},
                ],
            )
            await store.write_memory_state(
                tenant_id="acme",
                thread_id="th1",
                write=wm.StateWrite(
                    expected_version=0,
                    summary="Ada plans a trip.",
                    facts=[wm.Fact("Ada is vegetarian", 1, 1)],
                    turn_count=2,
                    reason="update",
                ),
            )

    asyncio.run(seed())
    return db


def test_threads_list_show_forget_on_a_seeded_file(seeded: str) -> None:
    listed = runner.invoke(app, ["threads", "list", "--tenant", "acme", "--db", seeded])
    assert listed.exit_code == 0, listed.output
    assert "th1" in listed.output
    assert "ada" in listed.output
    other = runner.invoke(app, ["threads", "list", "--tenant", "other", "--db", seeded])
    assert "No threads" in other.output

    shown = runner.invoke(app, ["threads", "show", "th1", "--tenant", "acme", "--db", seeded])
    assert shown.exit_code == 0, shown.output
    for text in ("Ada plans a trip.", "Ada is vegetarian", "SUMMARY_BUFFER", "Noted!"):
        assert text in shown.output

    kept = runner.invoke(app, ["threads", "forget", "th1", "--tenant", "acme", "--db", seeded])
    assert kept.exit_code == 1  # no confirmation on stdin: aborted
    forgot = runner.invoke(
        app, ["threads", "forget", "th1", "--tenant", "acme", "--db", seeded, "--yes"]
    )
    assert forgot.exit_code == 0, forgot.output
    after = runner.invoke(app, ["threads", "show", "th1", "--tenant", "acme", "--db", seeded])
    assert "Ada plans a trip." not in after.output
    assert "(none)" in after.output

    missing = runner.invoke(app, ["threads", "show", "nope", "--tenant", "acme", "--db", seeded])
    assert missing.exit_code == 1
    assert "not found" in missing.output

    deleted = runner.invoke(
        app, ["threads", "delete", "th1", "--tenant", "acme", "--db", seeded, "--yes"]
    )
    assert deleted.exit_code == 0, deleted.output
    gone = runner.invoke(app, ["threads", "show", "th1", "--tenant", "acme", "--db", seeded])
    assert gone.exit_code == 1
    assert "not found" in gone.output


def test_serve_refuses_a_public_address_while_the_database_has_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(kwargs))
    db = str(tmp_path / "memory.db")
    refused = runner.invoke(app, ["serve", "--db", db, "--host", "0.0.0.0"])
    assert refused.exit_code == 2
    assert "Refusing to bind 0.0.0.0" in refused.output
    assert served == []

    local = runner.invoke(app, ["serve", "--db", db, "--port", "8123"])
    assert local.exit_code == 0, local.output
    assert "local tenant" in local.output
    assert [(kw["host"], kw["port"]) for kw in served] == [("127.0.0.1", 8123)]

    runner.invoke(app, ["keys", "create", "--tenant", "acme", "--db", db])
    public = runner.invoke(app, ["serve", "--db", db, "--host", "0.0.0.0"])
    assert public.exit_code == 0, public.output
    assert "every request needs" in public.output
    assert served[-1]["host"] == "0.0.0.0"


@pytest.mark.parametrize("command", ["", *_commands()])
def test_help_names_values_without_type_tags(command: str) -> None:
    """Options that take a value show what it is (URL, TENANT, N); flags show nothing."""
    result = runner.invoke(app, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    options = result.output.partition("Options:")[2]
    assert options, result.output
    assert not re.search(r"<(str|bool|int|float|int range)>", options), result.output


def test_version_prints_the_installed_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"workingmem {importlib.metadata.version('workingmem')}"


def test_threads_default_to_the_local_tenant(tmp_path: Path) -> None:
    """The tenant a server without keys (and the demo) uses needs no --tenant."""
    db = str(tmp_path / "local.db")

    async def seed() -> None:
        async with await wm.open_store(db) as store:
            await store.append(
                tenant_id="local",
                thread_id="mine",
                messages=[{"role": "user", "content": "Hello"}],
            )

    asyncio.run(seed())
    listed = runner.invoke(app, ["threads", "list", "--db", db])
    assert listed.exit_code == 0, listed.output
    assert "mine" in listed.output
    shown = runner.invoke(app, ["threads", "show", "mine", "--db", db])
    assert shown.exit_code == 0, shown.output
    assert "1 turn ·" in shown.output
    assert "1 turns" not in shown.output


def test_doctor_loads_the_local_model_and_says_what_it_found() -> None:
    from tests.llm.local_model import require_local_model
    from workingmem.llm.local import LOCAL_MODEL_SHA256

    require_local_model()
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    for expected in ("llama-cpp-python: 0.3", LOCAL_MODEL_SHA256, "worker process", "tokens/s"):
        assert expected in result.output
    assert "FAIL" not in result.output


def test_doctor_calls_a_build_with_amx_or_avx512_unsafe() -> None:
    from workingmem.doctor import UNSAFE_FEATURES, features_used

    line = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 0 | AMX_INT8 = 1 | OPENMP = 1 |"
    assert features_used(line) == ["SSE3", "AVX2", "AMX_INT8", "OPENMP"]
    assert [f for f in features_used(line) if f in UNSAFE_FEATURES] == ["AMX_INT8"]


def test_serve_without_an_upstream_or_the_local_model_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workingmem.llm.local import LocalModelClient

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(LocalModelClient, "available", staticmethod(lambda: False))
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: pytest.fail("served"))
    result = runner.invoke(app, ["serve", "--db", str(tmp_path / "m.db")])
    assert result.exit_code == 1
    assert "the local model is not installed" in result.output
    assert "Traceback" not in result.output
    assert "answers" not in result.output


def test_demo_with_a_working_memory_shows_what_the_model_wrote_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--working-memory-template gives the model its three tools; the scripted model writes
    the profile once, and the demo prints it."""
    from tests.helpers import summarizing_responder
    from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

    written = "# Traveller\n- Name: Ada\n- Diet: vegetarian\n"

    def respond(request: dict[str, Any]) -> Reply:
        if "response_format" in request:
            return summarizing_responder(request)
        names = {tool["function"]["name"] for tool in request.get("tools") or ()}
        last = request["messages"][-1]
        if "update_working_memory" in names and "vegetarian" in str(last.get("content")):
            update = tool_call("update_working_memory", {"content": written}, id="w1")
            return Reply(None, tool_calls=[update])
        return Reply("Noted.")

    template = tmp_path / "traveller.md"
    template.write_text("# Traveller\n- Name:\n- Diet:\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with ScriptedUpstream(responder=respond) as upstream:
        monkeypatch.setenv("OPENAI_BASE_URL", upstream.base_url)
        result = runner.invoke(app, ["demo", "--working-memory-template", str(template)])
    assert result.exit_code == 0, result.output
    assert "Working memory, as the model wrote it (conversation scope):" in result.output
    assert "- Diet: vegetarian" in result.output


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--working-memory-template", "missing.md"], "cannot read missing.md"),
        (["--working-memory-schema", "bad.json"], "is not JSON"),
        (["--working-memory-scope", "planet"], "must be 'conversation' or 'user'"),
    ],
)
def test_a_bad_working_memory_option_is_one_clean_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: pytest.fail("served"))
    for command in ("demo", "serve"):
        result = runner.invoke(app, [command, *options])
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split())
        assert "Traceback" not in result.output


def test_serve_with_a_working_memory_schema_serves_its_endpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))
    schema = tmp_path / "notes.json"
    schema.write_text(
        '{"type": "object", "properties": {"name": {"type": "string"}}}', encoding="utf-8"
    )
    result = runner.invoke(
        app,
        [
            "serve",
            "--db",
            str(tmp_path / "m.db"),
            "--upstream",
            "http://127.0.0.1:9/v1",
            "--working-memory-schema",
            str(schema),
            "--working-memory-scope",
            "user",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Working memory: on (JSON schema, user scope)" in result.output
    settings = served[0].state.settings
    assert settings.agent_memory.scope == "user"
    assert settings.agent_memory.schema["properties"] == {"name": {"type": "string"}}
    assert (settings.upstream_timeout, settings.upstream_max_retries) == (60.0, 1)


def test_serve_takes_the_upstreams_timeout_and_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))
    result = runner.invoke(
        app,
        [
            "serve",
            "--db",
            str(tmp_path / "m.db"),
            "--upstream",
            "http://127.0.0.1:9/v1",
            "--upstream-timeout",
            "15",
            "--upstream-retries",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    settings = served[0].state.settings
    assert (settings.upstream_timeout, settings.upstream_max_retries) == (15.0, 0)
    assert settings.tune_gc  # the process is the server's own


def test_serve_with_workers_hands_its_settings_to_the_workers_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several workers need an import string: each builds its app with `create_app()`, which
    reads the settings serve wrote into the environment."""
    from workingmem.service import ServiceSettings
    from workingmem.service.app import APP_FACTORY
    from workingmem.service.settings import SETTINGS_ENV

    monkeypatch.setenv(SETTINGS_ENV, "")  # restored (removed) after the test
    served: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append((app, kwargs)))
    db = str(tmp_path / "m.db")
    options = ["--upstream", "http://127.0.0.1:9/v1", "--upstream-timeout", "15"]
    result = runner.invoke(app, ["serve", "--db", db, *options, "--workers", "3"])
    assert result.exit_code == 0, result.output
    assert "Workers: 3 processes" in result.output
    [(target, kwargs)] = served
    assert (target, kwargs["factory"], kwargs["workers"]) == (APP_FACTORY, True, 3)
    settings = ServiceSettings.from_env()
    assert (settings.database_url, settings.upstream_timeout) == (db, 15.0)
    assert settings.upstream_base_url == "http://127.0.0.1:9/v1"
    assert settings.tune_gc  # each worker's process is the server's own too
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-workers")
    claude = ["serve", "--db", db, "--upstream-api", "anthropic", "--workers", "2"]
    assert runner.invoke(app, claude).exit_code == 0
    workers = ServiceSettings.from_env()  # a worker's key: Anthropic's, from its environment
    assert (workers.upstream_api, workers.upstream_api_key) == ("anthropic", "sk-ant-workers")


def test_serve_with_workers_refuses_the_local_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker would load its own copy of the local model onto the same cores: refused,
    naming what works (an upstream, or one worker)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: pytest.fail("served"))
    result = runner.invoke(app, ["serve", "--db", str(tmp_path / "m.db"), "--workers", "2"])
    assert result.exit_code == 2
    output = " ".join(result.output.split())
    assert "--workers 2 needs an upstream (--upstream" in output
    assert "one worker" in output
    assert "Traceback" not in result.output


def test_serve_upstream_api_names_what_the_upstream_speaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: apps.append(app))
    db = str(tmp_path / "memory.db")
    upstream = ["--upstream", "http://127.0.0.1:9/v1"]
    served = runner.invoke(app, ["serve", "--db", db, *upstream, "--upstream-api", "responses"])
    assert served.exit_code == 0, served.output
    assert apps[-1].state.settings.upstream_api == "responses"
    runner.invoke(app, ["serve", "--db", db, *upstream])
    assert apps[-1].state.settings.upstream_api == "chat"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    claude = runner.invoke(app, ["serve", "--db", db, "--upstream-api", "anthropic"])
    assert claude.exit_code == 0, claude.output
    settings = apps[-1].state.settings
    assert (settings.upstream_api, settings.upstream_api_key) == ("anthropic", "sk-ant-from-env")
    assert settings.gateway.default_model.startswith("claude")  # not OpenAI's default
    # a Claude model it is asked for by name has Claude's window (Claude Code asks for up to
    # 128,000 tokens of answer): what the library's defaults say of a model it does not know
    # would leave its requests no room
    assert settings.gateway.model_info("claude-opus-5-5").context_window == 200_000
    assert apps[-2].state.settings.gateway.model_info("some-model").context_window == 128_000
    wider = runner.invoke(app, ["serve", "--db", db, *upstream, "--context-window", "200000"])
    assert wider.exit_code == 0, wider.output
    assert apps[-1].state.settings.gateway.model_info("qwen3").context_window == 200_000
    assert "Anthropic" in claude.output
    wrong = runner.invoke(app, ["serve", "--db", db, *upstream, "--upstream-api", "soap"])
    assert wrong.exit_code == 2
    assert "soap" in wrong.output
