"""The gateway's asks end to end: the real `openai` SDK against a real OpenAI-compatible server
on 127.0.0.1, on SQLite and PostgreSQL. Every request the upstream receives is checked."""

from __future__ import annotations

import json
from typing import Any

import pytest

import workingmem as wm
from tests.gateway.scripted import CONFIG, MODEL, answer_requests, assert_provider_valid
from tests.helpers import (
    assistant,
    user,
)
from tests.thinking_upstreams import WEATHER, deepseek_thinking, thought
from workingmem.gateway import Gateway
from workingmem.gateway_config import Overrides
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream, StatusError, tool_call


async def test_ask_stores_the_turns_and_sends_a_provider_valid_request(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    result = await gateway.ask(tenant_id=tenant, thread_id="th", user_id="u", message="hello")
    assert result.answer == "You said: hello"
    assert result.usage.prompt_tokens == 100
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [(t.role, t.content) for t in turns] == [
        ("user", "hello"),
        ("assistant", "You said: hello"),
    ]
    (request,) = answer_requests(upstream)
    assert_provider_valid(request)
    assert request["model"] == "answer-model"
    assert request["max_tokens"] == MODEL.max_output_tokens


async def test_notes_reach_the_model_once_the_summary_is_due(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    """The background update runs after the answers; the next request carries the notes in
    the system prompt under "About this conversation"."""
    await gateway.ask(tenant_id=tenant, thread_id="th", message="please remember: I am Ada")
    first_system = answer_requests(upstream)[0]["messages"][0]["content"]
    assert "About this conversation" not in first_system
    for i in range(3):
        await gateway.ask(tenant_id=tenant, thread_id="th", message=f"question {i}")
    await gateway.when_idle()
    helper_calls = [r for r in upstream.requests if "response_format" in r]
    # due after 4 and after 8 turns; a busy queue may coalesce the two into one update
    assert 1 <= len(helper_calls) <= 2
    assert {r["model"] for r in helper_calls} == {"cheap-model"}
    state = await gateway.memory.get_state(tenant_id=tenant, thread_id="th")
    assert 4 <= state.turn_count <= 8  # an update may have read the thread mid-ask
    await gateway.ask(tenant_id=tenant, thread_id="th", message="who am I?")
    last = answer_requests(upstream)[-1]
    assert_provider_valid(last)
    system = last["messages"][0]["content"]
    assert "## About this conversation" in system
    assert "please remember: I am Ada" in system


async def test_the_window_stays_within_the_model_window_on_a_long_thread(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    long = "word " * 300
    for i in range(30):
        await gateway.ask(tenant_id=tenant, thread_id="th", message=f"{i} {long}")
    for request in answer_requests(upstream):
        assert_provider_valid(request)


async def test_working_memory_tools_are_offered_run_and_stored(
    store: wm.Store, client: OpenAIClient, upstream: ScriptedUpstream, tenant: str
) -> None:
    """The model updates its working memory through a tool; the call and its result are
    stored as turns; the next request's system prompt carries the new content."""
    agent = wm.AgentMemoryConfig(template="# User\n- Name:\n")
    async with Gateway(store=store, llm=client, config=CONFIG, agent_memory=agent) as gateway:
        update = tool_call("update_working_memory", {"content": "# User\n- Name: Ada\n"}, id="c1")
        upstream.push(Reply(None, tool_calls=[update]), Reply("Nice to meet you, Ada."))
        result = await gateway.ask(tenant_id=tenant, thread_id="th", user_id="u", message="I'm Ada")
        assert result.answer == "Nice to meet you, Ada."
        assert result.tool_rounds == 1
        first, second = answer_requests(upstream)
        names = {t["function"]["name"] for t in first["tools"]}
        assert names == {"get_working_memory", "update_working_memory", "clear_working_memory"}
        assert "# User" in first["messages"][0]["content"]
        assert_provider_valid(second)
        assert second["messages"][-1]["role"] == "tool"
        assert "Name: Ada" in second["messages"][0]["content"]
        roles = [t.role for t in await store.list_turns(tenant_id=tenant, thread_id="th")]
        assert roles == ["user", "assistant", "tool", "assistant"]
        memory = await gateway.get_thread_memory(tenant_id=tenant, thread_id="th")
        assert memory.agent_memory == memory.working_memory == "# User\n- Name: Ada\n"
        await gateway.reset_thread_memory(tenant_id=tenant, thread_id="th", agent_memory=True)
        after = await gateway.get_thread_memory(tenant_id=tenant, thread_id="th")
        assert after.working_memory is None
        assert gateway.agent_memory is not None
        history = await gateway.agent_memory.get_working_memory_history(
            tenant_id=tenant, conversation_id="th"
        )
        assert history == []  # forgotten: no version left to roll back to


async def test_the_clients_own_history_with_memory_carries_the_tool_rounds_on(
    store: wm.Store, client: OpenAIClient, upstream: ScriptedUpstream, tenant: str
) -> None:
    """A profile that sends the client's own history with the agent memory: a round of the
    memory's tools goes to the upstream after the client's messages, exactly as stored, and
    the client's messages stay as it sent them."""
    coder = wm.Profile(id="coder", history="client", client_history_memory=True)
    agent = wm.AgentMemoryConfig(template="# User\n- Name:\n")
    mine: list[wm.MessageIn] = [{"role": "system", "content": "You code."}, user("I'm Ada")]
    async with Gateway(
        store=store, llm=client, config=CONFIG, agent_memory=agent, profiles=[coder]
    ) as gateway:
        update = tool_call("update_working_memory", {"content": "# User\n- Name: Ada\n"}, id="c1")
        upstream.push(Reply(None, tool_calls=[update]), Reply("Hello, Ada."))
        result = await gateway.ask(
            tenant_id=tenant,
            thread_id="th",
            profile="coder",
            messages=mine[1:],
            passthrough=mine,
        )
    assert (result.answer, result.tool_rounds) == ("Hello, Ada.", 1)
    first, second = answer_requests(upstream)
    assert first["messages"][1:] == [user("I'm Ada")]
    assert second["messages"][1:2] == [user("I'm Ada")]
    call, answered = second["messages"][2:]
    assert call["tool_calls"][0]["function"]["name"] == "update_working_memory"
    assert (answered["role"], answered["tool_call_id"]) == ("tool", "c1")
    assert "Name: Ada" in second["messages"][0]["content"]  # the memory block, updated
    roles = [t.role for t in await store.list_turns(tenant_id=tenant, thread_id="th")]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_memory_kept_per_user_offers_no_tools_to_a_request_without_one(
    store: wm.Store, client: OpenAIClient, upstream: ScriptedUpstream, tenant: str
) -> None:
    agent = wm.AgentMemoryConfig(scope="user")
    async with Gateway(store=store, llm=client, config=CONFIG, agent_memory=agent) as gateway:
        await gateway.ask(tenant_id=tenant, thread_id="anon", message="Hi")
        await gateway.ask(tenant_id=tenant, thread_id="ada", user_id="ada", message="Hi")
    anonymous, named = answer_requests(upstream)
    assert "tools" not in anonymous  # no user: no memory of theirs to edit
    assert {t["function"]["name"] for t in named["tools"]} == {
        "get_working_memory",
        "update_working_memory",
        "clear_working_memory",
    }


class GreedyMemory:
    """A host's own WorkingMemory that returns the whole thread, whatever the budget, and
    records what the gateway asks of it."""

    def __init__(self, store: wm.ThreadStore) -> None:
        self.store = store
        self.saved: list[dict[str, Any]] = []

    async def load(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        model: wm.ModelInfo,
        profile: wm.Profile,
        budget_tokens: int,
    ) -> wm.WorkingMemoryLoad:
        turns = await self.store.list_turns(tenant_id=tenant_id, thread_id=thread_id, limit=1000)
        return wm.WorkingMemoryLoad(messages=[t.to_message() for t in turns], notes="host notes")

    async def save_context(self, **kwargs: Any) -> None:
        self.saved.append(kwargs)

    async def get_state(self, *, tenant_id: str, thread_id: str) -> wm.WorkingMemoryState:
        return wm.WorkingMemoryState(summary="host summary")

    async def reset(self, *, tenant_id: str, thread_id: str) -> None:
        return None


async def test_a_host_override_is_used_and_trimmed_with_a_warning(
    store: wm.Store, client: OpenAIClient, upstream: ScriptedUpstream, tenant: str
) -> None:
    """R18 + R17: the host's memory answers load; what it returns over the budget is trimmed
    oldest unit first, with a turns_trimmed warning."""
    greedy = GreedyMemory(store)
    overrides = Overrides(working_memory=greedy)
    async with Gateway(store=store, llm=client, config=CONFIG, overrides=overrides) as gateway:
        big = "word " * 1500
        await store.append(
            tenant_id=tenant,
            thread_id="th",
            messages=[m for i in range(6) for m in (user(f"{i} {big}"), assistant("ok"))],
        )
        result = await gateway.ask(tenant_id=tenant, thread_id="th", message="and now?")
        await gateway.when_idle()
    assert [w.code for w in result.warnings] == ["turns_trimmed"]
    assert result.warnings[0].count > 0
    request = answer_requests(upstream)[-1]
    assert_provider_valid(request)
    assert "host notes" in request["messages"][0]["content"]
    assert len(greedy.saved) == 1
    assert greedy.saved[0]["cheap_model_id"] == "cheap-model"
    memory = await Gateway(store=store, llm=client, overrides=overrides).get_thread_memory(
        tenant_id=tenant, thread_id="th"
    )
    assert memory.state.summary == "host summary"


async def test_an_upstream_failure_keeps_the_user_turn_and_a_retry_answers_it(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.push(StatusError(500, "upstream down"))
    with pytest.raises(wm.LLMError):
        await gateway.ask(tenant_id=tenant, thread_id="th", message="are you there?")
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [(t.role, t.content) for t in turns] == [("user", "are you there?")]
    result = await gateway.ask(tenant_id=tenant, thread_id="th", message="are you there?")
    assert result.answer == "You said: are you there?"
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.role for t in turns] == ["user", "assistant"]


async def test_a_reviewed_answer_is_stored_and_the_update_reads_it_from_the_store(
    store: wm.Store, client: OpenAIClient, tenant: str
) -> None:
    greedy = GreedyMemory(store)
    async with Gateway(
        store=store, llm=client, config=CONFIG, overrides=Overrides(working_memory=greedy)
    ) as gateway:

        async def review(draft: str) -> str:
            return draft.replace("You said", "A human says")

        result = await gateway.ask(tenant_id=tenant, thread_id="th", message="hi", review=review)
        await gateway.when_idle()
    assert (result.answer, result.reviewed) == ("A human says: hi", True)
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert turns[-1].content == "A human says: hi"
    assert greedy.saved[0]["result"] is None


async def test_streaming_yields_the_answer_and_stores_it_whole(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    stream = gateway.ask_stream(tenant_id=tenant, thread_id="th", message="stream me")
    chunks = [chunk async for chunk in stream]
    assert len(chunks) > 1
    assert "".join(chunks) == "You said: stream me"
    assert stream.result is not None
    assert stream.result.answer == "You said: stream me"
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns] == ["stream me", "You said: stream me"]
    assert answer_requests(upstream)[0]["stream"] is True


async def test_a_client_that_disconnects_mid_stream_leaves_the_thread_consistent(
    gateway: Gateway, tenant: str
) -> None:
    stream = gateway.ask_stream(tenant_id=tenant, thread_id="th", message="a long answer please")
    async for _ in stream:
        break
    await stream.aclose()
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.role for t in turns] == ["user"]
    retry = await gateway.ask(tenant_id=tenant, thread_id="th", message="a long answer please")
    assert retry.answer == "You said: a long answer please"


async def test_profiles_pick_the_model_prompt_and_strategy(
    store: wm.Store, client: OpenAIClient, upstream: ScriptedUpstream, tenant: str
) -> None:
    profile = wm.Profile(
        id="terse",
        system_prompt="Answer in one word.\n{memory}",
        model_id="other-model",
        working_memory=wm.Strategy.SLIDING_WINDOW,
    )
    async with Gateway(store=store, llm=client, config=CONFIG, profiles=[profile]) as gateway:
        await gateway.ask(tenant_id=tenant, thread_id="th", message="hi", profile="terse")
        with pytest.raises(wm.ValidationError):
            await gateway.ask(tenant_id=tenant, thread_id="th", message="hi", profile="nope")
    request = answer_requests(upstream)[0]
    assert request["model"] == "other-model"
    assert request["messages"][0]["content"] == "Answer in one word."
    assert json.dumps(request).count("About this conversation") == 0


async def test_a_background_job_is_queued_only_when_an_update_is_due(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    """Every 4 turns (2 answers) an update is due: the answers in between queue nothing."""
    for i in range(4):
        await gateway.ask(tenant_id=tenant, thread_id="th", message=f"please remember {i}")
        await gateway.when_idle()
    assert gateway.queue.completed == 2
    assert len([r for r in upstream.requests if "response_format" in r]) == 2


async def test_the_budget_is_the_window_minus_the_system_prompt_and_the_reserve(
    gateway: Gateway, tenant: str
) -> None:
    """R16: budget_tokens = context window - tokens of the rendered system prompt - reserve."""
    await gateway.store.append(tenant_id=tenant, thread_id="th", messages=[user("hello")])
    context = await gateway.assembler.build(
        tenant_id=tenant,
        thread_id="th",
        user_id=None,
        profile=wm.Profile(id="p", system_prompt="Be brief.\n{memory}"),
        model=MODEL,
    )
    system_tokens = wm.tokenizer_for(MODEL).count_message(context.messages[0])
    assert context.budget_tokens == (MODEL.context_window - system_tokens - MODEL.max_output_tokens)
    assert context.messages[0]["content"] == "Be brief."


async def test_ask_with_the_whole_history_stores_only_what_is_new(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    """The library's overlap rule: a client's full history, resent, adds only its new turns;
    the same request again after a failed upstream call adds nothing and answers it."""
    history = [user("I'm Ada."), assistant("Hello Ada."), user("Where should I eat?")]
    await gateway.store.append(tenant_id=tenant, thread_id="th", messages=history[:2])
    upstream.push(StatusError(500, "boom"))
    with pytest.raises(wm.LLMError):
        await gateway.ask(tenant_id=tenant, thread_id="th", messages=history)
    first = await gateway.ask(tenant_id=tenant, thread_id="th", messages=history)  # the retry
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns] == [*(m["content"] for m in history), first.answer]
    later = [*history, assistant(first.answer), user("And for dessert?")]
    second = await gateway.ask(tenant_id=tenant, thread_id="th", messages=later)
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns] == [*(m["content"] for m in later), second.answer]


async def test_saying_the_first_message_again_never_rewinds_a_longer_thread(
    gateway: Gateway, tenant: str
) -> None:
    """A client that sends only its new message may say again what it said first: on a
    thread of one exchange that is a regenerate, on a longer one a new turn (R27)."""
    await gateway.ask(tenant_id=tenant, thread_id="th", message="hi")
    again = await gateway.ask(tenant_id=tenant, thread_id="th", message="hi")
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns] == ["hi", again.answer]  # the first answer, regenerated
    await gateway.ask(tenant_id=tenant, thread_id="th", message="Where should I eat?")
    last = await gateway.ask(tenant_id=tenant, thread_id="th", message="hi")
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns][::2] == ["hi", "Where should I eat?", "hi"]
    assert turns[-1].content == last.answer


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "message"),
        ({"message": "hi", "messages": [user("hi")]}, "message"),
        ({"messages": [user("hi"), assistant("hello"), assistant("again")]}, "messages"),
        ({"messages": [assistant("hello")]}, "messages"),
        ({"messages": []}, "messages"),
        ({"message": {"role": "assistant", "content": "hi"}}, "message"),
    ],
)
async def test_ask_needs_one_user_turn_to_answer(
    gateway: Gateway, tenant: str, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(wm.ValidationError) as caught:
        await gateway.ask(tenant_id=tenant, thread_id="th", **arguments)
    assert caught.value.field == field
    with pytest.raises(wm.NotFoundError):
        await gateway.store.get_thread(tenant_id=tenant, thread_id="th")  # nothing stored


async def test_a_message_dict_is_the_users_with_or_without_its_role(
    gateway: Gateway, tenant: str
) -> None:
    parts = [{"type": "text", "text": "hello"}]
    await gateway.ask(tenant_id=tenant, thread_id="th", message={"content": parts})
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert (turns[0].role, turns[0].content) == ("user", parts)


async def test_an_answer_too_large_to_store_is_the_upstreams_fault(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.push(Reply("x" * (2 << 20)))
    with pytest.raises(wm.LLMError, match="the upstream's answer cannot be stored"):
        await gateway.ask(tenant_id=tenant, thread_id="th", message="Write a lot.")
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.role for t in turns] == ["user"]  # the question stays, for a retry
    # and the thread's lock, which the refused answer did not give back, is free
    assert await gateway.store.claim_thread(
        tenant_id=tenant, thread_id="th", owner="next", ttl_seconds=60
    )


async def test_a_reviewers_text_too_large_to_store_is_the_hosts_error(
    gateway: Gateway, tenant: str
) -> None:
    async def verbose(answer: str) -> str:
        return answer + "x" * (2 << 20)

    with pytest.raises(wm.ValidationError):  # the host's text: not the upstream's fault
        await gateway.ask(tenant_id=tenant, thread_id="th", message="Hi", review=verbose)
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.role for t in turns] == ["user"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_upstream_s_own_fields_are_stored_with_the_answer_and_sent_back(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str, stream: bool
) -> None:
    """A host's ask without an answer format keeps what a thinking model asks back (its
    ``reasoning_content``) in the stored turn, beside the view, and the window sends it."""
    upstream.responder = deepseek_thinking

    async def ask(**given: Any) -> wm.AskResult:
        if not stream:
            return await gateway.ask(tenant_id=tenant, thread_id="th", tools=[WEATHER], **given)
        answer = gateway.ask_stream(tenant_id=tenant, thread_id="th", tools=[WEATHER], **given)
        async for _ in answer:
            pass
        assert answer.result is not None
        return answer.result

    first = await ask(message="The weather in Paris?")
    call_id = first.tool_calls[0]["id"]
    second = await ask(messages=[{"role": "tool", "tool_call_id": call_id, "content": "sunny"}])
    assert second.answer == "It is sunny."
    turns = await gateway.store.list_turns(tenant_id=tenant, thread_id="th")
    calling = turns[1]
    assert (calling.format, calling.tool_calls[0].id) == (wm.CHAT_FORMAT, call_id)
    assert calling.item is not None
    assert calling.item["reasoning_content"] == thought(call_id)
    assert "reasoning_content" not in calling.to_message()
    sent = answer_requests(upstream)[-1]["messages"]
    assert [m.get("reasoning_content") for m in sent if m.get("tool_calls")] == [thought(call_id)]
