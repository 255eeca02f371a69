"""LiteLLM with the gateway, over real HTTP: its SDK as the gateway's client (``openai/`` models
at ``/v1``, ``anthropic/`` models at the root, ``litellm.responses``), its proxy in front of
the gateway with the client's ``X-`` headers forwarded, as ``docs/integrations/litellm.md``
sets it up, and its proxy as the gateway's upstream. LiteLLM runs from
``tests/clients/litellm/.venv`` (``scripts/install dev`` makes it: the proxy pins dependencies
of its own)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from workingmem.llm.testing import ScriptedUpstream
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key, free_port, wait_for
from .real_clients import run_client, text_of
from .test_openai_clients import WEATHER_TOOL, agent_upstream
from .test_responses_api import turns

ROOT = Path(__file__).parents[2]
CLIENT = ROOT / "tests" / "clients" / "litellm"
BIN = CLIENT / ".venv" / "bin"
PAGE = ROOT / "docs" / "integrations" / "litellm.md"
pytestmark = pytest.mark.skipif(
    not (BIN / "litellm").exists(),
    reason="LiteLLM's SDK and proxy need their environment: tests/clients/litellm/.venv "
    "(scripts/install dev)",
)
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
"""LiteLLM reads its own copy of its model price list instead of fetching it from the network."""
READY_SECONDS = 120.0
"""The proxy imports for a long while (about 20 s on a busy two-core machine)."""


def stored(api: httpx.Client, thread: str) -> list[tuple[str, str | None]]:
    """A thread's turns as (role, text or None for a call without text)."""
    return [(m["role"], text_of(m.get("content")) or None) for m in turns(api, thread)]


def echoed(*questions: str) -> list[tuple[str, str | None]]:
    """The thread of `questions` each answered by the scripted model's echo."""
    return [turn for q in questions for turn in (("user", q), ("assistant", f"You said: {q}"))]


WEATHER_LOOP = [
    ("user", "What is the weather in Lyon?"),
    ("assistant", None),  # the call of get_weather
    ("tool", "sunny in Lyon"),
    ("assistant", "It is sunny in Lyon there."),
]


def test_litellm_s_sdk_reaches_each_api_of_the_gateway_one_thread_each(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    upstream.responder = agent_upstream
    command = [str(BIN / "python"), "client.py", service.url, key, json.dumps(WEATHER_TOOL)]
    ran = run_client(command, cwd=CLIENT, env={**os.environ, **OFFLINE})
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["answers"] == [
        "You said: My name is Ada.",
        "You said: What is my name?",
        "It is sunny in Lyon there.",
        "You said: Hello over Responses",
        "You said: And again",
        "It is sunny in Lyon there.",
        "You said: Thanks",
    ]
    assert out["calls"] == ["get_weather Lyon", "get_weather Lyon"]
    assert stored(api, "lite-chat") == echoed("My name is Ada.", "What is my name?")
    # the streamed question was asked with the thread's memory in front of it
    asked = [r for r in upstream.requests if r["messages"][-1].get("content") == "What is my name?"]
    assert [m.get("content") for m in asked[0]["messages"] if m["role"] != "system"] == [
        "My name is Ada.",
        "You said: My name is Ada.",
        "What is my name?",
    ]
    # LiteLLM passes the response id it was given back (its own wrapping undone): one chain
    assert stored(api, "lite-resp") == echoed("Hello over Responses", "And again")
    # the Messages API: the tool loop resent whole on the named thread is stored once
    assert stored(api, "lite-anth") == [*WEATHER_LOOP, *echoed("Thanks")]
    # the chat tool loop named no thread: the conversation its first message opens
    threads = api.get("/v1/threads").json()["data"]
    opened = [t["id"] for t in threads if t["id"] not in ("lite-chat", "lite-resp", "lite-anth")]
    assert len(opened) == 1, threads
    assert stored(api, opened[0]) == WEATHER_LOOP


def proxy_config(page: Path, gateway: str, master_key: str) -> str:
    """The docs page's proxy configuration, pointed at this gateway, with a master key."""
    text = page.read_text(encoding="utf-8")
    config = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "http://127.0.0.1:8080/v1" in config
    assert config.splitlines()[-2] == "general_settings:"  # its last section: the key joins it
    return config.replace("http://127.0.0.1:8080/v1", f"{gateway}/v1") + (
        f"  master_key: {master_key}\n"
    )


@contextmanager
def litellm_proxy(config: str, folder: Path, env: dict[str, str]) -> Iterator[str]:
    """LiteLLM's proxy on 127.0.0.1 with this configuration (and these environment variables),
    until the block ends: its URL."""
    path = folder / "litellm.yaml"
    path.write_text(config, encoding="utf-8")
    port = free_port()
    command = [str(BIN / "litellm"), "--config", str(path), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--num_workers", "1"]
    log = folder / "proxy.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **OFFLINE, **env}
        )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        return httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200

    try:
        wait_for(ready, "LiteLLM's proxy answering", READY_SECONDS)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def proxy(service: LiveServer, key: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """LiteLLM's proxy in front of the gateway, with the docs page's configuration: its URL
    and key."""
    master_key = f"sk-{secrets.token_hex(16)}"
    config = proxy_config(PAGE, service.url, master_key)
    with litellm_proxy(config, tmp_path, {"WORKINGMEM_API_KEY": key}) as url:  # as the page
        yield url, master_key


def test_litellm_s_proxy_in_front_forwards_the_thread_and_the_user(
    proxy: tuple[str, str], upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    upstream.responder = agent_upstream
    url, master_key = proxy
    named: dict[str, Any] = {"extra_headers": {"X-Thread-Id": "via-proxy"}, "user": "ada"}
    with openai.OpenAI(base_url=f"{url}/v1", api_key=master_key, max_retries=0) as client:
        first = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "My name is Ada."}], **named
        )
        chunks = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "What is my name?"}],
            stream=True,
            **named,
        )
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        response = client.responses.create(
            model="gpt-4o-mini",
            input="Hello over Responses",
            extra_headers={"X-Thread-Id": "proxy-resp"},
        )
        chained = client.responses.create(
            model="gpt-4o-mini", input="And again", previous_response_id=response.id
        )
    with anthropic.Anthropic(base_url=url, api_key=master_key, max_retries=0) as claude:
        message = claude.messages.create(
            model="gpt-4o-mini",
            max_tokens=200,
            messages=[{"role": "user", "content": "Hello over Messages"}],
            extra_headers={"X-Thread-Id": "proxy-anth"},
        )
    assert first.choices[0].message.content == "You said: My name is Ada."
    assert streamed == "You said: What is my name?"
    assert chained.output_text == "You said: And again"
    assert text_of([block.model_dump() for block in message.content]) == (
        "You said: Hello over Messages"
    )
    assert stored(api, "via-proxy") == echoed("My name is Ada.", "What is my name?")
    assert stored(api, "proxy-resp") == echoed("Hello over Responses", "And again")
    assert [t for t, _ in stored(api, "proxy-anth")] == ["user", "assistant"]
    threads = {t["id"]: t for t in api.get("/v1/threads").json()["data"]}
    assert set(threads) == {"via-proxy", "proxy-resp", "proxy-anth"}
    assert threads["via-proxy"]["user_id"] == "ada"  # the app's `user`, through the proxy


