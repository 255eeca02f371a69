"""`import workingmem` stays cheap: SDKs and optional backends load when they are used.

The `openai` SDK alone took more than half of the import time; a host on the local model, a
host with its own client, or a CLI's ``--help`` never needs it. Each check runs a fresh
interpreter, since this test process has long imported everything.
"""

from __future__ import annotations

import json

from tests.helpers import run_fresh

DEFERRED = (
    "openai",
    "anthropic",
    "httpx",
    "fastapi",
    "starlette",
    "uvicorn",
    "typer",
    "rich",
    "llama_cpp",
    "psycopg",
    "psycopg_pool",
    "tokenizers",
)
"""Modules `import workingmem` must not load: an SDK, the service's stack, optional backends."""


def loaded_after(code: str) -> set[str]:
    """Which of `DEFERRED` a fresh interpreter has loaded after running `code`."""
    report = f"import json, sys; print(json.dumps(sorted(set(sys.modules) & {set(DEFERRED)!r})))"
    return set(json.loads(run_fresh(f"{code}\n{report}")))


def test_import_workingmem_loads_no_sdk_and_no_optional_backend() -> None:
    assert loaded_after("import workingmem, workingmem.llm") == set()


def test_the_openai_sdk_loads_when_a_client_is_made() -> None:
    """The probe sees the SDK once it is needed, so the test above is not vacuous."""
    code = "import workingmem as wm\nwm.OpenAIClient(base_url='http://127.0.0.1:9/v1', api_key='x')"
    assert "openai" in loaded_after(code)
