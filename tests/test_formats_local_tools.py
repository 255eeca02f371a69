"""A client's ``shell`` and ``apply_patch`` as chat functions, their calls back as the client's
items, and those items and their outputs as the upstream reads them (`formats.local_tools`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from workingmem.errors import ValidationError
from workingmem.formats.client_tools import as_offered
from workingmem.formats.local_tools import call_of, local_call, local_function, output_text
from workingmem.formats.responses import turns_of


def called(name: str, arguments: str) -> dict[str, Any]:
    """A function call of the model's, as the gateway reads it back."""
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": name,
        "arguments": arguments,
    }


@pytest.mark.parametrize(
    ("arguments", "action"),
    [
        (
            '{"commands": ["ls", "pwd"], "timeout_ms": 100}',
            {"commands": ["ls", "pwd"], "timeout_ms": 100},
        ),
        ('{"commands": "ls", "max_output_length": "big"}', {"commands": ["ls"]}),
        ("ls -la", {"commands": []}),  # no JSON: no commands, for the client to refuse
    ],
)
def test_a_shell_call_carries_its_commands(arguments: str, action: dict[str, Any]) -> None:
    item = local_call(called("shell", arguments))
    assert item == {
        "id": "sh_1",
        "type": "shell_call",
        "call_id": "c1",
        "status": "completed",
        "action": action,
    }
    assert call_of(item)[0] == "shell"


def test_a_patch_call_carries_its_operation_and_reads_back_as_given() -> None:
    operation = {"type": "update_file", "path": "a.py", "diff": "@@ def f\n-x\n+y"}
    item = local_call(called("apply_patch", json.dumps({"operation": operation})))
    assert (item["type"], item["id"], item["operation"]) == ("apply_patch_call", "apc_1", operation)
    flat = as_offered(item)
    assert (flat["name"], flat["call_id"]) == ("apply_patch", "c1")
    assert local_call({**called("apply_patch", flat["arguments"])})["operation"] == operation


@pytest.mark.parametrize(
    ("output", "said"),
    [
        (
            {
                "type": "shell_call_output",
                "output": [
                    {
                        "stdout": "a\n",
                        "stderr": "warn",
                        "outcome": {"type": "exit", "exit_code": 2},
                    },
                    {"stdout": "", "stderr": "", "outcome": {"type": "timeout"}},
                ],
            },
            "stdout:\na\n\nstderr:\nwarn\nexit code: 2\ntimed out",
        ),
        ({"type": "shell_call_output", "output": "not a list"}, ""),
        (
            {"type": "apply_patch_call_output", "status": "failed", "output": "no such file"},
            "status: failed\nno such file",
        ),
        ({"type": "apply_patch_call_output", "status": "completed"}, "status: completed"),
    ],
)
def test_an_output_reads_as_text(output: dict[str, Any], said: str) -> None:
    assert output_text(output) == said
    item = {**output, "call_id": "c1"}
    (turn,) = turns_of([item], open_calls=["c1"])
    assert turn.message == {"role": "tool", "tool_call_id": "c1", "content": said}
    assert as_offered(item) == {"type": "function_call_output", "call_id": "c1", "output": said}


def test_a_shell_in_a_container_is_refused() -> None:
    with pytest.raises(ValidationError) as raised:
        local_function({"type": "shell", "environment": {"type": "container_auto"}}, 2)
    assert raised.value.field == "tools[2].environment.type"
    assert local_function({"type": "shell"}, 0)["function"]["name"] == "shell"
