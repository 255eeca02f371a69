"""Claude Code as a client of the gateway, over real HTTP: ``claude -p`` with
``ANTHROPIC_BASE_URL`` at the gateway (the Messages API, streamed; the whole transcript every
call, no thread id; the environment it runs in as a ``system`` message after the user's; up to
128,000 tokens asked for the answer), in front of an Anthropic upstream and of a chat one. The
model runs a shell command through Claude Code's Bash tool; ``claude -p --continue`` goes on with
the session; it is one thread, every turn stored once, and the environment reached the model in
its system prompt. A picture its Read tool reads reaches a chat model as an image. Claude
Code runs from ``tests/clients/claude-code`` (``npm ci`` there, as
``scripts/install dev`` does: its package ships the binary)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import assert_valid_chat_request, png_bytes, summarizing_responder
from tests.thinking_upstreams import thinking
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import CONFIG, settings_for
from .live import LiveServer, create_key
from .real_clients import images_sent, run_client, text_of, the_thread

CLAUDE = Path(__file__).parents[1] / "clients" / "claude-code" / "node_modules" / ".bin" / "claude"
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not CLAUDE.exists(),
    reason="the Claude Code client test needs Node.js and `npm ci` in tests/clients/claude-code",
)
ENVIRONMENT = "You have been invoked in the following environment"
"""How Claude Code's system message about where it runs begins."""


def _result(message: dict[str, Any]) -> str | None:
    """The output of a call, when `message` carries one (chat's or Anthropic's shape)."""
    if message.get("role") == "tool":
        return text_of(message.get("content"))
    content = message.get("content")
    if isinstance(content, list) and content and content[0].get("type") == "tool_result":
        return text_of(content[0].get("content"))
    return None


def claude_model(request: dict[str, Any]) -> Reply:
    """Runs ``echo`` through Claude Code's Bash tool when asked to run the check, says what
    it printed, and repeats anything else; helper calls get a summary."""
    messages = request.get("messages") or []
    if request.get("model") == "cheap-model" or not request.get("tools"):
        return summarizing_responder({"messages": [{"content": text_of(messages[-1]["content"])}]})
    result = _result(messages[-1])
    if result is not None:
        return Reply(f"The tool said: {result.strip()}")
    asked = text_of(messages[-1]["content"])
    if "run the check" in asked:
        call = tool_call("Bash", {"command": "echo cc-ok", "description": "Print a marker"})
        return Reply(None, tool_calls=[call])
    return Reply(f"You said: {asked.rsplit(chr(10), 1)[-1].strip()}")


def _system(request: dict[str, Any]) -> str:
    """The system prompt the upstream was sent."""
    if "system" in request:
        return text_of(request["system"])
    return text_of(request["messages"][0]["content"])


def _claude(
    home: Path, work: Path, url: str, key: str, *args: str, tools: str = "Bash"
) -> dict[str, Any]:
    env = {
        **os.environ,
        "CLAUDE_CONFIG_DIR": str(home),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": key,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    command = [str(CLAUDE), "-p", *args, "--output-format", "json", "--allowedTools", tools]
    ran = run_client(command, cwd=work, env=env)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-2_000:]
    result: dict[str, Any] = json.loads(ran.stdout)
    return result


@pytest.mark.parametrize("upstream_api", ["anthropic", "chat", "chat-thinking"])
def test_a_claude_code_session_is_one_thread(
    upstream_api: str,
    database_url: str,
    upstream: ScriptedUpstream,
    tenant: str,
    tmp_path: Path,
) -> None:
    # chat-thinking: DeepSeek's chat API in thinking mode, which asks each call's reasoning back
    upstream.responder = thinking(claude_model) if upstream_api == "chat-thinking" else claude_model
    upstream_api = upstream_api.removesuffix("-thinking")
    # Claude's models have windows of 200,000 tokens (an Anthropic upstream's default); in
    # front of a chat upstream the operator says so
    gateway = CONFIG.model_copy(update={"default_context_window": 200_000})
    settings = settings_for(database_url, upstream, gateway=gateway, upstream_api=upstream_api)
    home, work = tmp_path / "claude-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, tenant, "tests").secret
        first = _claude(home, work, live.url, key, "Please run the check.")
        second = _claude(home, work, live.url, key, "--continue", "Now say thanks.")
        messages = the_thread(live.url, key)

    assert (first["is_error"], first["result"]) == (False, "The tool said: cc-ok")
    assert (second["is_error"], second["result"]) == (False, "You said: Now say thanks.")
    assert second["session_id"] == first["session_id"]
    said = [(m["role"], m["content"] or "") for m in messages]
    roles = ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [role for role, _ in said] == roles, said
    assert said[0][1].endswith("Please run the check.")
    assert said[2] == ("tool", "cc-ok")
    assert said[4] == ("user", "Now say thanks.")
    answers = [r for r in upstream.requests if r.get("tools")]
    assert all(ENVIRONMENT in _system(r) for r in answers)
    turns = [m for r in answers for m in r["messages"] if m["role"] != "system"]
    assert not any(ENVIRONMENT in text_of(m.get("content")) for m in turns)


