"""What LlamaIndex's messages become when stored, and what comes back: content blocks of every
kind, tool calls in each shape LlamaIndex writes them, calls that cannot be stored, calls
another client stored; the agent-memory tools as LlamaIndex offers and calls them; the buffer
as LlamaIndex saves it.

Real `FunctionAgent` runs and `FunctionCallingLLM.predict_and_call` with the offline model of
`tests.integrations.llama_index_script`, on a real SQLite file and the PostgreSQL server
(`store`).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    AudioBlock,
    CacheControl,
    CachePoint,
    ChatMessage,
    CitableBlock,
    CitationBlock,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.tools import FunctionTool
from workflows import Context
from workflows.context.serializers import JsonSerializer

import workingmem as wm
from tests.helpers import GPT4O, pdf_bytes, wav_bytes
from tests.integrations.llama_index_script import (
    SLIDING,
    WORKFLOW_WARNINGS,
    Buffers,
    ScriptedModel,
    agent_for,
    dumps,
    history,
    lookup,
    says,
)
from workingmem.integrations.llama_index import WorkingMemoryBuffer, to_native
from workingmem.tokens._chat import IMAGE_LOW_DETAIL
from workingmem.tokens._media import AUDIO_TOKENS_PER_SECOND, PDF_PAGE_TOKENS

pytestmark = WORKFLOW_WARNINGS

RHINE = "https://example.org/rhine"


async def chat_view(store: wm.Store, tenant: str, thread_id: str) -> list[wm.ChatMessage]:
    """The thread as the store keeps it for counting and for other clients: OpenAI's format."""
    turns = await store.list_turns(tenant_id=tenant, thread_id=thread_id, after_seq=0, limit=50)
    return [turn.to_message() for turn in turns]


def questions(messages: list[ChatMessage]) -> int:
    """The user messages of a request: a run's number, for ids unique in the thread."""
    return sum(message.role == MessageRole.USER for message in messages)


# -- content blocks ------------------------------------------------------------------------------


def rhine_question() -> ChatMessage:
    """A user message with a cited source (text and a document), an image and a cache point."""
    return ChatMessage(
        role=MessageRole.USER,
        blocks=[
            TextBlock(text="How long is the Rhine?"),
            CitableBlock(
                title="Rhine",
                source=RHINE,
                content=[
                    TextBlock(text="The Rhine is 1,230 km long."),
                    DocumentBlock(url=f"{RHINE}.pdf", document_mimetype="application/pdf"),
                ],
            ),
            ImageBlock(url=f"{RHINE}.png"),
            CachePoint(cache_control=CacheControl(type="ephemeral")),
        ],
    )


def rhine_model(messages: list[ChatMessage]) -> ChatMessage:
    """Thinks and looks the river up, then thinks again and answers citing the source."""
    if messages[-1].role == MessageRole.USER:
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[
                ThinkingBlock(content="The source may be dated: look it up."),
                ToolCallBlock(
                    tool_call_id=f"look-{questions(messages)}",
                    tool_name="lookup",
                    tool_kwargs={"topic": "Rhine"},
                ),
            ],
        )
    return rhine_answer()


def rhine_answer() -> ChatMessage:
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[
            ThinkingBlock(content="Both agree."),
            CitationBlock(
                cited_content=TextBlock(text="1,230 km"),
                source=RHINE,
                title="Rhine",
                additional_location_info={"start_char_index": 13},
            ),
            TextBlock(text="It is 1,230 km long."),
        ],
    )


async def test_content_blocks_are_kept_verbatim_and_counted_by_the_text_the_model_reads(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """A run whose messages carry citable sources, documents, images, cache points, thinking
    and citations is stored as it was and read back equal by the next run; the chat view
    that counts the tokens and that other clients read holds what the model reads (a
    citable source's and a citation's text, the image, a placeholder for a document by URL),
    never the thinking, a cache point or a call's arguments as text."""
    memory = buffer(store=store, tenant_id=tenant, thread_id="rhine", config=SLIDING)
    model = ScriptedModel(rhine_model)
    agent = agent_for(model, FunctionTool.from_defaults(lookup))

    answer = await agent.run(user_msg=rhine_question(), memory=memory)
    assert str(answer) == "It is 1,230 km long."

    stored = await memory.aget_all()
    assert dumps(stored) == dumps([*history(model.requests[-1]), rhine_answer()])
    assert await chat_view(store, tenant, "rhine") == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "How long is the Rhine?"},
                {"type": "text", "text": "The Rhine is 1,230 km long.\n[document]"},
                {"type": "image_url", "image_url": {"url": f"{RHINE}.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "look-1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"topic": "Rhine"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "look-1", "content": "notes on Rhine"},
        {"role": "assistant", "content": "1,230 km\nIt is 1,230 km long."},
    ]

    await agent.run(user_msg="And the Danube?", memory=memory)
    assert dumps(history(model.requests[-2])[:4]) == dumps(stored)


