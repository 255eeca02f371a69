"""``/v1/responses``: OpenAI's Responses API, with the thread's memory.

    client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="wm_...")
    first = client.responses.create(model="gpt-4o-mini", input="My budget is 4,000 euros.")
    later = client.responses.create(model="gpt-4o-mini", input="What was my budget?",
                                    previous_response_id=first.id)

Which thread a request continues: its ``conversation`` (a thread: the Conversations API's),
else its ``previous_response_id``'s thread (continuing from a response that is not the newest
of its thread forks a new thread, with the turns up to it and the summary that covers them),
else ``X-Thread-Id`` / ``metadata.thread_id``, else the conversation its input opens (a client
that resends the whole input every call, ``store: false``, needs no id). The model reads the
thread's memory, not the whole chain; ``X-Workingmem-History: client`` (or the profile's
``history``) sends the request's own input instead. Every input item is stored verbatim, once;
the answer's items are stored with the ids the client is shown.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...compaction import restored
from ...errors import ConflictError
from ...formats import carrying, joined_instructions
from ...formats.chat_answer import reasoning_of
from ...formats.client_tools import Loaded, offer
from ...formats.responses import FORMAT, instruction_text, starts_with_output, turns_of
from ...formats.responses_chat import (
    answer_turn,
    chat_options,
    native_output,
    new_id,
    reasoning_item,
)
from ...gateway import AnswerStream, AskResult, Gateway
from ...llm import Completion, NativeEvent, TextDelta
from ...messages import check_id, same
from ...stores.responses import ResponseStore, StoredResponse
from ...types import Message, MessageIn, NativeItem
from ..auth import Tenant
from ..compacted_response import compacted_object
from ..disconnect import ClientDisconnectedError, EventStreamResponse, unless_disconnected
from ..errors import ApiError
from ..params import (
    ASK_HEADERS_DOC,
    AskedHeaders,
    AskHeaders,
    Page,
    ResponseIdPath,
    thread_header,
)
from ..response_body import ResponseInfo, response_object, with_logprobs
from ..response_events import response_events
from ..response_items import list_items, open_calls_before, with_references
from ..responses_schemas import (
    InputTokenCountRequest,
    ResponseCompactRequest,
    ResponseCreateRequest,
    ResponseInputRequest,
)
from ..server_compaction import compact_threshold, compaction_after, is_due
from ..sessions import awaiting_key, awaiting_thread
from ..sse import Finish, first_chat_piece, named_event
from ..state import Services, get_services
from ..tool_search import ServerToolSearch
from . import BUSY, ERRORS, UPSTREAM

__all__ = ["Create", "Recent", "create_events", "prepare_create", "records_of", "router"]

router = APIRouter(tags=["responses"], responses=ERRORS)

T = TypeVar("T")

RULES = (
    "Input: text, or items whose last is the user's message (or a system / developer "
    "message) or the outputs of the calls of the response before it, or an assistant's "
    "message after one of those, which the model goes on from; continuing a response or a "
    "conversation, they are new items (never an edit). A history resent with the "
    "compaction of a thread (`POST /v1/responses/compact`) continues "
    "that thread. An "
    "`item_reference` names an item of the thread the request continues, else of any of the "
    "tenant's threads, which takes its place; any other id is a 404. `conversation` and "
    "`previous_response_id` are mutually "
    "exclusive. Tools: "
    "function tools, `custom` tools (offered upstream as a function of one string, `input`) "
    "and `namespace` tools of them, run by the client (a namespace's tool is offered as "
    "`<namespace>__<name>`, at most 64 characters; each tool's name so is no other tool's), "
    "and a "
    "`tool_search` the client runs (`execution: client`; offered as a function `tool_search` "
    "whose calls come back as `tool_search_call` items; the tools of the input's "
    "`tool_search_output` and `additional_tools` items are offered after the request's own), "
    "or one the server runs (`execution: server`, or left out), which the gateway runs: the "
    "tools marked `defer_loading` are offered once a search loads them by name, and the "
    "response shows its `tool_search_call` and `tool_search_output` before the answer; a "
    "`shell` in a `local` environment and an `apply_patch`, run by the client (offered as "
    "functions of that name, whose calls come back as `shell_call` and `apply_patch_call`); "
    "any other tool, "
    "or a `tool_choice` of another type, is a 400 that names it. The "
    "newest turns and `max_output_tokens` must fit the model's window with the instructions "
    "and the tools, else the answer is a 400 `context_length_exceeded`."
)
"""What JSON Schema cannot say of a request; published as the operation's description."""

