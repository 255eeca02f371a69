"""A LoCoMo conversation replayed through `Gateway.ask`, every upstream request checked.

The first conversation of ``../shared/data/locomo-dev.json`` (LoCoMo, CC BY-NC 4.0: read here,
never copied into the repository) is asked turn by turn through the real `openai` SDK against a
scripted OpenAI-compatible server on 127.0.0.1, on SQLite and PostgreSQL. The answering model
says what the conversation's other speaker said; helper calls (the summary updates) get
`summarizing_responder`. The model's window is small (4,000 tokens, 300 for the answer) and
the verbatim tail long, so the token budget, not the turn count, decides many windows.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assert_in_provider_order, summarizing_responder
from tests.locomo import Exchange, locomo_exchanges
from workingmem.gateway import AskResult, Gateway
from workingmem.gateway_config import GatewayConfig
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

PREFIX_TURNS = 160
"""LoCoMo turns replayed (a prefix of the first conversation, cut after a whole exchange)."""
DRAIN_EVERY = 20
"""Exchanges between two `when_idle` calls; in between, updates run beside the asks."""
UPDATE_EVERY = 10
"""Agent memory: the model calls update_working_memory on every 10th exchange (~20 turns)."""

MODEL = wm.ModelInfo(
    id="answer-model", context_window=4_000, max_output_tokens=300, tokenizer="o200k_base"
)
MEMORY = wm.WorkingMemoryConfig(
    strategy=wm.Strategy.SUMMARY_BUFFER, recent_turns=60, update_every_turns=8
)
"""A verbatim tail of up to 60 turns: about 2,100 tokens of LoCoMo, over the ~1,800 the
history gets (half the budget), so the budget cuts the window."""
CONFIG = GatewayConfig(
    default_model=MODEL.id,
    cheap_model="cheap-model",
    models={MODEL.id: MODEL},
    working_memory=MEMORY,
)
TOKENIZER = wm.tokenizer_for(MODEL)
NOTES_HEADING = "## About this conversation"
WORKING_MEMORY_HEADING = "## Working memory"
TEMPLATE = "# User\n- Name:\n- Latest news:\n"
THREAD = "locomo-conv-26"
_THROUGH = re.compile(r"through turn (\d+)")


# -- the conversation ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exchanges() -> list[Exchange]:
    """The first whole exchanges of LoCoMo's first conversation, about `PREFIX_TURNS` turns."""
    return locomo_exchanges(PREFIX_TURNS)


# -- the scripted upstream -------------------------------------------------------------------


@dataclass
class Script:
    """The scripted models: the answer for the exchange under way, set before each ask.

    With `update` set, the answering model first calls update_working_memory with it, and
    answers once the tool's result comes back.
    """

    answer: str = ""
    update: str | None = None
    call_id: str = ""

    def __call__(self, request: dict[str, Any]) -> Reply:
        if "response_format" in request:
            return summarizing_responder(request)
        if self.update is not None and request["messages"][-1]["role"] == "user":
            call = tool_call("update_working_memory", {"content": self.update}, id=self.call_id)
            return Reply(None, tool_calls=[call], prompt_tokens=100, completion_tokens=20)
        return Reply(self.answer, prompt_tokens=100, completion_tokens=20)


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
async def upstream(script: Script) -> AsyncIterator[ScriptedUpstream]:
    async with ScriptedUpstream(responder=script) as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream) -> AsyncIterator[OpenAIClient]:
    async with OpenAIClient(base_url=upstream.base_url, timeout=5, max_retries=0) as llm:
        yield llm


# -- the invariants --------------------------------------------------------------------------