PNG = b"\x89PNG\r\n\x1a\n"


def test_media_bytes_are_the_chat_parts_that_count_them(tmp_path: Path) -> None:
    """An image's, a recording's and a document's bytes are the chat parts that carry them, so
    that a PDF counts its pages where it was a placeholder's few tokens; media by path (read by
    LlamaIndex at send time) stays a placeholder."""
    pdf = pdf_bytes(3, padding=20_000)
    on_disk = tmp_path / "notes.pdf"
    on_disk.write_bytes(pdf_bytes(1))
    message = ChatMessage(
        role=MessageRole.USER,
        blocks=[
            TextBlock(text="What is in these?"),
            ImageBlock(image=PNG, image_mimetype="image/png", detail="low"),
            AudioBlock(audio=wav_bytes(2.0), format="wav"),
            DocumentBlock(data=pdf, title="report.pdf", document_mimetype="application/pdf"),
            DocumentBlock(path=on_disk),
        ],
    )
    view = to_native(message).message
    b64 = base64.b64encode
    assert view["content"] == [
        {"type": "text", "text": "What is in these?"},
        {
            "type": "image_url",
            "image_url": {
                "url": f"data:image/png;base64,{b64(PNG).decode()}",
                "detail": "low",
            },
        },
        {
            "type": "input_audio",
            "input_audio": {"data": b64(wav_bytes(2.0)).decode(), "format": "wav"},
        },
        {
            "type": "file",
            "file": {
                "filename": "report.pdf",
                "file_data": f"data:application/pdf;base64,{b64(pdf).decode()}",
            },
        },
        {"type": "text", "text": "[document]"},
    ]
    tokenizer = wm.tokenizer_for(GPT4O)
    texts = sum(map(tokenizer.count_text, ["What is in these?", "[document]"]))
    media = IMAGE_LOW_DETAIL + 2 * AUDIO_TOKENS_PER_SECOND + 3 * PDF_PAGE_TOKENS
    assert tokenizer.count_message(view) == 3 + 1 + texts + media


# -- tool calls in additional_kwargs, in LlamaIndex's ToolSelection shape ------------------------


def selecting_model(messages: list[ChatMessage]) -> ChatMessage:
    """Calls `lookup` as a `ToolSelection` in ``additional_kwargs["tool_calls"]`` (where
    LlamaIndex's `MockFunctionCallingLLM` takes a response's calls from), then answers."""
    if messages[-1].role == MessageRole.USER:
        selection = ToolSelection(
            tool_id=f"sel-{questions(messages)}", tool_name="lookup", tool_kwargs={"topic": "tea"}
        )
        return ChatMessage(
            role=MessageRole.ASSISTANT, additional_kwargs={"tool_calls": [selection]}
        )
    return tea_answer()


def tea_answer() -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content="Tea is a drink.")


async def test_tool_selections_in_additional_kwargs_are_calls_with_their_results(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """An assistant message whose calls are ``tool_id``/``tool_name``/``tool_kwargs`` entries
    of ``additional_kwargs["tool_calls"]`` is stored as those calls, each answered by its
    result; the thread reads back as it was written, and the next run sends it again."""
    memory = buffer(store=store, tenant_id=tenant, thread_id="tea", config=SLIDING)
    model = ScriptedModel(selecting_model)
    agent = agent_for(model, FunctionTool.from_defaults(lookup))

    answer = await agent.run(user_msg="Tell me about tea.", memory=memory)
    assert str(answer) == "Tea is a drink."

    assert await chat_view(store, tenant, "tea") == [
        {"role": "user", "content": "Tell me about tea."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "sel-1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"topic": "tea"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "sel-1", "content": "notes on tea"},
        {"role": "assistant", "content": "Tea is a drink."},
    ]
    stored = await memory.aget_all()
    assert dumps(stored) == dumps([*history(model.requests[-1]), tea_answer()])
    assert stored[1].additional_kwargs["tool_calls"] == [
        {"tool_id": "sel-1", "tool_name": "lookup", "tool_kwargs": {"topic": "tea"}}
    ]

    await agent.run(user_msg="And coffee?", memory=memory)
    assert dumps(history(model.requests[-2])[:4]) == dumps(stored)


# -- what cannot be stored --------------------------------------------------------------------


def after_question(*messages: ChatMessage) -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole.USER, content="Tea?"), *messages]