CREATE_RULES = (
    f"{RULES} A `prompt` (a prompt stored at OpenAI) is read by an upstream that speaks the "
    "Responses API; on any other it is a 400 naming `prompt`. `context_management` with a "
    "`compaction` entry ends the response with a compaction item once what the client resends "
    "passes its threshold."
)
"""What JSON Schema cannot say of a request to create a response."""

COUNT_RULES = (
    f"{RULES} Without input, the thread the request names (`conversation`, "
    "`previous_response_id` or `X-Thread-Id`) has its memory counted; without input and "
    "without a thread, it is a 400 naming `input`."
)
"""What JSON Schema cannot say of a request to count its input tokens."""

COMPACT_RULES = (
    "The conversation compacted is the thread the request names (`conversation`, "
    "`previous_response_id` up to that response, or `X-Thread-Id`), then its input; without "
    "either it is a 400 naming `input`. The answer is the conversation's user messages, then "
    "one `compaction` item that stands for the rest: send them as the next request's input in "
    "place of the history. The profile's cheap model writes the compaction (a summary and "
    "facts, readable by any upstream) from the thread's stored summary on; nothing is stored. "
    "`item_reference` items and the thread's naming follow the rules of `POST /v1/responses`."
)
"""What JSON Schema cannot say of a request to compact a conversation."""

FORWARDED = (
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
)
"""The request's fields a chat upstream takes as they are (a Responses upstream too: the
Responses client sends the options it does not convert as they are)."""


def records_of(services: Services) -> ResponseStore:
    """The store of responses and conversations: the gateway's, when it keeps them."""
    store = services.gateway.store
    if not isinstance(store, ResponseStore):
        raise ApiError(404, "this server's store keeps no responses", code="not_found")
    return store


@dataclass(frozen=True, slots=True)
class _Target:
    """The thread a request continues, and from where."""

    thread_id: str | None
    expect_turns: int | None = None
    previous: StoredResponse | None = None
    conversation_id: str | None = None
    after_compaction: bool = False
    """The input is what follows a resent compaction of the thread (`compaction.restored`)."""

    @property
    def appends(self) -> bool:
        """The input is new items (OpenAI's contract when a request continues a response or
        a conversation, and what follows a thread's compaction): it never edits the thread,
        as a resent history may."""
        return (
            self.previous is not None or self.conversation_id is not None or self.after_compaction
        )


async def _target(
    records: ResponseStore,
    tenant: str,
    body: ResponseInputRequest,
    header: str | None,
    recent: Recent | None = None,
) -> _Target:
    conversation = body.conversation_id()
    if conversation is not None and body.previous_response_id is not None:
        raise ApiError(
            400,
            "conversation and previous_response_id are mutually exclusive: send one",
            code="invalid_request_error",
            param="previous_response_id",
        )
    if conversation is not None:
        check_id("conversation", conversation)
        await records.get_conversation(tenant_id=tenant, conversation_id=conversation)
        return _Target(thread_id=conversation, conversation_id=conversation)
    if body.previous_response_id is not None:
        response_id = check_id("previous_response_id", body.previous_response_id)
        kept = recent.find(response_id) if recent is not None else None
        previous = kept or await records.get_response(tenant_id=tenant, response_id=response_id)
        # continued where it ended: a thread that went on since is a ConflictError under its
        # lock, and the request is then placed again (`_continued`)
        return _Target(previous.thread_id, expect_turns=previous.last_seq, previous=previous)
    if header is not None and header.strip():
        return _Target(check_id("X-Thread-Id", header))
    named = (body.metadata or {}).get("thread_id")
    return _Target(check_id("metadata.thread_id", named) if named is not None else None)


async def _input_turns(
    gateway: Gateway, tenant: str, body: ResponseInputRequest, target: _Target
) -> list[NativeItem]:
    """The request's input as the thread's new turns: its references resolved in the thread
    it continues, an output at its start answering that thread's open call."""
    items = await with_references(
        gateway.store,
        body.items(),
        tenant_id=tenant,
        thread_id=target.thread_id,
        last=target.expect_turns,
    )
    answering: frozenset[str] = frozenset()
    if starts_with_output(items) and target.thread_id is not None:
        answering = await open_calls_before(
            gateway.store,
            tenant_id=tenant,
            thread_id=target.thread_id,
            seq=target.previous.last_seq + 1 if target.previous is not None else None,
        )
    return turns_of(items, open_calls=answering)


