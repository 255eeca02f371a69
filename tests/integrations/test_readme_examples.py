"""Each framework's example in the README runs as written, in a fresh directory.

The examples that name an OpenAI model reach it through ``OPENAI_BASE_URL``: a scripted
OpenAI-compatible server on 127.0.0.1 here, so no key and no network are needed.
"""

from __future__ import annotations

import asyncio
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from workingmem.llm.testing import ScriptedUpstream

README = Path(__file__).resolve().parents[2] / "README.md"

pytestmark = [
    # LlamaIndex's workflow lists its agent's attributes with inspect.getmembers, deprecated
    # pydantic ones included: its doing, not the example's (see test_llama_index.py).
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20:inspect"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211:inspect"),
]


def example(heading: str) -> str:
    """The first Python block after the README heading that starts with `heading`."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n### {heading}")
    match = re.search(r"```python\n(.*?)```", text[start:], flags=re.S)
    assert match is not None, f"no Python example under {heading!r}"
    return match.group(1)


def run(body: str) -> None:
    namespace: dict[str, object] = {}
    code = compile(f"async def main():\n{textwrap.indent(body, '    ')}", "README.md", "exec")
    exec(code, namespace)
    asyncio.run(namespace["main"]())  # type: ignore[operator]


@pytest.fixture(autouse=True)
def _fresh_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with ScriptedUpstream() as upstream:
        monkeypatch.setenv("OPENAI_BASE_URL", upstream.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        monkeypatch.chdir(tmp_path)
        yield


@pytest.mark.parametrize("heading", ["OpenAI Agents SDK", "LangChain", "Pydantic AI", "LlamaIndex"])
def test_the_frameworks_example_runs_as_written(
    heading: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run(example(heading))
    assert Path("memory.db").is_file()  # the thread is in the example's database
    assert capsys.readouterr().out.strip()
