"""schemathesis against the running service's own /openapi.json, with a valid key, every check
on: no 5xx, and more: every request the document allows is taken (no schema-valid request
refused), every status and every response body is the documented one, a deleted resource
stays deleted, a 405 lists the methods the document gives. Then the same stateful: sequences
of calls linked by the ids the responses carry. Bounded in examples so the suite stays fast;
the chat endpoint answers through the scripted upstream."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case, HookContext
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.schemas import OpenApiSchema

import workingmem as wm
from tests.conftest import BACKENDS
from workingmem.llm.testing import ScriptedUpstream
from workingmem.service import create_app

from .conftest import CONFIG, answering, database_for, settings_for
from .live import LiveServer, create_key

pytestmark = pytest.mark.filterwarnings(
    # schemathesis draws some values with the `random` module (its dictionaries of known
    # values), which hypothesis reports when the strategy runs under our own `@given`
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)

EXAMPLES = 25
CHAT = "POST /v1/chat/completions"
RESPONSES = "POST /v1/responses"
COUNT = "POST /v1/responses/input_tokens"
COMPACT = "POST /v1/responses/compact"
MESSAGES = ("POST /v1/messages", "POST /v1/messages/count_tokens")
INSTRUCTIONS = ("system", "developer")
"""The chat roles that are the call's instructions, not turns (`workingmem.service.turns`)."""
ROOMY = CONFIG.model_copy(
    update={"models": {"answer-model": wm.ModelInfo(id="answer-model", context_window=1_000_000)}}
)
"""The suite's gateway with a window no fuzzed thread fills: a thread that outgrows its
window is a 400 (`context_length_exceeded`) however the request is written, and the fuzzer
writes to the same few threads again and again."""


@dataclass(frozen=True, slots=True)
class Target:
    """The server under test and its published document, aimed at it."""

    schema: OpenApiSchema
    url: str
    database_url: str

    def fresh_tenant(self) -> str:
        """A new tenant's key, with one thread (``seed``) written through chat."""
        key = create_key(self.database_url, f"tenant-{uuid.uuid4().hex[:12]}", "st").secret
        seeded = httpx.post(
            f"{self.url}/v1/chat/completions",
            headers={"Authorization": f"Bearer {key}", "X-Thread-Id": "seed"},
            json={"messages": [{"role": "user", "content": "remember: I like tea"}]},
        )
        assert seeded.status_code == 200, seeded.text
        return key


@pytest.fixture(scope="module", params=BACKENDS)
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    """The document as the server publishes it, read over HTTP."""
    database_url = database_for(request.param, tmp_path_factory.mktemp("schemathesis"))
    with (
        ScriptedUpstream(responder=answering) as upstream,
        LiveServer(create_app(settings_for(database_url, upstream, gateway=ROOMY))) as live,
    ):
        schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
        schema.config.update(base_url=live.url)

        @schema.hook
        def filter_body(context: HookContext, body: Any) -> bool:
            label = context.operation.label if context.operation is not None else None
            if label == CHAT:
                return in_order(body)
            if label == RESPONSES:
                return answerable(body)
            if label == COUNT:
                return countable(body)
            if label == COMPACT:
                return compactable(body)
            if label in MESSAGES:  # the body as `map_body` moves it (filters run first)
                return transcript_in_order(within_rules(body))
            return True

        @schema.hook
        def map_body(context: HookContext, body: Any) -> Any:
            label = context.operation.label if context.operation is not None else None
            return within_rules(body) if label in MESSAGES else body

        yield Target(schema=schema, url=live.url, database_url=database_url)


