"""The README's Python examples run as written, with nothing configured (no key, no base
URL): the local model answers."""

from __future__ import annotations

import asyncio
import re
import textwrap
from pathlib import Path

import pytest

from tests.llm.test_local import require_local_model

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def _run(body: str) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(
        compile(f"async def main():\n{textwrap.indent(body, '    ')}", "README.md", "exec"),
        namespace,
    )
    asyncio.run(namespace["main"]())  # type: ignore[operator]
    return namespace


@pytest.fixture(autouse=True)
def _nothing_configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    require_local_model()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def test_the_gateway_example_answers_with_the_local_model() -> None:
    gateway_example = next(b for b in _python_blocks() if "gateway.ask(" in b)
    _run(gateway_example)
    assert (Path(".workingmem") / "memory.db").exists()


def test_the_window_example_runs_on_a_fresh_store() -> None:
    window_example = next(b for b in _python_blocks() if "memory.load(" in b)
    _run(
        "import workingmem as wm\n"
        "async with await wm.open_store() as store:\n"
        + textwrap.indent(window_example + "assert loaded.messages\n", "    ")
    )
