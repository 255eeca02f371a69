"""The tools a client runs on its own machine (``shell`` in a ``local`` environment,
``apply_patch``: the OpenAI Agents SDK's `ShellTool` and `ApplyPatchTool`), through the gateway:
each upstream is offered a function of that name; a call comes back as a ``shell_call`` with
its ``action`` or an ``apply_patch_call`` with its ``operation``, whole and streamed, and the
client's ``shell_call_output`` and ``apply_patch_call_output`` reach the upstream as the
function's results, read as text. The `openai` SDK and the Agents SDK over real HTTP, the
scripted upstream speaking chat, Responses or Anthropic's Messages, on both stores."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from agents import (
    Agent,
    ApplyPatchTool,
    Runner,
    ShellCallOutcome,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
    ShellTool,
)
from agents.editor import ApplyPatchOperation, ApplyPatchResult

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

from .live import LiveServer
from .test_agents_responses import config
from .test_client_tools import answers, assert_refused, called, offered
from .test_tool_search import _results
from .test_unserved import oai

__all__ = ["oai"]  # a fixture of these tests too

SHELL: Any = {"type": "shell", "environment": {"type": "local"}}
PATCH: Any = {"type": "apply_patch"}
CREATE = {"type": "create_file", "path": "hello.txt", "diff": "+hello"}
ASK = "Write hello.txt, then show it."
LISTED = [{"stdout": "hello\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]


def working(request: dict[str, Any]) -> Reply:
    """Creates hello.txt, shows it, and answers from what the shell printed."""
    if "tools" not in request:
        return Reply("Noted.")
    results = _results(request)
    if len(results) >= 2:
        return Reply(f"Shown: {results[-1]}")
    if results:
        return Reply(None, tool_calls=[tool_call("shell", {"commands": ["cat hello.txt"]})])
    return Reply(None, tool_calls=[tool_call("apply_patch", {"operation": CREATE}, id="c1")])


def test_a_patch_and_a_command_come_back_as_the_client_s_calls(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responder = working

    def create(history: list[Any]) -> Any:
        return served.responses.create(
            model="answer-model",
            input=history,
            tools=[SHELL, PATCH],
            extra_headers={"X-Thread-Id": "lt1"},
        )

    history: list[Any] = [{"type": "message", "role": "user", "content": ASK}]
    first = create(history)
    (patch,) = first.output
    assert (patch.type, patch.status, patch.call_id) == ("apply_patch_call", "completed", "c1")
    assert patch.operation.model_dump(exclude_none=True) == CREATE
    (sent,) = answers(upstream)
    assert list(offered(sent)) == ["shell", "apply_patch"]

    history += [item.model_dump(exclude_none=True) for item in first.output]
    done = {"type": "apply_patch_call_output", "call_id": "c1", "status": "completed"}
    history.append({**done, "output": "Created hello.txt"})
    second = create(history)
    (shell,) = second.output
    assert (shell.type, shell.action.commands) == ("shell_call", ["cat hello.txt"])
    assert _results(answers(upstream)[-1]) == ["status: completed\nCreated hello.txt"]

    history += [item.model_dump(exclude_none=True) for item in second.output]
    history.append({"type": "shell_call_output", "call_id": shell.call_id, "output": LISTED})
    third = create(history)
    assert third.output_text == "Shown: stdout:\nhello\n\nexit code: 0"
    assert called(answers(upstream)[-1]) == [  # each turn once
        ("apply_patch", {"operation": CREATE}),
        ("shell", {"commands": ["cat hello.txt"]}),
    ]


def test_a_call_streams_as_one_item(served: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.responder = working
    with served.responses.stream(
        model="answer-model", input=ASK, tools=[PATCH], extra_headers={"X-Thread-Id": "lt2"}
    ) as stream:
        events: list[Any] = list(stream)
        final = stream.get_final_response()
    (done,) = [e.item for e in events if e.type == "response.output_item.done"]
    assert done.type == "apply_patch_call"
    assert [item.model_dump()["id"] for item in final.output] == [done.id]


def test_a_continued_response_reads_the_shell_s_output(
    served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    def shell_first(request: dict[str, Any]) -> Reply:
        if "tools" not in request:
            return Reply("Noted.")
        if results := _results(request):
            return Reply(f"Shown: {results[-1]}")
        return Reply(None, tool_calls=[tool_call("shell", {"commands": "ls", "timeout_ms": 5})])

    upstream.responder = shell_first
    first = served.responses.create(model="answer-model", input=ASK, tools=[SHELL])
    call: Any = first.output[0]
    assert len(first.output) == 1
    assert call.model_dump(exclude_none=True)["action"] == {"commands": ["ls"], "timeout_ms": 5}
    timeout: Any = {"stdout": "", "stderr": "slow", "outcome": {"type": "timeout"}}
    output: Any = [{"type": "shell_call_output", "call_id": call.call_id, "output": [timeout]}]
    second = served.responses.create(
        model="answer-model", previous_response_id=first.id, input=output, tools=[SHELL]
    )
    assert second.output_text == "Shown: stderr:\nslow\ntimed out"


@pytest.mark.parametrize("tool", ["shell", "apply_patch"])
def test_a_choice_of_a_local_tool_is_a_choice_of_its_function(
    tool: str, served: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    choice: Any = {"type": tool}
    served.responses.create(
        model="answer-model", input=ASK, tools=[SHELL, PATCH], tool_choice=choice
    )
    chosen = answers(upstream)[0]["tool_choice"]
    assert chosen in (
        {"type": "function", "function": {"name": tool}},  # chat
        {"type": "function", "name": tool},  # Responses
        {"type": "tool", "name": tool},  # Anthropic
    )


@pytest.mark.parametrize(
    ("tools", "param", "named"),
    [
        (
            [{"type": "shell", "environment": {"type": "container_auto"}}],
            "tools[0].environment.type",
            "run by the server",
        ),
        ([PATCH, {**PATCH}], "tools[1]", "'apply_patch' names two tools"),
        (
            [PATCH, {"type": "function", "name": "apply_patch"}],
            "tools[1].name",
            "'apply_patch' names two tools",
        ),
    ],
)
def test_a_local_tool_the_gateway_cannot_serve_is_refused(
    tools: Any, param: str, named: str, oai: openai.OpenAI, api: httpx.Client
) -> None:
    assert_refused(oai, api, (param, named), thread="lt3", input=ASK, tools=tools)


# -- the Agents SDK ------------------------------------------------------------------------------


class Editor:
    """An editor that keeps the operations it was given."""

    def __init__(self) -> None:
        self.operations: list[ApplyPatchOperation] = []

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.operations.append(operation)
        return ApplyPatchResult(status="completed", output=f"Created {operation.path}")

    def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        raise AssertionError("not asked")

    def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        raise AssertionError("not asked")


@pytest.mark.asyncio
async def test_an_agent_runs_the_patch_and_the_command_it_is_asked_for(
    service: LiveServer, key: str, upstream: ScriptedUpstream
) -> None:
    upstream.responder = working
    commands: list[list[str]] = []

    def run(request: ShellCommandRequest) -> ShellResult:
        commands.append(list(request.data.action.commands))
        outcome = ShellCallOutcome(type="exit", exit_code=0)
        return ShellResult(output=[ShellCommandOutput(stdout="hello\n", outcome=outcome)])

    editor = Editor()
    agent = Agent(
        name="coder",
        instructions="Be brief.",
        model="answer-model",
        tools=[ShellTool(executor=run), ApplyPatchTool(editor=editor)],
    )
    async with openai.AsyncOpenAI(
        base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10
    ) as client:
        result = await Runner.run(agent, ASK, run_config=config(client))
    assert [(op.type, op.path, op.diff) for op in editor.operations] == [
        ("create_file", "hello.txt", "+hello")
    ]
    assert commands == [["cat hello.txt"]]
    assert str(result.final_output).startswith("Shown: stdout:\nhello\n")
    assert called(answers(upstream)[-1]) == [
        ("apply_patch", {"operation": CREATE}),
        ("shell", {"commands": ["cat hello.txt"]}),
    ]
