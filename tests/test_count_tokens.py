"""`Gateway.count_tokens`: the tokens the next `ask` sends for the same messages, counted
before it, with nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest

import workingmem as wm
from workingmem.llm import AnthropicClient, OpenAIClient
from workingmem.llm._scripted_anthropic import count_of
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


async def test_an_upstream_that_counts_counts_what_the_next_ask_sends(tmp_path: Path) -> None:
    """An Anthropic upstream counts the request itself: the thread's memory in its own
    format, then the caller's plain messages as Anthropic takes them."""
    model = wm.ModelInfo(id="answer-model", context_window=8_000, max_output_tokens=500)
    config = wm.GatewayConfig(default_model=model.id, models={model.id: model})
    async with (
        await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store,
        ScriptedUpstream() as upstream,
        AnthropicClient(base_url=upstream.base_url, api_key="sk-ant-test") as llm,
        wm.Gateway(store=store, llm=llm, config=config) as gateway,
    ):
        await gateway.ask(tenant_id="t", thread_id="th", message="A first message.")
        question: list[wm.MessageIn] = [{"role": "user", "content": "How long is this?"}]
        counted = await gateway.count_tokens(tenant_id="t", thread_id="th", messages=question)
        asked = upstream.requests[-1]
        assert counted == count_of(asked)
        assert "max_tokens" not in asked  # a count, not an answer
        assert len(await store.list_turns(tenant_id="t", thread_id="th")) == 2  # none stored
        await gateway.ask(tenant_id="t", thread_id="th", messages=question)
        sent = upstream.requests[-1]
        assert (sent["system"], sent["messages"]) == (asked["system"], asked["messages"])