def in_order(body: Any) -> bool:
    """The chat operation's description (`ORDER_RULES`), which JSON Schema cannot say: system
    messages anywhere, the others the turns; the last turn the user's or tool results, or an
    assistant's text after one of those (which the model goes on from); each tool
    result right after the assistant message whose call it answers, each call answered once;
    the answer's cap and the request well within the model's window; no stream of several
    choices."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        return True  # a shape the schema refuses: for the other checks
    if body.get("stream") is True and isinstance(body.get("n"), int) and body["n"] > 1:
        return False
    if not served(body, "function", "custom") or "functions" in body or "function_call" in body:
        return False
    if not named_once(body, lambda tool: (tool.get(str(tool.get("type"))) or {}).get("name")):
        return False
    caps = [body.get(name) for name in ("max_tokens", "max_completion_tokens")]
    if any(isinstance(cap, (int, float)) and cap > 1_000 for cap in caps):
        return False
    if len(json.dumps(body)) > 8_000:  # the test model counts 4 characters a token
        return False
    turns = [m for m in messages if not (isinstance(m, dict) and m.get("role") in INSTRUCTIONS)]
    roles = [m.get("role") if isinstance(m, dict) else None for m in turns]
    if "function" in roles:
        return False
    goes_on = roles[-2:-1] in (["user"], ["tool"]) and not turns[-1].get("tool_calls")
    if not roles or not (roles[-1] in ("user", "tool") or (roles[-1] == "assistant" and goes_on)):
        return False
    open_calls: set[str] = set()
    for message, role in zip(turns, roles, strict=True):
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return False
            open_calls.discard(message["tool_call_id"])
            continue
        calls = [str(c.get("id")) for c in message.get("tool_calls") or () if isinstance(c, dict)]
        if len(set(calls)) != len(calls):
            return False
        open_calls = set(calls)
    return True


def served(body: dict[str, Any], *kinds: str) -> bool:
    """The descriptions' tools rule: every tool, and an object `tool_choice`, of one of the
    types `kinds` (Anthropic's client tools, ``custom``, may leave it out; its tool choices
    are others)."""
    untyped = "custom" if kinds == ("custom",) else None
    tools = body.get("tools")
    if isinstance(tools, list) and any(
        not isinstance(t, dict) or t.get("type", untyped) not in kinds for t in tools
    ):
        return False
    choice = body.get("tool_choice")
    return untyped is not None or not isinstance(choice, dict) or choice.get("type") in kinds


def named_once(body: dict[str, Any], name_of: Any) -> bool:
    """The descriptions' names rule: no two of the request's tools share a name."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return True
    names = [name_of(tool) for tool in tools if isinstance(tool, dict)]
    return len(set(map(str, names))) == len(names)


def answerable(body: Any) -> bool:
    """The Responses operation's description (`routes.responses.RULES`): the input's last
    item the user's or a call's output; one of `conversation` and `previous_response_id`;
    function tools only; the cap and the request well within the model's window; no `prompt`
    (`CREATE_RULES`: the test's upstream speaks chat, which cannot read one)."""
    if not isinstance(body, dict):
        return True
    if body.get("conversation") is not None and body.get("previous_response_id") is not None:
        return False
    if body.get("prompt") is not None:
        return False
    if not served(body, "function") or not named_once(body, lambda tool: tool.get("name")):
        return False
    cap = body.get("max_output_tokens")
    if (isinstance(cap, (int, float)) and cap > 1_000) or len(json.dumps(body)) > 8_000:
        return False
    items = body.get("input")
    if isinstance(items, list) and items and isinstance(items[-1], dict):
        last = items[-1]
        kind = last.get("type") or "message"
        if kind == "message":
            return last.get("role") != "assistant"
        return isinstance(kind, str) and kind.endswith("_output")
    return True


def countable(body: Any) -> bool:
    """The count's description (`routes.responses.COUNT_RULES`): the Responses rules, and
    input unless the request names the thread to count."""
    if not isinstance(body, dict):
        return True
    named = body.get("conversation") is not None or body.get("previous_response_id") is not None
    return answerable(body) and (named or body.get("input") not in (None, []))


def compactable(body: Any) -> bool:
    """The compaction's description (`routes.responses.COMPACT_RULES`): one of `conversation`
    and `previous_response_id`, and input unless the request names the thread to compact; the
    input in any order (a conversation may end with an answer)."""
    if not isinstance(body, dict):
        return True
    conversation, previous = body.get("conversation"), body.get("previous_response_id")
    if conversation is not None and previous is not None:
        return False
    named = conversation is not None or previous is not None
    return len(json.dumps(body)) <= 8_000 and (named or body.get("input") not in (None, []))