@dataclass(frozen=True, slots=True)
class _Instructions:
    """A request's system prompt, and the text a response to it carries over."""

    system_prompt: str | None
    carried: str | None
    """The system and developer messages of the chain's inputs (`_instructions`)."""


def _instructions(
    given: str | None, target: _Target, turns: list[NativeItem]
) -> tuple[_Instructions, list[NativeItem]]:
    """The call's instructions, and the turns left to place: the system or developer messages
    an input opens with are the call's instructions after `instructions`, not turns. A client
    that resends its history (LangChain's `ChatOpenAI` on the Responses API) resends them on
    every call, as a chat client resends its system message: stored, they would be a turn of
    the thread, read as the user's words, and out of the window once it grows. Continuing from
    a response carries its chain's over, as OpenAI carries an input's items (`instructions`
    themselves are not, as at OpenAI). A conversation's are items of it; an input of nothing
    else stays the input. Read before a compaction in the input is (`_restored`): what comes
    before the compaction item is then not read again, its instructions are."""
    previous = target.previous.carried_instructions if target.previous is not None else None
    texts: list[str] = []
    if target.conversation_id is None:
        for turn in turns:
            text = instruction_text(turn)
            if text is None:
                break
            texts.append(text)
        if len(texts) == len(turns):
            texts = []
    carried = joined_instructions(previous, *texts)
    return _Instructions(joined_instructions(given, carried), carried), turns[len(texts) :]


async def _restored(
    gateway: Gateway, tenant: str, target: _Target, turns: list[NativeItem]
) -> tuple[_Target, list[NativeItem]]:
    """A resent history after a compaction of a thread (`compaction.restored`) when the
    request names no other thread: what follows the compaction, as new items on that thread;
    or, when the thread went on since, the history with the thread's turns in the
    compaction's place. A request that continues a response or a conversation sends new
    items: left as it is."""
    if target.appends:
        return target, turns
    resent = await restored(gateway.store, tenant_id=tenant, turns=turns)
    if resent.thread_id is None or target.thread_id not in (None, resent.thread_id):
        return target, turns  # no compaction of a thread, or of another than the one named
    if resent.only_new:
        return _Target(resent.thread_id, after_compaction=True), resent.turns
    # the thread went on since: the whole history is placed as any is (without an id, a fork)
    return target, resent.turns


async def _continued(
    gateway: Gateway, tenant: str, target: _Target, turns: Sequence[NativeItem]
) -> _Target:
    """Where a request that continues from a response its thread went on from goes: the same
    thread when what came after that response is where this request's input starts (a retry
    of a request whose answer failed), else a fork."""
    previous = target.previous
    assert previous is not None
    after = await gateway.store.list_turns(
        tenant_id=tenant,
        thread_id=previous.thread_id,
        after_seq=previous.last_seq,
        limit=len(turns) + 1,
    )
    if 0 < len(after) <= len(turns) and all(
        same(turn.to_message(), new.message) for turn, new in zip(after, turns, strict=False)
    ):
        count = previous.last_seq + len(after)
        return _Target(previous.thread_id, expect_turns=count, previous=previous)
    return await _fork(gateway, tenant, previous)


async def _continuing(
    gateway: Gateway,
    tenant: str,
    target: _Target,
    turns: Sequence[NativeItem],
    call: Callable[[_Target], Awaitable[T]],
) -> T:
    """`call` on the target; once more where `_continued` places the request when the thread
    of the previous response went on since (a ConflictError under its lock)."""
    try:
        return await call(target)
    except ConflictError:
        if target.previous is None:
            raise
    return await call(await _continued(gateway, tenant, target, turns))


async def _carried_tools(
    records: ResponseStore, tenant: str, target: _Target, body: ResponseInputRequest
) -> list[dict[str, Any]] | None:
    """The tools loaded before the request in what it continues: the chain of the response it
    continues, or the conversation's (its newest response's); for a thread it names otherwise
    (``X-Thread-Id``), its newest response's too when the request offers a tool search (what
    loads tools: the read costs no other request anything); none for a thread found by how
    its input opens (its history, resent, holds what loaded them)."""
    if target.previous is not None:
        return target.previous.carried_tools
    thread = target.conversation_id
    if thread is None and body.offers_search():
        thread = target.thread_id
    if thread is None:
        return None
    newest = await records.newest_response(tenant_id=tenant, thread_id=thread)
    return newest.carried_tools if newest is not None else None


