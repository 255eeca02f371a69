"""The command line: every command documented with an example; the demo runs on SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from workingmem.cli import app

runner = CliRunner()


def _commands() -> list[str]:
    group = get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output


def test_demo_stores_a_thread_and_prints_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["demo", "--budget", "200"])
    assert result.exit_code == 0, result.output
    assert "SLIDING_WINDOW" in result.output
    assert "Can you suggest a plan for the first day?" in result.output
    assert (tmp_path / ".workingmem" / "memory.db").exists()
