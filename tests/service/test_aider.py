"""aider as a client of the gateway, over real HTTP: its whole chat resent on every call (its
examples, the repository map and the files as user and assistant messages) with a ``system``
reminder of its edit format after the user's message, streamed, through LiteLLM. The model
edits a file in aider's "whole" format, which aider applies; a second run restores the chat and
goes on in the same thread. aider runs from ``tests/clients/aider/.venv`` (``scripts/install
dev`` makes it: aider pins dependencies of its own), with the docs page's settings file
(``docs/integrations/aider.md``) naming the thread."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

import workingmem as wm
from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import create_app

from .conftest import CONFIG, settings_for
from .live import LiveServer, create_key
from .real_clients import run_client, text_of

ROOT = Path(__file__).parents[2]
AIDER = ROOT / "tests" / "clients" / "aider" / ".venv" / "bin" / "aider"
PAGE = ROOT / "docs" / "integrations" / "aider.md"
pytestmark = pytest.mark.skipif(
    not AIDER.exists() or shutil.which("git") is None,
    reason="the aider client test needs git and aider in tests/clients/aider/.venv "
    "(scripts/install dev)",
)
MODEL = "gpt-4o-mini"
GATEWAY = CONFIG.model_copy(
    update={
        "default_model": MODEL,
        "models": {
            **CONFIG.models,
            MODEL: wm.ModelInfo(id=MODEL, context_window=128_000, max_output_tokens=4_000),
        },
    }
)
EDIT = 'hello.py\n```python\ndef greet(name):\n    return f"Hello, {name}!"\n```\n'


def aider_model(request: dict[str, Any]) -> Reply:
    """Rewrites hello.py in aider's "whole" format when asked to rename; else says what it
    was asked."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    users = [m for m in request["messages"] if m["role"] == "user"]
    asked = text_of(users[-1]["content"])
    return Reply(EDIT) if "Rename hi" in asked else Reply(f"You asked: {asked.strip()}")


def _settings_file() -> str:
    """The page's ``.aider.model.settings.yml``."""
    blocks: list[str] = re.findall(r"^```yaml\n(.*?)^```", PAGE.read_text("utf-8"), re.M | re.S)
    (block,) = blocks
    return block


def _aider(work: Path, base_url: str, key: str, message: str, *flags: str) -> str:
    env = {
        **os.environ,
        "HOME": str(work.parent / "home"),  # aider's caches and its analytics id
        "OPENAI_API_BASE": base_url,
        "OPENAI_API_KEY": key,
    }
    env.pop(
        "OPENAI_BASE_URL"
    )  # LiteLLM reads it before OPENAI_API_BASE (the suite points it nowhere)
    ran = run_client(
        [
            str(AIDER),
            *("--model", f"openai/{MODEL}", "--edit-format", "whole", "--message", message),
            *("--yes-always", "--no-check-update", "--no-show-model-warnings", "--no-analytics"),
            *("--no-gitignore", "--no-auto-commits", "--no-pretty", *flags, "hello.py"),
        ],
        cwd=work,
        env=env,
    )
    assert ran.returncode == 0, ran.stdout[-2_000:] + ran.stderr[-2_000:]
    assert "Tokens:" in ran.stdout, ran.stdout[
        -2_000:
    ]  # aider's line after an answer; not an error
    return ran.stdout


def _repository(work: Path) -> None:
    work.mkdir()
    (work / "hello.py").write_text('def hi():\n    return "hi"\n', encoding="utf-8")
    (work / ".aider.model.settings.yml").write_text(_settings_file(), encoding="utf-8")
    who = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    for command in (["init", "-q"], [*who, "commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *command], cwd=work, check=True)


def test_aider_edits_through_the_gateway_and_goes_on_in_its_thread(
    database_url: str, upstream: ScriptedUpstream, tenant: str, tmp_path: Path
) -> None:
    upstream.responder = aider_model
    work = tmp_path / "project"
    _repository(work)
    settings = settings_for(database_url, upstream, gateway=GATEWAY)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, tenant, "tests").secret
        base = f"{live.url}/v1"
        _aider(work, base, key, "Rename hi to greet taking a name")
        second = _aider(work, base, key, "What did I ask?", "--restore-chat-history")
        thread = live_thread(live.url, key)

    assert "def greet(name):" in (work / "hello.py").read_text("utf-8")  # aider applied it
    assert "You asked: What did I ask?" in second
    answers = [r for r in upstream.requests if r.get("model") == MODEL]
    assert len(answers) == 2
    for sent in answers:  # aider's reminder came after the user's message: joined, not kept there
        roles = [m["role"] for m in sent["messages"]]
        assert roles[0] == "system"
        assert "system" not in roles[1:], roles
        assert sent["stream"] is True
    said = [(m["role"], text_of(m["content"])) for m in thread]
    assert "system" not in {role for role, _ in said}
    assert said[-2:] == [("user", "What did I ask?"), ("assistant", "You asked: What did I ask?")]
    renames = [text for role, text in said if role == "user" and "Rename hi" in text]
    assert len(renames) == 1, said  # the restored chat's turn, stored once


def live_thread(url: str, key: str) -> list[dict[str, Any]]:
    """The thread the settings file names."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as rest:
        page = rest.get("/v1/threads/my-project/messages", params={"limit": 100})
        assert page.status_code == 200, page.text
        found: list[dict[str, Any]] = page.json()["data"]
        return found