def image_reader(request: dict[str, Any]) -> Reply:
    """Reads ``chart.png`` with Claude Code's Read tool when asked to look at it, then says
    what kind of image it was sent (a chat model gets it after the results; helper calls get a
    summary)."""
    messages = request.get("messages") or []
    if request.get("model") == "cheap-model" or not request.get("tools"):
        return summarizing_responder({"messages": [{"content": text_of(messages[-1]["content"])}]})
    images = [url.split(";", 1)[0] for url in images_sent(messages)]
    if images:
        return Reply(f"I see {', '.join(images)}.")
    if "look at chart.png" in text_of(messages[-1]["content"]):
        return Reply(None, tool_calls=[tool_call("Read", {"file_path": str(request["_chart"])})])
    return Reply("No image reached me.")


def test_a_picture_claude_code_reads_reaches_a_chat_model_as_an_image(
    database_url: str, upstream: ScriptedUpstream, tenant: str, tmp_path: Path
) -> None:
    """Claude Code's Read tool answers with the picture in its ``tool_result``; in front of a
    chat model, whose tool results take text alone, the picture follows the result in a user
    message, in a request OpenAI accepts (it was "[image]" text: the model never saw it)."""
    home, work = tmp_path / "claude-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    chart = work / "chart.png"
    chart.write_bytes(png_bytes(64, 48))
    upstream.responder = lambda request: image_reader({**request, "_chart": chart})
    gateway = CONFIG.model_copy(update={"default_context_window": 200_000})
    settings = settings_for(database_url, upstream, gateway=gateway)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, tenant, "tests").secret
        read = _claude(home, work, live.url, key, "Please look at chart.png.", tools="Read")
        messages = the_thread(live.url, key)

    assert (read["is_error"], read["result"]) == (False, "I see data:image/png.")
    answers = [r for r in upstream.requests if r.get("tools")]
    for request in answers:
        assert_valid_chat_request(request)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2]["content"][0]["type"] == "image_url"  # the thread keeps the picture


def tool_searcher(request: dict[str, Any]) -> Reply:
    """Loads Claude Code's deferred ``CronList`` tool with its ToolSearch, then says whether
    it is offered and what the search said."""
    messages = request.get("messages") or []
    if request.get("model") == "cheap-model" or not request.get("tools"):
        return summarizing_responder({"messages": [{"content": text_of(messages[-1]["content"])}]})
    results = [text_of(m["content"]) for m in messages if m["role"] == "tool"]
    if not results:
        return Reply(None, tool_calls=[tool_call("ToolSearch", {"query": "select:CronList"})])
    names = [tool["function"]["name"] for tool in request["tools"]]
    return Reply(f"CronList offered: {'CronList' in names}. {results[-1]}")


def test_a_tool_claude_code_s_tool_search_loads_reaches_a_chat_model(
    database_url: str, upstream: ScriptedUpstream, tenant: str, tmp_path: Path
) -> None:
    """Claude Code defers some of its tools behind its ToolSearch, whose result names the
    tools it loads (``tool_reference`` blocks) and whose next request offers them: a chat
    model is offered the tool and reads its name (it read "[tool_reference]")."""
    home, work = tmp_path / "claude-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    upstream.responder = tool_searcher
    gateway = CONFIG.model_copy(update={"default_context_window": 200_000})
    settings = settings_for(database_url, upstream, gateway=gateway)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, tenant, "tests").secret
        ran = _claude(home, work, live.url, key, "Which crons are there?", tools="ToolSearch")
    said = "CronList offered: True. Tools found, callable from now on: CronList."
    assert (ran["is_error"], ran["result"]) == (False, said)
