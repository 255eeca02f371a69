"""OpenAI's Codex CLI as a client of the gateway, over real HTTP: ``codex exec`` with the
gateway as its model provider (the Responses API, ``store: false``, the whole history resent on
every call, its agents' tools in a ``namespace``), in front of a chat upstream and of one that
speaks Responses. The model runs a shell command through Codex's own tool, then, in the session
Codex resumes, calls a function of the namespace; the session is one thread, every turn stored
once, the namespaced call with its namespace. Codex runs from ``tests/clients/codex`` (``npm
ci`` there, as ``scripts/install dev`` does: its package ships the binary), configured by the
docs' page (``docs/integrations/codex.md``), which switches Codex's ``web_search`` off: the
gateway runs no hosted tool. A picture Codex's ``view_image`` returns reaches a chat model."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assert_valid_chat_request, png_bytes, summarizing_responder
from tests.thinking_upstreams import thinking
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import ServiceSettings, create_app

from .conftest import CONFIG, settings_for
from .live import LiveServer, Seen, create_key
from .real_clients import images_sent, run_client, text_of, the_thread

ROOT = Path(__file__).parents[2]
CODEX = ROOT / "tests" / "clients" / "codex" / "node_modules" / ".bin" / "codex"
PAGE = ROOT / "docs" / "integrations" / "codex.md"
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not CODEX.exists(),
    reason="the Codex CLI client test needs Node.js and `npm ci` in tests/clients/codex",
)
MODEL = "gpt-4o-mini"  # the page's
GATEWAY = CONFIG.model_copy(
    update={
        "default_model": MODEL,
        "models": {
            **CONFIG.models,
            MODEL: wm.ModelInfo(id=MODEL, context_window=128_000, max_output_tokens=4_000),
        },
    }
)


def codex_model(request: dict[str, Any]) -> Reply:
    """Runs ``echo`` through Codex's shell tool when asked to run the check, calls the agents'
    ``close_agent`` when asked to close one, and says what a call returned; in chat's words or
    in the Responses API's, as the upstream is asked."""
    turns = request.get("messages") or request.get("input") or []
    last = turns[-1] if isinstance(turns, list) else {"content": turns}
    if request.get("model") == "cheap-model":
        return summarizing_responder({"messages": [{"content": text_of(last.get("content"))}]})
    if last.get("role") == "tool" or last.get("type") == "function_call_output":
        output = last.get("content", last.get("output"))
        return Reply(f"The tool said: {text_of(output).strip().splitlines()[-1]}")
    asked = text_of(last.get("content"))
    if "run the check" in asked:
        call = tool_call("exec_command", {"cmd": "echo codex-ok"}, id="call_run")
        return Reply(None, tool_calls=[call])
    if "close the agent" in asked:
        call = tool_call("multi_agent_v1__close_agent", {"target": "agent-x"}, id="call_close")
        return Reply(None, tool_calls=[call])
    return Reply(f"You said: {asked}")


def _configuration(base_url: str, *, websockets: bool = False) -> str:
    """The page's ``config.toml``, pointing at `base_url`; with `websockets`, the provider
    takes the Responses API's WebSocket mode, as the page says."""
    page = PAGE.read_text(encoding="utf-8")
    blocks: list[str] = re.findall(r"^```toml\n(.*?)^```", page, re.M | re.S)
    (block,) = blocks
    assert "http://127.0.0.1:8080/v1" in block
    if websockets:
        assert "`supports_websockets = true`" in page
        block += "supports_websockets = true\n"  # the block ends with the provider's table
    return block.replace("http://127.0.0.1:8080/v1", base_url)


