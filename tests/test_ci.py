"""CI runs the tests as the README tells a developer to: `.ci/run` ends with the README's test
command, the README names one command wherever it gives it, and that command holds the coverage
floor, so a green CI means the command a developer runs is green too."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_test_commands() -> list[str]:
    """The test command as the README's top states it, and as its Develop section lists it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"`\.ci/run` ends with the test command itself:\s+`([^`]+)`", text)
    listed = re.search(r"^(\S.*?)\s+# the tests, once \.venv is set up$", text, flags=re.M)
    assert stated is not None, "README.md no longer says which command .ci/run ends with"
    assert listed is not None, "README.md's Develop section no longer lists the test command"
    return [stated.group(1), listed.group(1)]


def ci_last_command() -> str:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")][-1]


def test_ci_ends_with_the_readmes_test_command() -> None:
    stated, listed = readme_test_commands()
    assert stated == listed
    assert ci_last_command() == stated


def test_the_test_command_measures_coverage_against_a_floor() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    assert "--cov=workingmem" in ci_last_command().split()
    assert config["coverage"]["run"]["branch"] is True
    assert config["coverage"]["report"]["fail_under"] >= 90