async def _fork(gateway: Gateway, tenant: str, previous: StoredResponse) -> _Target:
    """A new thread that continues from `previous`, which is not its thread's newest."""
    fork = new_id("conv")
    await gateway.store.fork_thread(
        tenant_id=tenant,
        source_id=previous.thread_id,
        thread_id=fork,
        through_seq=previous.last_seq,
    )
    return _Target(fork, expect_turns=previous.last_seq, previous=previous)


@router.post(
    "/v1/responses",
    responses={200: {"content": {"text/event-stream": {}}}, **BUSY, **UPSTREAM},
    summary="Answer the thread's new input, with its memory",
    description=CREATE_RULES,
    openapi_extra=ASK_HEADERS_DOC,
)
async def create_response(
    body: ResponseCreateRequest,
    request: Request,
    tenant: Tenant,
    asked: AskHeaders,
) -> Response:
    """OpenAI's response; the answer's thread is named by the ``X-Thread-Id`` header."""
    services = get_services(request)
    create = await prepare_create(services, tenant, body, asked)
    if body.stream:
        thread_id, events = await create_events(services, tenant, create)
        return EventStreamResponse(
            events,
            media_type="text/event-stream",
            headers={
                **thread_header(thread_id),
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            },
        )
    gateway = services.gateway

    async def answered(on: _Target) -> AskResult:
        ask_on = gateway.ask(**create.ask, thread_id=on.thread_id, expect_turns=on.expect_turns)
        return await unless_disconnected(request, ask_on)

    try:
        result = await _continuing(gateway, tenant, create.target, create.turns, answered)
    except ClientDisconnectedError:
        return Response(status_code=499)
    services.metrics.observe_answer(result.usage)
    return JSONResponse(await create.finish(result), headers=thread_header(result.thread_id))


@dataclass(frozen=True, slots=True)
class Create:
    """A request to create a response, read and placed: what the gateway is asked, on which
    thread, and what the answer's end stores and returns (`finish`)."""

    ask: dict[str, Any]
    target: _Target
    turns: list[NativeItem]
    info: ResponseInfo
    message_id: str
    reasoning_id: str
    served: ServerToolSearch | None
    finish: Finish


class Recent(Protocol):
    """Responses a transport keeps beyond the store: a Responses WebSocket connection's
    newest, which a request on it may continue even when they were not stored."""

    def find(self, response_id: str) -> StoredResponse | None:
        """The response kept under `response_id`, or None."""
        ...

    def keep(self, response: StoredResponse) -> None:
        """Keeps an answer's response (stored or not) as the newest."""
        ...


