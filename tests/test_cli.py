"""The command line: every command (sub-commands too) documented with an example; the demo
runs on SQLite; keys and threads round trip on a seeded SQLite file; serve binds loopback only
while the database has no key."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import click
import pytest
import uvicorn
from typer.main import get_command
from typer.testing import CliRunner

import workingmem as wm
from workingmem.cli import app
from workingmem.stores import SQLiteStore

runner = CliRunner()


def _commands(group: click.Command | None = None, prefix: tuple[str, ...] = ()) -> list[str]:
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
    assert {"threads list", "threads show", "threads forget"} <= set(_commands())


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
    assert served == [{"host": "127.0.0.1", "port": 8123, "log_level": "info"}]

    runner.invoke(app, ["keys", "create", "--tenant", "acme", "--db", db])
    public = runner.invoke(app, ["serve", "--db", db, "--host", "0.0.0.0"])
    assert public.exit_code == 0, public.output
    assert "every request needs" in public.output
    assert served[-1]["host"] == "0.0.0.0"
