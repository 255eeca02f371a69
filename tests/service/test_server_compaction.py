"""Server-side compaction (``context_management`` on ``responses.create``), with the `openai`
SDK over HTTP: once what a client resends passes its threshold, the response ends with the
gateway's compaction item, and the client that sends it in place of everything before it (as
OpenAI's guide says) or keeps its whole history with the item in it stays in one thread,
every turn stored once and no compaction stored as a turn."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from workingmem.llm.testing import Reply, ScriptedUpstream, StatusError

from .test_responses_api import thread_of, turns
from .test_responses_compact import any_api, client, notes_of

__all__ = ["client"]  # the fixture (the cheap model summarizes), used by name

QUESTIONS = [
    "Please remember that my budget is 4,000 euros.",
    "I travel to Lyon in May with my sister.",
    "We like museums, markets and long walks by the river.",
    "Which neighbourhood should we stay in?",
    "And how do we get there from the airport?",
    "What should we book first?",
]
COMPACTION: Any = [{"type": "compaction", "compact_threshold": 120}]


def items(response: Any) -> list[dict[str, Any]]:
    """A response's output as the next request's input items."""
    return [item.model_dump(exclude_none=True) for item in response.output]


def compactions(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "compaction"]


def texts(api: httpx.Client, thread: str) -> list[str]:
    return [str(turn["content"]) for turn in turns(api, thread)]


def test_a_client_that_sends_the_compaction_in_place_of_its_history_stays_in_its_thread(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """The guide's stateless loop: append the output, drop what comes before the newest
    compaction item. The item comes once the input passes the threshold, last in the output
    (it stands for the answer too), and the pruned history goes on in the same thread."""
    history: list[dict[str, Any]] = []
    threads, compacted_at = set(), []
    for number, question in enumerate(QUESTIONS, start=1):
        history.append({"role": "user", "content": question})
        response, thread = thread_of(client, input=history, context_management=COMPACTION)
        threads.add(thread)
        assert response.output[0].type == "message"
        assert response.output_text == "Noted."
        if compactions(response):
            compacted_at.append(number)
            item = response.output[-1]
            assert item.type == "compaction"
            assert item.id.startswith("cmp_")
            notes = notes_of(item)
            assert (notes["thread"], notes["through"]) == (thread, 2 * number)
        history += items(response)
        cut = [i for i, item in enumerate(history) if item.get("type") == "compaction"]
        history = history[cut[-1] :] if cut else history
    assert len(threads) == 1
    assert compacted_at
    assert compacted_at[0] > 1  # not before the input grew past 120 tokens
    assert len(compacted_at) < len(QUESTIONS)  # the pruned input starts small again
    (thread,) = threads
    assert texts(api, thread) == [
        text for question in QUESTIONS for text in (question, "Noted.")
    ]  # every turn once, in order; no compaction among them
    stored = client.responses.retrieve(response.id)
    assert [item.type for item in stored.output] == [item.type for item in response.output]


def test_a_client_that_keeps_its_whole_history_with_the_item_stays_in_its_thread(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    """A client that resends everything, the compaction item where the answer put it (as
    LangChain and the Agents SDK's sessions do): the item is left out, each turn stored
    once, and the next compaction waits until what follows the item passes the threshold."""
    history: list[dict[str, Any]] = []
    threads, compacted_at = set(), []
    sooner: Any = [{"type": "compaction", "compact_threshold": 80}]
    for number, question in enumerate(QUESTIONS, start=1):
        history.append({"role": "user", "content": question})
        response, thread = thread_of(client, input=history, context_management=sooner)
        threads.add(thread)
        if compactions(response):
            compacted_at.append(number)
        history += items(response)
    assert len(threads) == 1
    assert compacted_at
    assert compacted_at[0] < len(QUESTIONS) - 1  # resent with the item in it, and again
    assert texts(api, threads.pop()) == [
        text for question in QUESTIONS for text in (question, "Noted.")
    ]


def test_a_pruned_history_retried_after_a_failed_answer_stays_in_its_thread(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """The question after the item is stored, its answer fails (502); sent again as it was,
    the thread has gone on past the item by that question: the request is its retry, answered
    in the thread, the question stored once."""
    history: Any = [{"role": "user", "content": " ".join(QUESTIONS * 2)}]
    response, thread = thread_of(client, input=history, context_management=COMPACTION)
    (item,) = compactions(response)
    pruned = [item.model_dump(exclude_none=True), {"role": "user", "content": "And now?"}]
    failed = [True]

    def fails_once(request: dict[str, Any]) -> Reply | StatusError:
        if request.get("model") != "cheap-model" and failed:
            failed.clear()
            return StatusError(500)
        return any_api(request)

    upstream.responder = fails_once
    with pytest.raises(openai.APIStatusError):
        client.responses.create(model="answer-model", input=pruned, context_management=COMPACTION)
    again, same_thread = thread_of(client, input=pruned, context_management=COMPACTION)
    assert same_thread == thread
    assert again.output_text == "Noted."
    assert texts(api, thread) == [" ".join(QUESTIONS * 2), "Noted.", "And now?", "Noted."]


def test_a_pruned_history_that_parts_from_its_thread_forks_it(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    """R27: the thread went on past the item (another question and its answer); a pruned
    history that follows the item with a question of its own is no retry: it starts a thread
    of its own from the item's point, and the thread that went on stays whole."""
    history: Any = [{"role": "user", "content": " ".join(QUESTIONS * 2)}]
    response, thread = thread_of(client, input=history, context_management=COMPACTION)
    (item,) = compactions(response)
    pruned = [item.model_dump(exclude_none=True)]
    _, same_thread = thread_of(client, input=[*pruned, {"role": "user", "content": "First?"}])
    assert same_thread == thread
    went_on = texts(api, thread)
    _, forked = thread_of(client, input=[*pruned, {"role": "user", "content": "Other?"}])
    assert forked != thread
    assert texts(api, thread) == went_on  # untouched
    assert texts(api, forked) == [" ".join(QUESTIONS * 2), "Noted.", "Other?", "Noted."]


def test_the_stream_ends_with_the_compaction_item(client: openai.OpenAI, api: httpx.Client) -> None:
    history: list[Any] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(QUESTIONS * 2 + QUESTIONS[:1])
    ]
    with client.responses.stream(
        model="answer-model", input=history, context_management=COMPACTION
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.item.type for e in added] == ["message", "compaction"]
    done = [e for e in events if e.type == "response.output_item.done"]
    assert done[-1].item.type == "compaction"
    assert done[-1].output_index == 1
    assert [item.type for item in final.output] == ["message", "compaction"]
    assert notes_of(final.output[-1])["through"] == len(history) + 1


