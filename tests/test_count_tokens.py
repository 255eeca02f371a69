"""`Gateway.count_tokens`: the tokens the next `ask` sends for the same messages, counted
before it, with nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest

import workingmem as wm
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import ScriptedUpstream

pytestmark = pytest.mark.asyncio

TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


async def test_the_count_is_what_the_next_ask_sends(tmp_path: Path) -> None:
    async with (
        await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store,
        ScriptedUpstream() as upstream,
        wm.Gateway(store=store, llm=OpenAIClient(base_url=upstream.base_url)) as gateway,
    ):
        for text in ("Hello there.", "And again, a little longer than before."):
            message: wm.Message = {"role": "user", "content": text}
            counted = await gateway.count_tokens(
                tenant_id="t", thread_id="th", messages=[message], tools=[TOOL]
            )
            before = (
                await store.list_turns(tenant_id="t", thread_id="th")
                if text != "Hello there."
                else []
            )
            result = await gateway.ask(
                tenant_id="t", thread_id="th", messages=[message], tools=[TOOL]
            )
            assert counted == result.context.tokens + result.context.parts["tools"]
            assert len(await store.list_turns(tenant_id="t", thread_id="th")) == len(before) + 2
        with pytest.raises(wm.ValidationError):
            await gateway.count_tokens(
                tenant_id="t", thread_id="th", messages=[{"role": "assistant", "content": "x"}]
            )