def calls_in_kwargs(*calls: Any) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, additional_kwargs={"tool_calls": list(calls)})


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        pytest.param(
            ChatMessage(role=MessageRole.USER, content="Tea?"), "messages", id="one-message"
        ),
        pytest.param("Tea?", "messages", id="a-string"),
        pytest.param(
            after_question(
                ChatMessage(
                    role=MessageRole.ASSISTANT,
                    blocks=[ToolCallBlock(tool_call_id="c1", tool_name="")],
                )
            ),
            "messages[1].tool_calls[0].name",
            id="block-call-without-name",
        ),
        pytest.param(
            after_question(
                calls_in_kwargs({"id": "c1", "type": "function", "function": {"arguments": "{}"}})
            ),
            "messages[1].tool_calls[0].name",
            id="openai-call-without-name",
        ),
        pytest.param(
            after_question(
                calls_in_kwargs(ToolSelection(tool_id="", tool_name="lookup", tool_kwargs={}))
            ),
            "messages[1].tool_calls[0].id",
            id="selection-without-id",
        ),
        pytest.param(
            after_question(calls_in_kwargs({"name": "lookup", "input": {"topic": "tea"}})),
            "messages[1].additional_kwargs.tool_calls",
            id="call-of-unknown-shape",
        ),
        pytest.param(
            after_question(calls_in_kwargs("lookup(topic='tea')")),
            "messages[1].additional_kwargs.tool_calls",
            id="call-as-text",
        ),
    ],
)
async def test_what_cannot_be_stored_is_refused_naming_the_field(
    store: wm.Store, tenant: str, buffer: Buffers, messages: Any, field: str
) -> None:
    """Messages that are not a list, a tool call without a name or an id, a call in a shape
    the buffer does not know: a ValidationError whose field names the place, and the thread
    stays as it was (all of a batch or none of it)."""
    memory = buffer(store=store, tenant_id=tenant, thread_id="th1", config=SLIDING)
    before = [
        ChatMessage(role=MessageRole.USER, content="Kept."),
        ChatMessage(role=MessageRole.ASSISTANT, content="Yes."),
    ]
    await memory.aput_messages(before)
    with pytest.raises(wm.ValidationError) as appended:
        await memory.aput_messages(messages)
    assert appended.value.field == field
    with pytest.raises(wm.ValidationError) as replaced:
        await memory.aset(messages)
    assert replaced.value.field == field
    assert dumps(await memory.aget_all()) == dumps(before)


# -- calls another client stored ----------------------------------------------------------------


async def test_arguments_that_are_not_a_json_object_read_back_as_the_text_sent(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """A call another client stored whose arguments are not a JSON object (cut off, a list)
    reaches the model as a `ToolCallBlock` with the text as sent; written back through
    LlamaIndex, the call's arguments are stored unchanged."""
    sent = ['{"city": "Os', '["Oslo", "Bergen"]']
    thread: list[wm.ChatMessage] = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "weather", "arguments": arguments},
                }
                for i, arguments in enumerate(sent)
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "cold"},
        {"role": "tool", "tool_call_id": "c1", "content": "colder"},
    ]
    await store.append(tenant_id=tenant, thread_id="th1", messages=thread)
    memory = buffer(store=store, tenant_id=tenant, thread_id="th1", config=SLIDING)

    _, call, *_ = await memory.aget()
    assert call.blocks == [
        ToolCallBlock(tool_call_id=f"c{i}", tool_name="weather", tool_kwargs=arguments)
        for i, arguments in enumerate(sent)
    ]
    answer = ChatMessage(role=MessageRole.ASSISTANT, content="Cold.")
    await memory.aset([*await memory.aget_all(), answer])
    assert await chat_view(store, tenant, "th1") == [
        *thread,
        {"role": "assistant", "content": "Cold."},
    ]


# -- the agent-memory tools ----------------------------------------------------------------------


def calls_update(messages: list[ChatMessage]) -> ChatMessage:
    """Asks for the document to be replaced."""
    call = ToolCallBlock(
        tool_call_id="m1",
        tool_name="update_working_memory",
        tool_kwargs={"content": "The user is Ada, from Oslo."},
    )
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