async def prepare_create(
    services: Services,
    tenant: str,
    body: ResponseCreateRequest,
    asked: AskedHeaders,
    recent: Recent | None = None,
) -> Create:
    """Reads `body` (its thread, its input as turns, its instructions and tools): everything
    before the answer is asked for, where a bad request is refused before any work."""
    gateway = services.gateway
    records = records_of(services)
    user_id = asked.x_user_id or body.user
    if user_id is not None:
        check_id("user", user_id)
    target = await _target(records, tenant, body, asked.x_thread_id, recent)
    sent = await _input_turns(gateway, tenant, body, target)
    instructions, as_sent = _instructions(body.instructions, target, sent)
    target, turns = await _restored(gateway, tenant, target, as_sent)
    given = body.given_tools()
    loaded = body.loaded_tools(await _carried_tools(records, tenant, target, body))
    tools, offered = offer(given, loaded=loaded)
    search = ServerToolSearch.of(given, loaded, offered)
    native = gateway.native_format == FORMAT  # the upstream speaks Responses
    options = _options(body, native=native)
    if target.thread_id is None:  # a session's conversation, sent whole
        found = await awaiting_thread(
            records,
            gateway.store,
            tenant_id=tenant,
            user_id=user_id,
            request=[t.message for t in turns],
        )
        if found is not None:
            target = _Target(found, conversation_id=None)
    # found by how it opens: its record keeps a key of its answer (`sessions.copy_of`)
    keeps_key = target.thread_id is None and body.store
    profile, model = gateway.profiles.for_request(asked.x_profile, body.model)
    plan = gateway.plan(profile, model=model)
    info = ResponseInfo(
        response_id=new_id("resp"),
        created_at=int(time.time()),
        model=plan.model.id,
        request=body,
        conversation_id=target.conversation_id,
    )
    message_id, reasoning_id = new_id("msg"), new_id("rs")

    def answer_as(message: Message, completion: Completion | None) -> MessageIn | NativeItem:
        native = native_output(completion, message, message_id=message_id, offered=offered)
        if native is not None:
            return native
        thought = reasoning_of(completion.own_fields if completion is not None else None)
        reasoning = reasoning_item(reasoning_id, thought) if thought else None
        return answer_turn(message, message_id=message_id, offered=offered, reasoning=reasoning)

    ask: dict[str, Any] = {
        "tenant_id": tenant,
        "messages": turns,
        "user_id": user_id,
        "profile": profile,
        "system_prompt": instructions.system_prompt,
        "model": model,
        "tools": tools,
        "options": options,
        "max_tokens": body.max_output_tokens,
        "answer_format": answer_as,
        "session": body.prompt_cache_key,
        "appends": target.appends,
        "served": search,
    }
    if (asked.x_history or gateway.profiles.get(profile).history) == "client":
        system: list[Message] = (
            [{"role": "system", "content": instructions.system_prompt}]
            if instructions.system_prompt
            else []
        )
        # a Responses upstream gets the items as they came (reasoning included), any other
        # upstream their chat view
        given = [carrying(turn.message, turn.item if native else None) for turn in as_sent]
        ask["passthrough"] = [*system, *given]

    threshold = compact_threshold(body.context_management, plan.model)

    async def finish(result: AskResult) -> dict[str, Any]:
        compacted: list[dict[str, Any]] = []
        if is_due(threshold, result, as_sent, instructions.system_prompt, plan.model):
            item = await compaction_after(
                gateway,
                tenant_id=tenant,
                thread_id=result.thread_id,
                through=result.turns[-1].seq or result.input_seq + 1,
                user_id=user_id,
                profile=profile,
                model=model,
            )
            compacted = [item] if item is not None else []
        searched = search.items if search is not None else []
        carried = _Carried(instructions.carried, loaded)
        key = awaiting_key(user_id, result.turns[-1].to_message()) if keeps_key else None
        return await _finish(
            records, tenant, info, result, len(turns), carried, searched, compacted, key, recent
        )

    return Create(ask, target, turns, info, message_id, reasoning_id, search, finish)


async def create_events(
    services: Services,
    tenant: str,
    create: Create,
    encode: Callable[[dict[str, Any]], bytes] = named_event,
) -> tuple[str, AsyncGenerator[bytes, None]]:
    """The answer's thread and its streamed events, each made by `encode` (SSE's framing by
    default); a failure before the answer begins is raised here, as a plain error."""
    gateway = services.gateway

    async def started(on: _Target) -> tuple[AnswerStream, TextDelta | NativeEvent | None]:
        stream = gateway.ask_stream(
            **create.ask, thread_id=on.thread_id, expect_turns=on.expect_turns
        )
        return stream, await first_chat_piece(stream)

    stream, first = await _continuing(gateway, tenant, create.target, create.turns, started)
    events = response_events(
        stream,
        first,
        create.info,
        message_id=create.message_id,
        reasoning_id=create.reasoning_id,
        finish=create.finish,
        metrics=services.metrics,
        served=create.served.items if create.served is not None else (),
        encode=encode,
    )
    return stream.thread_id or "", events


def _options(body: ResponseCreateRequest, *, native: bool) -> dict[str, Any]:
    """What the chat upstream is asked beyond the messages and the tools; a stored prompt
    only when the upstream speaks Responses (`native`), where such prompts are read."""
    if body.prompt is not None and not native:
        raise ApiError(
            400,
            "prompt: a stored prompt is read by an upstream that speaks the Responses API, "
            "and this gateway's does not; send the prompt's text as instructions",
            code="invalid_request_error",
            param="prompt",
        )
    options = chat_options(
        tool_choice=body.sent("tool_choice"),
        text=body.sent("text"),
        reasoning=body.sent("reasoning"),
    )
    sent = body.model_dump(include=set(FORWARDED), exclude_unset=True)  # not the input
    options.update({name: sent[name] for name in FORWARDED if sent.get(name) is not None})
    if body.wants_logprobs:  # asked as the chat API asks (a Responses upstream's client converts)
        options["logprobs"] = True
        if body.top_logprobs is not None:
            options["top_logprobs"] = body.top_logprobs
    if body.prompt is not None:
        options["prompt"] = body.prompt.model_dump(exclude_none=True)
    user = body.safety_identifier or body.user
    if user is not None:
        options["user"] = user
    return options