def test_a_chain_of_responses_resends_nothing_and_is_never_compacted(
    client: openai.OpenAI,
) -> None:
    """With ``previous_response_id`` the client sends its new message alone: the memory keeps
    what the model reads, and there is nothing for the client to leave out."""
    previous = None
    for question in QUESTIONS:
        response = client.responses.create(
            model="answer-model",
            input=question,
            previous_response_id=previous,
            context_management=COMPACTION,
        )
        assert not compactions(response)
        previous = response.id


def test_without_a_threshold_the_item_comes_past_most_of_the_models_window(
    client: openai.OpenAI,
) -> None:
    """``compact_threshold`` left out: 80% of the answering model's window (8,000 tokens
    here), so a history of about 3,000 tokens gets none and one of about 7,000 one."""
    words = " ".join(["museum"] * 295)  # about 300 tokens a message
    history: list[Any] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {words}"}
        for i in range(9)
    ]
    short = client.responses.create(
        model="answer-model", input=history, context_management=[{"type": "compaction"}]
    )
    assert not compactions(short)
    history += [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {words}"}
        for i in range(9, 23)
    ]
    long = client.responses.create(
        model="answer-model", input=history, context_management=[{"type": "compaction"}]
    )
    assert len(compactions(long)) == 1


def test_a_cheap_model_that_fails_leaves_the_answer_without_the_item(
    client: openai.OpenAI,
    upstream: ScriptedUpstream,
    api: httpx.Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def failing_helper(request: dict[str, Any]) -> Reply:
        if request.get("model") == "cheap-model":
            return Reply("not a summary")
        return Reply("Noted.")

    upstream.responder = failing_helper
    long = " ".join(QUESTIONS * 2)  # past the threshold alone
    history = [{"role": "user", "content": long}]
    response, thread = thread_of(client, input=history, context_management=COMPACTION)
    assert response.status == "completed"
    assert response.output_text == "Noted."
    assert not compactions(response)
    assert f"server-side compaction of thread {thread} failed" in caplog.text
    assert texts(api, thread) == [long, "Noted."]
    upstream.responder = any_api  # the next request past the threshold asks again
    history += [*items(response), {"role": "user", "content": "And now?"}]
    again, same_thread = thread_of(client, input=history, context_management=COMPACTION)
    assert len(compactions(again)) == 1
    assert same_thread == thread


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ([{"type": "truncation"}], "compaction"),
        ([{"type": "compaction", "compact_threshold": 0}], "greater than or equal to 1"),
        ([{"type": "compaction", "compact_threshold": "100"}], "integer"),
        ([{"type": "compaction", "compact_threshold": 100.5}], "integer"),
        ([{"type": "compaction", "threshold": 100}], "threshold"),
    ],
)
def test_a_context_management_entry_the_gateway_cannot_serve_is_refused(
    entries: list[dict[str, Any]], reason: str, api: httpx.Client
) -> None:
    sent = api.post(
        "/v1/responses",
        json={"model": "answer-model", "input": "Hi", "context_management": entries},
    )
    assert sent.status_code in (400, 422), sent.text
    assert reason in sent.text
    assert api.get("/v1/threads").json()["data"] == []  # nothing stored