async def test_agent_memory_tools_called_from_synchronous_code(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """`predict_and_call`, LlamaIndex's synchronous tool round, run in a worker thread while
    the application's loop holds the store: the update tool writes the buffer's own
    document (its tenant, thread and user), which the next `aget` shows and the get tool,
    called synchronously too, reads back."""
    memory = buffer(
        store=store,
        tenant_id=tenant,
        thread_id="th1",
        user_id="u1",
        config=SLIDING,
        agent_memory=wm.AgentMemoryConfig(),
    )
    await memory.aput(ChatMessage(role=MessageRole.USER, content="I am Ada, from Oslo."))
    llm = ScriptedModel(calls_update).llm()
    tools = {tool.metadata.name: tool for tool in memory.tools()}

    response = await asyncio.to_thread(
        llm.predict_and_call, list(tools.values()), chat_history=await memory.aget()
    )
    assert [output.is_error for output in response.sources] == [False]

    shown = await memory.aget()
    assert shown[0].role == MessageRole.SYSTEM
    assert "The user is Ada, from Oslo." in (shown[0].content or "")
    read = await asyncio.to_thread(tools["get_working_memory"].call)
    assert "The user is Ada, from Oslo." in read.content
    agent_memory = wm.AgentMemory(store=store, config=wm.AgentMemoryConfig())
    document = await agent_memory.get_working_memory(
        tenant_id=tenant, conversation_id="th1", user_id="u1"
    )
    assert document == "The user is Ada, from Oslo."


NOTES: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
    "additionalProperties": False,
}


async def test_a_tools_schema_changed_by_its_reader_is_offered_unchanged_next_time(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """The update tool's parameters, as LlamaIndex hands them to a model adapter, type
    `content` by the application's JSON Schema; an adapter that changes the dict it got (as
    one that rewrites a schema for its provider does) changes neither the next definition
    of the tool nor the application's schema."""
    schema = copy.deepcopy(NOTES)
    memory = buffer(
        store=store,
        tenant_id=tenant,
        thread_id="th1",
        config=SLIDING,
        agent_memory=wm.AgentMemoryConfig(schema=schema),
    )
    update = {tool.metadata.name: tool for tool in memory.tools()}["update_working_memory"]

    offered = update.metadata.to_openai_tool()["function"]["parameters"]
    assert offered["required"] == ["content"]
    assert offered["properties"]["content"]["properties"] == NOTES["properties"]
    first = copy.deepcopy(offered)
    offered["properties"]["content"]["properties"].clear()
    offered["properties"]["content"]["additionalProperties"] = True

    assert update.metadata.to_openai_tool()["function"]["parameters"] == first
    assert schema == NOTES


# -- the buffer as LlamaIndex saves it ----------------------------------------------------------


async def test_the_saved_buffer_is_its_ids_under_its_class_name(
    store: wm.Store, tenant: str, buffer: Buffers
) -> None:
    """LlamaIndex's saved form of the buffer (`to_json`, what a workflow context saves of its
    memory) is its ids under the class name ``WorkingMemoryBuffer``, nothing of the store
    (no database URL, no password); `from_json` given the store continues the thread."""
    memory = buffer(store=store, tenant_id=tenant, thread_id="th1", user_id="u1", config=SLIDING)
    await memory.aput(ChatMessage(role=MessageRole.USER, content="Kept."))

    saved = memory.to_json()
    assert json.loads(saved) == {
        "class_name": "WorkingMemoryBuffer",
        "tenant_id": tenant,
        "thread_id": "th1",
        "user_id": "u1",
    }
    restored = WorkingMemoryBuffer.from_json(saved, store=store, config=SLIDING)
    try:
        assert [m.content for m in await restored.aget_all()] == ["Kept."]
    finally:
        await restored.aclose()


async def test_a_saved_workflow_context_restored_where_the_database_is_configured_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A context saved with the buffer in it (JsonSerializer, as LlamaIndex saves one) and
    restored where `WORKINGMEM_DATABASE_URL` names the threads' database: the restored run's
    model reads the first run's exchange, and its own is stored in the same thread."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    monkeypatch.setenv("WORKINGMEM_DATABASE_URL", url)
    memory = WorkingMemoryBuffer(store=url, tenant_id="acme", thread_id="th1", config=SLIDING)
    model = ScriptedModel(says("ok"))
    agent = agent_for(model)
    first = Context(agent)
    try:
        await agent.run(user_msg="My order is #1234.", memory=memory, ctx=first)
        saved = json.loads(json.dumps(first.to_dict(serializer=JsonSerializer())))
        again = Context.from_dict(agent, saved, serializer=JsonSerializer())
        restored = await again.store.get("memory")
        assert isinstance(restored, WorkingMemoryBuffer)
        assert restored is not memory
        try:
            await agent.run(user_msg="Where is it?", ctx=again)
        finally:
            await restored.aclose()
        assert [m.content for m in history(model.requests[-1])] == [
            "My order is #1234.",
            "ok",
            "Where is it?",
        ]
        stored = [m.content for m in await memory.aget_all()]
        assert stored == ["My order is #1234.", "ok", "Where is it?", "ok"]
    finally:
        await memory.aclose()