@dataclass(frozen=True, slots=True)
class _Carried:
    """What continuing from a response carries over: its chain's instructions, and the tools
    its chain loaded (`loaded`: carried to it, loaded by its input, by the searches the
    gateway ran for it)."""

    instructions: str | None
    loaded: list[Loaded]

    def tools(self) -> list[dict[str, Any]] | None:
        """The tools loaded, each once, in order; None for none."""
        found: dict[str, dict[str, Any]] = {}
        for load in self.loaded:
            for tool in load.tools if isinstance(load.tools, list) else ():
                found.setdefault(json.dumps(tool, sort_keys=True), tool)
        return list(found.values()) or None


async def _finish(
    records: ResponseStore,
    tenant: str,
    info: ResponseInfo,
    result: AskResult,
    inputs: int,
    carried: _Carried,
    searched: Sequence[dict[str, Any]] = (),
    compacted: Sequence[dict[str, Any]] = (),
    answer_key: str | None = None,
    recent: Recent | None = None,
) -> dict[str, Any]:
    """The response object of an answer, stored as a record unless ``store: false``: the
    items of the tool searches the gateway ran for it (`ServerToolSearch`), the answer's, a
    server-side compaction item; `answer_key`, what the record keeps of its answer for a
    thread found by how the request opened (`sessions.copy_of`); kept in `recent` too,
    stored or not."""
    answer = result.turns[-1]
    items = (answer.in_format(FORMAT) or {}).get("items") or []
    if info.request.wants_logprobs:
        items = with_logprobs(items, result.logprobs)
    output = [*searched, *items, *compacted]
    incomplete = result.finish_reason == "length"
    body = response_object(
        info,
        status="incomplete" if incomplete else "completed",
        output=output,
        usage=result.usage,
        incomplete_reason="max_output_tokens" if incomplete else None,
    )
    if not info.request.store and recent is None:
        return body  # kept nowhere: no record to make (its carried tools cost a dump each)
    record = StoredResponse(
        response_id=info.response_id,
        thread_id=result.thread_id,
        input_seq=max(1, result.input_seq - inputs + 1),
        output_seq=result.input_seq + 1,
        last_seq=answer.seq or result.input_seq + 1,
        body=body,
        carried_instructions=carried.instructions,
        carried_tools=carried.tools(),
        answer_key=answer_key,
    )
    if info.request.store:
        await records.put_response(tenant_id=tenant, response=record)
    if recent is not None:
        recent.keep(record)
    return body


async def _read_only(
    request: Request, tenant: str, body: ResponseInputRequest, asked: AskHeaders, verb: str
) -> tuple[Gateway, _Target, list[NativeItem], str | None]:
    """What a request that reads a conversation without answering it (to count it, to
    compact it) names: the gateway, the thread, the input as turns, the user; a 400 naming
    `input` when it names neither input nor a thread."""
    services = get_services(request)
    user_id = asked.x_user_id
    if user_id is not None:
        check_id("user", user_id)
    target = await _target(records_of(services), tenant, body, asked.x_thread_id)
    turns = await _input_turns(services.gateway, tenant, body, target)
    if not turns and target.thread_id is None:
        raise ApiError(
            400,
            f"nothing to {verb}: send input, or name the thread to {verb} "
            "(conversation, previous_response_id or X-Thread-Id)",
            code="invalid_request_error",
            param="input",
        )
    return services.gateway, target, turns, user_id