def _codex(home: Path, work: Path, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEX_HOME": str(home), "WORKINGMEM_KEY": key}
    env.pop("OPENAI_API_KEY", None)
    return run_client(
        [str(CODEX), "exec", "--json", "--skip-git-repo-check", *args], cwd=work, env=env
    )


@dataclass(frozen=True)
class _Session:
    """A gateway served for Codex: where, its key, and Codex run in `work` against it."""

    url: str
    key: str
    work: Path
    run: Callable[..., subprocess.CompletedProcess[str]]
    seen: list[tuple[str, str]]
    """The requests the gateway got: HTTP or WebSocket, and the path."""


@contextmanager
def _serving_codex(
    settings: ServiceSettings,
    database_url: str,
    tenant: str,
    tmp_path: Path,
    *,
    websockets: bool = False,
) -> Iterator[_Session]:
    """The gateway of `settings` on a live server, and Codex configured by the docs' page."""
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    app, seen = create_app(settings), list[tuple[str, str]]()
    app.add_middleware(Seen, seen=seen)
    with LiveServer(app) as live:
        key = create_key(database_url, tenant, "tests").secret
        configuration = _configuration(f"{live.url}/v1", websockets=websockets)
        (home / "config.toml").write_text(configuration, encoding="utf-8")
        run = functools.partial(_codex, home, work, key)
        yield _Session(live.url, key, work, run, seen)


def _answers(ran: subprocess.CompletedProcess[str]) -> list[str]:
    """The agent's messages of a ``codex exec --json`` run."""
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    return [
        e["item"]["text"]
        for e in events
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]


@pytest.mark.parametrize("upstream_api", ["chat", "responses", "chat-thinking", "chat-websocket"])
def test_a_codex_session_is_one_thread_with_its_namespaced_calls(
    upstream_api: str,
    database_url: str,
    upstream: ScriptedUpstream,
    tenant: str,
    tmp_path: Path,
) -> None:
    # chat-thinking: DeepSeek's chat API in thinking mode, which asks each call's reasoning back;
    # chat-websocket: Codex asks over the Responses API's WebSocket mode
    upstream.responder = thinking(codex_model) if upstream_api == "chat-thinking" else codex_model
    websockets = upstream_api == "chat-websocket"
    upstream_api = upstream_api.removesuffix("-thinking").removesuffix("-websocket")
    settings = settings_for(database_url, upstream, gateway=GATEWAY, upstream_api=upstream_api)
    with _serving_codex(settings, database_url, tenant, tmp_path, websockets=websockets) as codex:
        first = codex.run("Please run the check.")
        assert first.returncode == 0, first.stdout[-2_000:]
        second = codex.run("resume", "--last", "Now close the agent.")
        assert second.returncode == 0, second.stdout[-2_000:]
        messages = the_thread(codex.url, codex.key)

    asked = [seen for seen in codex.seen if seen[1] == "/v1/responses"]
    assert set(asked) == {("websocket" if websockets else "http", "/v1/responses")}
    assert _answers(first) == ["The tool said: codex-ok"]
    # Codex ran the call in its agents' namespace: the call came back with it
    assert _answers(second)[-1].startswith("The tool said: invalid agent id agent-x")
    said = [(m["role"], m["content"] or "") for m in messages]
    assert [role for role, _ in said] == [
        "user",  # Codex's environment context
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ], said
    assert said[1] == ("user", "Please run the check.")
    assert "codex-ok" in said[3][1]
    assert said[5] == ("user", "Now close the agent.")
    calls = [m["tool_calls"] for m in messages if m.get("tool_calls")]
    assert [c[0]["function"]["name"] for c in calls] == [  # as the model was offered them
        "exec_command",
        "multi_agent_v1__close_agent",
    ]


def image_viewer(chart: Path) -> Any:
    """Views ``chart`` with Codex's ``view_image`` tool when offered it, then says how many
    images it was sent (a chat model gets them after the results)."""

    def respond(request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        if request.get("model") == "cheap-model":
            return summarizing_responder({"messages": [{"content": "Codex session"}]})
        images = images_sent(messages)
        if images:
            return Reply(f"I see {len(images)} image.")
        if not any(message["role"] == "tool" for message in messages):
            return Reply(None, tool_calls=[tool_call("view_image", {"path": str(chart)})])
        return Reply("No image reached me.")

    return respond


def test_an_image_codex_views_reaches_a_chat_model(
    database_url: str, upstream: ScriptedUpstream, tenant: str, tmp_path: Path
) -> None:
    """Codex's ``view_image`` answers with the picture as an ``input_image`` of its call's
    output; a chat model, whose tool results take text alone, gets it in a user message after
    the result, in a request OpenAI accepts (it got nothing of it)."""
    settings = settings_for(database_url, upstream, gateway=GATEWAY)
    with _serving_codex(settings, database_url, tenant, tmp_path) as codex:
        chart = codex.work / "chart.png"
        chart.write_bytes(png_bytes(64, 48))
        upstream.responder = image_viewer(chart)
        ran = codex.run("Please look at chart.png.")
    assert ran.returncode == 0, ran.stdout[-2_000:]
    assert _answers(ran) == ["I see 1 image."]
    for request in upstream.requests:
        if request.get("tools"):
            assert_valid_chat_request(request)


SEARCHING = "gpt-5.5"
"""A model Codex has metadata for: it offers a ``tool_search``, its agents' tools deferred."""


def searching_model(request: dict[str, Any]) -> Reply:
    """Searches for a tool to close an agent, calls it once it is offered, and says what it
    returned; in chat's words or in the Responses API's."""
    if request.get("model") == "cheap-model":
        return summarizing_responder({"messages": [{"content": "Codex session"}]})
    turns = request.get("messages") or request.get("input") or []
    last = turns[-1]
    output = last.get("content") if last.get("role") == "tool" else last.get("output")
    if last.get("type") == "function_call_output" or last.get("role") == "tool":
        if "multi_agent_v1__close_agent" not in str(request.get("tools")):
            return Reply(f"The search found nothing to close: {text_of(output)}")
        if "invalid agent id" in text_of(output):
            return Reply(f"The tool said: {text_of(output).strip().splitlines()[-1]}")
        call = tool_call("multi_agent_v1__close_agent", {"target": "agent-x"}, id="call_close")
        return Reply(None, tool_calls=[call])
    return Reply(None, tool_calls=[tool_call("tool_search", {"query": "close agent"}, id="s1")])


@pytest.mark.parametrize("upstream_api", ["chat", "responses"])
def test_codex_finds_its_agents_tools_with_its_tool_search(
    upstream_api: str,
    database_url: str,
    upstream: ScriptedUpstream,
    tenant: str,
    tmp_path: Path,
) -> None:
    """For a model it knows, Codex defers its agents' tools behind a ``tool_search`` it runs
    itself: the model searches, is offered the tools found, and calls one in its namespace."""
    upstream.responder = searching_model
    models = {**GATEWAY.models, SEARCHING: wm.ModelInfo(id=SEARCHING, context_window=400_000)}
    gateway = GATEWAY.model_copy(update={"models": models})
    settings = settings_for(database_url, upstream, gateway=gateway, upstream_api=upstream_api)
    with _serving_codex(settings, database_url, tenant, tmp_path) as codex:
        ran = codex.run("-m", SEARCHING, "Close the agent.")
        messages = the_thread(codex.url, codex.key)
    assert ran.returncode == 0, ran.stdout[-2_000:]
    assert _answers(ran)[-1].startswith("The tool said: invalid agent id agent-x"), _answers(ran)
    calls = [m["tool_calls"][0]["function"]["name"] for m in messages if m.get("tool_calls")]
    assert calls == ["tool_search", "multi_agent_v1__close_agent"]
    (found,) = [m["content"] for m in messages if m["role"] == "tool"][:1]
    assert found.startswith("Tools found, callable from now on: ")
    assert "multi_agent_v1__close_agent" in found
    answering = [r for r in upstream.requests if r.get("model") != "cheap-model"]
    offered = [str(r.get("tools")) for r in answering]
    assert ["multi_agent_v1__close_agent" in tools for tools in offered] == [False, True, True]