def shape(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a message says, whichever side of the SDK it was read on."""
    calls = tuple(
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in message.get("tool_calls") or ()
    )
    return (message["role"], message.get("content") or None, calls, message.get("tool_call_id"))


def assert_provider_valid(request: dict[str, Any]) -> None:
    """System first, then a user turn; every tool result answers a call of the assistant turn
    just before it; every call has its result; the request and the answer's reserve fit the
    window (the tool definitions counted as the assembler counts them)."""
    messages = request["messages"]
    assert_in_provider_order(messages)
    assert request["max_tokens"] == MODEL.max_output_tokens
    tools = TOKENIZER.count_text(json.dumps(request["tools"])) if request.get("tools") else 0
    used = wm.count_tokens(messages, MODEL) + tools + request["max_tokens"]
    assert used <= MODEL.context_window, f"{used} tokens for a window of {MODEL.context_window}"


@dataclass
class Replay:
    """What the replay sent and what must have been stored, checked as it goes."""

    upstream: ScriptedUpstream
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """Every turn that must be stored, in order: questions, tool rounds, answers."""
    checked: int = 0
    """Upstream requests already checked (answers and helper calls)."""
    answers: int = 0
    notes_due: bool = False
    """A drain found a summary: every later request must carry the notes."""
    notes_seen: bool = False
    gap_check_due: bool = False
    """The next request follows a drain: the notes and the verbatim tail must meet."""
    through: int = 0
    budget_cut: int = 0
    """Requests whose window the token budget cut short of the verbatim tail's reach."""
    memory: str | None = None
    """The working memory the model last saved; every later request must show it."""
    older_tool_rounds: int = 0
    """Requests whose history holds a tool round of an earlier exchange."""

    def check_new_requests(self, *, agent: bool, answers: int | None = None) -> None:
        """Checks the requests received since the last check, up to `answers` answer
        requests (all when None) against the transcript as it stands."""
        for request in self.upstream.requests[self.checked :]:
            if "response_format" in request:
                assert request["model"] == "cheap-model"
            elif answers == 0:
                return
            else:
                self.answers += 1
                self.check_answer_request(request, agent=agent)
                answers = None if answers is None else answers - 1
            self.checked += 1

    def check_answer_request(self, request: dict[str, Any], *, agent: bool) -> None:
        assert_provider_valid(request)
        messages = request["messages"]
        system, history = messages[0]["content"], messages[1:]
        # The history is the thread's newest turns, the current one last, none changed.
        assert history[-1]["role"] in ("user", "tool")
        assert [shape(m) for m in history] == [shape(m) for m in self.transcript[-len(history) :]]
        first_seq = len(self.transcript) - len(history) + 1
        reach = min(MEMORY.recent_turns, len(self.transcript))
        if history[-1]["role"] == "user" and len(history) < reach - 1:
            self.budget_cut += 1
        if any(m["role"] == "tool" for m in history[:-1]):
            self.older_tool_rounds += 1

        has_notes = NOTES_HEADING in system
        assert system.count(NOTES_HEADING) <= 1
        if self.notes_due or self.notes_seen:
            assert has_notes, f"request {self.answers}: the notes went missing"
        if has_notes:
            self.notes_seen = True
            (through,) = map(int, _THROUGH.findall(system))
            assert self.through <= through <= len(self.transcript), "notes from the future"
            self.through = through
            if self.gap_check_due:
                assert first_seq <= through + 1, (
                    f"turns {through + 1}-{first_seq - 1} are neither summarized nor sent"
                )
        self.gap_check_due = False

        if agent:
            assert system.count(WORKING_MEMORY_HEADING) == 1
            names = {t["function"]["name"] for t in request.get("tools") or ()}
            assert "update_working_memory" in names
            if self.memory is None:
                assert "The working memory is empty" in system
            else:
                assert f"<working_memory>\n{self.memory}\n</working_memory>" in system
        else:
            assert WORKING_MEMORY_HEADING not in system
            assert "tools" not in request

    async def drain(self, gateway: Gateway, tenant: str) -> None:
        await gateway.when_idle()
        self.check_new_requests(agent=gateway.agent_memory is not None)
        state = await gateway.memory.get_state(tenant_id=tenant, thread_id=THREAD)
        if state.summary:
            self.notes_due = True
            self.gap_check_due = True


async def replay(
    gateway: Gateway,
    script: Script,
    upstream: ScriptedUpstream,
    tenant: str,
    exchanges: list[Exchange],
    *,
    update_every: int | None = None,
) -> Replay:
    """Asks every exchange's question, checking each request as soon as it was sent."""
    run = Replay(upstream)
    agent = gateway.agent_memory is not None
    updates = 0
    for number, exchange in enumerate(exchanges, start=1):
        script.answer = exchange.answer
        script.call_id = f"call-{number}"
        script.update = None
        if update_every and number % update_every == 0:
            news = exchange.question[:60].replace("\n", " ")
            script.update = (
                f"# User\n- Name: Caroline\n- Latest news: {news} (update {updates + 1})\n"
            )
        run.transcript.append({"role": "user", "content": exchange.question})
        result = await ask(gateway, tenant, exchange.question)
        if script.update is not None:
            # the first round, sent before the update, against the thread as it was then
            run.check_new_requests(agent=agent, answers=1)
            updates += 1
            run.transcript.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        tool_call(
                            "update_working_memory", {"content": script.update}, id=script.call_id
                        )
                    ],
                }
            )
            saved = (
                f"Saved the working memory (version {updates}, {len(script.update)} of "
                f"{wm.AgentMemoryConfig().max_chars} characters used)."
            )
            run.transcript.append(
                {"role": "tool", "tool_call_id": script.call_id, "content": saved}
            )
            run.memory = script.update
        run.check_new_requests(agent=agent)
        run.transcript.append({"role": "assistant", "content": exchange.answer})
        assert result.answer == exchange.answer
        assert result.tool_rounds == (script.update is not None)
        added = run.transcript[len(run.transcript) - len(result.turns) :]
        assert [shape(t.to_message()) for t in result.turns] == [shape(m) for m in added]
        assert result.turns[-1].seq == len(run.transcript)
        if number % DRAIN_EVERY == 0:
            await run.drain(gateway, tenant)
    await run.drain(gateway, tenant)
    return run