@router.post(
    "/v1/responses/input_tokens",
    summary="The input tokens the request would cost upstream, with the memory",
    description=COUNT_RULES,
    openapi_extra=ASK_HEADERS_DOC,
)
async def count_input_tokens(
    body: InputTokenCountRequest,
    request: Request,
    tenant: Tenant,
    asked: AskHeaders,
) -> dict[str, Any]:
    """What `create` would send upstream for this input now (the thread's memory, the new
    items, the instructions, the tools), on the thread `create` would continue, counted as
    `Gateway.count_tokens` counts (an Anthropic upstream's own count, else the model's
    tokenizer). Nothing is stored. Continuing a response that is not its thread's newest, the
    thread is counted as it stands (`create` would fork it at that response)."""
    gateway, target, turns, user_id = await _read_only(request, tenant, body, asked, "count")
    services = get_services(request)
    instructions, turns = _instructions(body.instructions, target, turns)  # as `create` does
    target, turns = await _restored(gateway, tenant, target, turns)
    carried = await _carried_tools(records_of(services), tenant, target, body)
    profile, model = gateway.profiles.for_request(asked.x_profile, body.model)
    tokens = await gateway.count_tokens(
        tenant_id=tenant,
        thread_id=target.thread_id,
        messages=turns,
        user_id=user_id,
        profile=profile,
        system_prompt=instructions.system_prompt,
        model=model,
        tools=body.offered_tools(carried)[0],
        appends=target.appends,
    )
    return {"object": "response.input_tokens", "input_tokens": tokens}


@router.post(
    "/v1/responses/compact",
    responses=UPSTREAM,  # it takes no lock and writes nothing: no conflict to answer
    summary="Compact a conversation: its user messages, and one compaction item for the rest",
    description=COMPACT_RULES,
    openapi_extra=ASK_HEADERS_DOC,
)
async def compact_response(
    body: ResponseCompactRequest,
    request: Request,
    tenant: Tenant,
    asked: AskHeaders,
) -> dict[str, Any]:
    """OpenAI's ``responses.compact``, done by the gateway's cheap model (`Gateway.compact`),
    so that the compaction item reads on any upstream. The thread is read as it stands up to
    the response named (a fork is not made: nothing is stored)."""
    gateway, target, turns, user_id = await _read_only(request, tenant, body, asked, "compact")
    _, turns = _instructions(None, target, turns)  # instructions, as `create` reads them
    profile, model = gateway.profiles.for_request(asked.x_profile, body.model)
    compaction = await gateway.compact(
        tenant_id=tenant,
        messages=turns,
        thread_id=target.thread_id,
        through_seq=target.expect_turns,
        user_id=user_id,
        profile=profile,
        model=model,
    )
    return compacted_object(compaction, response_id=new_id("resp"), created_at=int(time.time()))


@router.get("/v1/responses/{response_id}", summary="A stored response")
async def get_response(
    response_id: ResponseIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    record = await records_of(get_services(request)).get_response(
        tenant_id=tenant, response_id=response_id
    )
    return record.body


@router.delete("/v1/responses/{response_id}", summary="Delete a stored response")
async def delete_response(
    response_id: ResponseIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    """Deletes the response object; its turns stay the thread's (forget them with the
    thread's own endpoints)."""
    await records_of(get_services(request)).delete_response(
        tenant_id=tenant, response_id=response_id
    )
    return {"id": response_id, "object": "response", "deleted": True}


@router.post(
    "/v1/responses/{response_id}/cancel",
    summary="Cancel a background response (this gateway serves none)",
)
async def cancel_response(
    response_id: ResponseIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    """OpenAI's ``responses.cancel``, which only a response created with ``background: true``
    takes: every response here was answered in its request, so a stored one is a 400 saying
    so, and a missing one (or another tenant's) a 404."""
    await records_of(get_services(request)).get_response(tenant_id=tenant, response_id=response_id)
    raise ApiError(
        400,
        "only a response created with background: true can be cancelled, and this gateway "
        "answers every response in its request (it serves no background responses)",
        code="invalid_request_error",
    )


@router.get("/v1/responses/{response_id}/input_items", summary="A response's input items")
async def input_items(
    response_id: ResponseIdPath,
    request: Request,
    tenant: Tenant,
    page: Page,
) -> dict[str, Any]:
    services = get_services(request)
    record = await records_of(services).get_response(tenant_id=tenant, response_id=response_id)
    listed = await list_items(
        services.gateway.store,
        tenant_id=tenant,
        thread_id=record.thread_id,
        order=page.order,
        after=page.after,
        limit=page.limit,
        first=record.input_seq,
        last=record.output_seq - 1,
    )
    return listed.body()