def test_the_gateway_asks_through_litellm_s_proxy_as_its_upstream(
    database_url: str, upstream: ScriptedUpstream, tenant: str, tmp_path: Path
) -> None:
    upstream.responder = agent_upstream
    master_key = f"sk-{secrets.token_hex(16)}"
    config = (  # every model the gateway names (the answers', the summaries') to the upstream
        "model_list:\n"
        '  - model_name: "*"\n'
        "    litellm_params:\n"
        '      model: "openai/*"\n'
        f"      api_base: {upstream.base_url}\n"
        "      api_key: unused\n"
        "general_settings:\n"
        f"  master_key: {master_key}\n"
    )
    with litellm_proxy(config, tmp_path, {}) as url:
        settings = settings_for(
            database_url, upstream, upstream_base_url=f"{url}/v1", upstream_api_key=master_key
        )
        with LiveServer(create_app(settings)) as gateway:
            key = create_key(database_url, tenant).secret
            named = {"X-Thread-Id": "behind-proxy"}
            with openai.OpenAI(
                base_url=f"{gateway.url}/v1", api_key=key, max_retries=0, default_headers=named
            ) as client:
                first = client.chat.completions.create(
                    model="answer-model", messages=[{"role": "user", "content": "My name is Ada."}]
                )
                chunks = client.chat.completions.create(
                    model="answer-model",
                    messages=[{"role": "user", "content": "What is the weather in Lyon?"}],
                    tools=[WEATHER_TOOL],
                    stream=True,
                )
                calls = [  # (id, name) of each call's first delta
                    (call.id, call.function.name if call.function else None)
                    for chunk in chunks
                    if chunk.choices
                    for call in chunk.choices[0].delta.tool_calls or ()
                    if call.id
                ]
                answer = client.chat.completions.create(
                    model="answer-model",
                    messages=[{"role": "tool", "tool_call_id": calls[0][0], "content": "sunny"}],
                    tools=[WEATHER_TOOL],
                )
            with httpx.Client(
                base_url=gateway.url, headers={"Authorization": f"Bearer {key}"}
            ) as api:
                thread = stored(api, "behind-proxy")
    assert first.choices[0].message.content == "You said: My name is Ada."
    assert [name for _, name in calls] == ["get_weather"]
    assert answer.choices[0].message.content == "It is sunny there."
    assert thread == [
        *echoed("My name is Ada."),
        ("user", "What is the weather in Lyon?"),
        ("assistant", None),
        ("tool", "sunny"),
        ("assistant", "It is sunny there."),
    ]
    # the model read the thread through the proxy: the result's request held the stored
    # exchange (the profile's newest four turns), the call and its result paired
    last = [r for r in upstream.requests if r["messages"][-1]["role"] == "tool"][-1]
    sent = [m for m in last["messages"] if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[0]["content"] == "What is the weather in Lyon?"
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] == calls[0][0]