async def ask(gateway: Gateway, tenant: str, question: str) -> AskResult:
    return await gateway.ask(tenant_id=tenant, thread_id=THREAD, user_id="u", message=question)


async def stored_turns(store: wm.Store, tenant: str) -> list[wm.Turn]:
    turns: list[wm.Turn] = []
    while page := await store.list_turns(
        tenant_id=tenant, thread_id=THREAD, after_seq=len(turns), limit=100
    ):
        turns += page
    return turns


async def assert_stored_as_sent(store: wm.Store, tenant: str, run: Replay) -> None:
    """Every question and answer (and tool round) stored once, in order, nothing else."""
    turns = await stored_turns(store, tenant)
    assert [t.seq for t in turns] == list(range(1, len(run.transcript) + 1))
    assert [shape(t.to_message()) for t in turns] == [shape(m) for m in run.transcript]
    thread = await store.get_thread(tenant_id=tenant, thread_id=THREAD)
    assert thread.turn_count == len(run.transcript)


# -- the replays -----------------------------------------------------------------------------


async def test_a_locomo_replay_keeps_every_request_valid_and_within_the_window(
    store: wm.Store,
    client: OpenAIClient,
    upstream: ScriptedUpstream,
    script: Script,
    tenant: str,
    exchanges: list[Exchange],
) -> None:
    """SUMMARY_BUFFER over a real conversation: each request is provider-valid, fits the
    window with the answer's reserve, sends the thread's newest turns unchanged, carries the
    notes once a summary exists (never notes about turns not yet asked), and leaves no turn
    between the summary and the verbatim tail once the updates have caught up; the thread
    holds exactly what was asked and answered."""
    async with Gateway(store=store, llm=client, config=CONFIG) as gateway:
        run = await replay(gateway, script, upstream, tenant, exchanges)
        state = await gateway.memory.get_state(tenant_id=tenant, thread_id=THREAD)
    assert run.answers == len(exchanges)
    assert run.notes_seen
    assert run.budget_cut > 0, "the token budget never decided a window: the test lost its edge"
    assert len(run.transcript) - MEMORY.update_every_turns < state.turn_count
    assert state.turn_count <= len(run.transcript)
    await assert_stored_as_sent(store, tenant, run)


async def test_a_locomo_replay_with_agent_working_memory_stores_tool_rounds_whole(
    store: wm.Store,
    client: OpenAIClient,
    upstream: ScriptedUpstream,
    script: Script,
    tenant: str,
    exchanges: list[Exchange],
) -> None:
    """The model saves its working memory every tenth exchange: the call and its result are
    stored together, in place, and every later request shows the newest content; windows
    never split a tool round."""
    agent = wm.AgentMemoryConfig(template=TEMPLATE)
    async with Gateway(store=store, llm=client, config=CONFIG, agent_memory=agent) as gateway:
        run = await replay(gateway, script, upstream, tenant, exchanges, update_every=UPDATE_EVERY)
        memory = await gateway.get_thread_memory(tenant_id=tenant, thread_id=THREAD)
    updates = len(exchanges) // UPDATE_EVERY
    assert run.answers == len(exchanges) + updates
    assert run.older_tool_rounds > 0, "no window carried an earlier tool round"
    assert memory.working_memory == run.memory
    await assert_stored_as_sent(store, tenant, run)
    turns = await stored_turns(store, tenant)
    rounds = [i for i, t in enumerate(turns) if t.tool_calls]
    assert len(rounds) == updates
    for i in rounds:
        (call,) = turns[i].tool_calls
        assert (turns[i + 1].role, turns[i + 1].tool_call_id) == ("tool", call.id)
        assert turns[i - 1].role == "user"
        assert (turns[i + 2].role, turns[i + 2].tool_calls) == ("assistant", ())