def within_rules(body: Any) -> Any:
    """A drawn Messages body moved within what its description asks and the schema allows
    (a cap of at most 1,000 tokens, the user's message last), rather than drawn again until
    it is: those bodies are costly to draw, and most draws miss one of the two."""
    if not isinstance(body, dict):
        return body
    cap = body.get("max_tokens")
    if isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 1_000:
        body = {**body, "max_tokens": 1_000}
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, dict) and last.get("role") != "user":
        body = {**body, "messages": [*messages, {"role": "user", "content": "Go on."}]}
    return body


def transcript_in_order(body: Any) -> bool:
    """The Messages operation's description (`routes.messages.RULES`): the last user or
    assistant message the user's, or an assistant's text after it (a prefill); a user
    message's leading tool_result blocks answer the tool_use blocks of the assistant message
    before it, each once; a system message's blocks text only; the cap and the request well
    within the window."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return True
    cap = body.get("max_tokens")
    if (isinstance(cap, (int, float)) and cap > 1_000) or len(json.dumps(body)) > 8_000:
        return False
    turns = [m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")]
    if not served(body, "custom") or not turns or not _answerable(turns):
        return False
    open_calls: set[str] = set()
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if message.get("role") == "system":
            if any(block.get("type") != "text" for block in blocks):
                return False
            continue
        if message.get("role") == "assistant":
            uses = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
            if len(set(uses)) != len(uses):
                return False
            open_calls = set(uses)
            continue
        for block in blocks:
            if block.get("type") != "tool_result":
                break
            if block.get("tool_use_id") not in open_calls:
                return False
            open_calls.discard(block["tool_use_id"])
        open_calls = set()
    return True


def _answerable(turns: list[Any]) -> bool:
    """The last turn the user's, or an assistant's text (a prefill) after the user's."""
    if turns[-1].get("role") == "user":
        return True
    content = turns[-1].get("content")
    blocks = content if isinstance(content, list) else []
    texts = all(isinstance(b, dict) and b.get("type") == "text" for b in blocks)
    before = turns[-2].get("role") if len(turns) > 1 and isinstance(turns[-2], dict) else None
    return turns[-1].get("role") == "assistant" and texts and before == "user"


def _labels() -> list[str]:
    """The operations, from the same app's document (the server's own is read in the test)."""
    document = create_app(settings_for("sqlite:///unused.db", _NO_UPSTREAM)).openapi()
    labels = []
    for result in schemathesis.openapi.from_dict(document).get_all_operations():
        assert isinstance(result, Ok), result
        labels.append(result.ok().label)
    return labels


class _NoUpstream:
    base_url = "http://127.0.0.1:9/v1"


_NO_UPSTREAM: Any = _NoUpstream()


@pytest.mark.parametrize("label", _labels())
def test_the_server_does_what_its_document_says(target: Target, label: str) -> None:
    operation = target.schema.find_operation_by_label(label)
    assert operation is not None, f"the server's document lacks {label}"
    authorization = {"Authorization": f"Bearer {target.fresh_tenant()}"}

    @given(operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    def check(case: Case[Any]) -> None:
        case.call_and_validate(headers=authorization)  # every check: none is turned off

    check()


def test_sequences_of_calls_keep_to_the_document(target: Target) -> None:
    """Stateful: sequences linked by the ids responses carry (a thread listed, then read,
    forgotten, its working memory written and cleared, deleted, read again). Each scenario
    starts from a tenant of its own with one thread, so every scenario meets the same state."""

    class Workflow(target.schema.as_state_machine()):  # type: ignore[misc]
        key = ""

        def setup(self) -> None:
            self.key = target.fresh_tenant()

        def get_call_kwargs(self, case: Case[Any]) -> dict[str, Any]:
            return {"headers": {"Authorization": f"Bearer {self.key}"}}

    Workflow.run(
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
        )
    )
