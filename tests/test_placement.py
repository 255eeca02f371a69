"""`place` on a stored thread decides what the rule decides on the whole thread (R26-R27).

`place` reads only the thread's newest turns, and its start only when the request could
rewrite it; hypothesis draws threads (with the gateway's own memory rounds, which the client
never sees) and requests (the whole history resent, a part of it, an edit, a regenerate, one
new message that says again what an older one said) and checks that reading less never
decides otherwise than `overlap` and `continuation` on the client's view of every turn.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workingmem as wm
from workingmem.conversations import extends
from workingmem.messages import continuation, overlap
from workingmem.placement import NewestRead, Placement, first_limit, place
from workingmem.tokens import tokenizer_for

TOKENIZER = tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))

messages = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["user", "assistant"]),
    st.sampled_from(["hi", "yes", "Lyon?"]),  # few values: repeats happen often
)


def memory_round(call_id: str) -> list[wm.Message]:
    """A round of the gateway's own agent-memory tools: stored, never seen by the client."""
    function = {"name": "get_working_memory", "arguments": "{}"}
    call = {"id": call_id, "type": "function", "function": function}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "(empty)"},
    ]


@st.composite
def threads(draw: st.DrawFn) -> list[wm.Message]:
    """Client-visible turns, with the gateway's memory rounds among them now and then."""
    thread: list[wm.Message] = []
    for index in range(draw(st.integers(1, 10))):
        if thread and draw(st.integers(0, 4)) == 0:
            thread.extend(memory_round(f"m{index}"))
        thread.append(draw(messages))
    return thread


def shown(thread: list[wm.Message]) -> list[tuple[int, wm.Message]]:
    """The client's view of `thread`: (seq, message) without the memory rounds."""
    hidden = {t.get("tool_call_id") for t in thread if t["role"] == "tool"}
    return [
        (seq, m)
        for seq, m in enumerate(thread, start=1)
        if not m.get("tool_calls") and m.get("tool_call_id") not in hidden
    ]


@st.composite
def requests(draw: st.DrawFn, thread: list[wm.Message]) -> list[wm.Message]:
    """A request for the client's view of `thread`: a part of it from its start or from
    anywhere, then new turns."""
    thread = [m for _, m in shown(thread)]
    start = draw(st.integers(0, len(thread)))
    end = draw(st.integers(start, len(thread)))
    return [*thread[start:end], *draw(st.lists(messages, max_size=3))] or [draw(messages)]


def by_the_rule(thread: list[wm.Message], request: list[wm.Message]) -> Placement:
    """The rule applied to the client's view of the whole thread."""
    seen = shown(thread)
    extended = overlap([m for _, m in seen], request)
    if extended:
        return Placement(start=extended, turn_count=len(thread))
    found = continuation([m for _, m in seen], request)
    after = None if found.keep is None else seen[found.keep - 1][0]
    return Placement(start=found.start, after_seq=after, turn_count=len(thread))


async def placed(
    thread: list[wm.Message], request: list[wm.Message], *, rewrites: bool = True
) -> Placement:
    async with await wm.open_store("sqlite:///:memory:") as store:
        await store.append(tenant_id="t", thread_id="th", messages=thread)
        return await place(
            store,
            tenant_id="t",
            thread_id="th",
            request=request,
            tokenizer=TOKENIZER,
            rewrites=rewrites,
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_placing_on_the_store_decides_what_the_rule_decides_on_the_whole_thread(
    data: st.DataObject,
) -> None:
    thread = data.draw(threads())
    request = data.draw(requests(thread))
    assert asyncio.run(placed(thread, request)) == by_the_rule(thread, request)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_request_that_only_appends_never_rewrites_the_thread(data: st.DataObject) -> None:
    """Without `rewrites` (a Responses request continuing a response or a conversation) only
    the turns the thread ends with are known again; the rest is new, whatever it repeats."""
    thread = data.draw(threads())
    request = data.draw(requests(thread))
    seen = [m for _, m in shown(thread)]
    appended = Placement(start=overlap(seen, request), turn_count=len(thread))
    assert asyncio.run(placed(thread, request, rewrites=False)) == appended


async def extended(thread: list[wm.Message], request: list[wm.Message]) -> tuple[bool, bool]:
    """`extends` reading the thread's opening, and `extends` given a read of its newest turns
    as the ask lock makes it (`first_limit` of them)."""
    async with await wm.open_store("sqlite:///:memory:") as store:
        await store.append(tenant_id="t", thread_id="th", messages=thread)
        limit = first_limit(request)
        tail = await store.read_tail(
            tenant_id="t", thread_id="th", tokenizer=TOKENIZER, limit=limit
        )
        read = NewestRead(tail)
        return (
            await extends(store, tenant_id="t", thread_id="th", request=request),
            await extends(store, tenant_id="t", thread_id="th", request=request, read=read),
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_found_conversation_is_checked_alike_with_the_locks_read(data: st.DataObject) -> None:
    """Under its lock a found conversation is checked from the lock's own read when that
    holds the whole thread: the same answer as reading the thread's opening."""
    thread = data.draw(threads())
    seen = [m for _, m in shown(thread)]
    request = [*seen[: data.draw(st.integers(0, len(seen)))], *data.draw(st.lists(messages))]
    read, given_read = asyncio.run(extended(thread, request or [{"role": "user", "content": "hi"}]))
    assert given_read == read


def test_one_message_saying_the_first_again_is_new_on_a_longer_thread() -> None:
    """Only a thread of one exchange is regenerated by its first question alone: a client
    that sends just its new message never rewinds a longer thread."""
    u1, a1 = {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}
    u2, a2 = {"role": "user", "content": "Lyon?"}, {"role": "assistant", "content": "yes"}
    assert asyncio.run(placed([u1, a1], [u1])) == Placement(start=1, after_seq=1, turn_count=2)
    assert asyncio.run(placed([u1, a1, u2, a2], [u1])) == Placement(start=0, turn_count=4)
