"""What Pydantic AI's messages become when stored, and what the next run reads back: retries,
prompts with media, threads other clients wrote, messages a pop or a newer version left.

Real `pydantic_ai.Agent` runs with a scripted `FunctionModel`, on a real SQLite file and the
PostgreSQL server (`store`).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic_ai import Agent, BinaryContent, ImageUrl, ModelRetry
from pydantic_ai.messages import (
    CachePoint,
    DocumentUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UploadedFile,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import workingmem as wm
from tests.helpers import GPT4O, pdf_bytes, wav_bytes
from tests.integrations.pydantic_ai_script import Script, Seen, assert_units_whole
from workingmem.integrations.pydantic_ai import FORMAT, WorkingMemoryCapability, chat_messages
from workingmem.tokens._chat import IMAGE_HIGH_DETAIL
from workingmem.tokens._media import AUDIO_TOKENS_PER_SECOND, FILE_TOKENS, PDF_PAGE_TOKENS

SLIDING = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
Capabilities = Callable[..., WorkingMemoryCapability]


async def test_retries_are_stored_as_they_were_and_the_next_run_reads_them(
    store: wm.Store, tenant: str, capabilities: Capabilities
) -> None:
    """An answer the output validator sent back and a tool call the tool sent back are kept:
    the feedback as the user turn the model was shown, the tool's retry as the result of its
    call (each call answered); the next run reads every message back equal and the model
    sees both retries again."""
    memory = capabilities(store=store, tenant_id=tenant, thread_id="retries", config=SLIDING)
    seen: list[Seen] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(Seen(list(messages), info.instructions))
        last = messages[-1].parts[-1]
        if isinstance(last, UserPromptPart) and last.content == "weather in Lyon?":
            return ModelResponse(
                parts=[ToolCallPart("weather", {"city": "Lyo"}, tool_call_id="w1")]
            )
        if isinstance(last, ToolReturnPart) and last.tool_call_id == "w1":
            return ModelResponse(
                parts=[ToolCallPart("weather", {"city": "Lyon"}, tool_call_id="w2")]
            )
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart("Sunny in Lyon.")])
        drafted = any(
            isinstance(p, TextPart) and p.content == "draft" for m in messages for p in m.parts
        )
        return ModelResponse(parts=[TextPart("Hello, Ada." if drafted else "draft")])

    agent = Agent(FunctionModel(model), capabilities=[memory])

    @agent.output_validator
    def in_full(output: str) -> str:
        if output == "draft":
            raise ModelRetry("Say it in full.")
        return output

    @agent.tool_plain
    def weather(city: str) -> str:
        if city != "Lyon":
            raise ModelRetry(f"No city called {city}.")
        return "sunny"

    greeted = await agent.run("hello")
    forecast = await agent.run("weather in Lyon?")
    assert (greeted.output, forecast.output) == ("Hello, Ada.", "Sunny in Lyon.")
    produced = greeted.new_messages() + forecast.new_messages()
    assert await memory.all_messages() == produced

    chat = [
        t.to_message() for t in await memory.memory.all_turns(tenant_id=tenant, thread_id="retries")
    ]
    assert chat == chat_messages(produced)
    assert [m["role"] for m in chat[:4]] == ["user", "assistant", "user", "assistant"]
    assert "Say it in full." in str(chat[2]["content"])
    assert chat[6] == {"role": "tool", "tool_call_id": "w1", "content": chat[6]["content"]}
    assert "No city called Lyo." in str(chat[6]["content"])
    assert_units_whole(chat)

    await agent.run("thanks")
    again = seen[-1]
    assert any("Say it in full." in prompt for prompt in again.prompts)
    retried = [
        p
        for m in again.messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_call_id == "w1"
    ]
    assert [(p.outcome, p.content) for p in retried] == [("retried", "No city called Lyo.")]
    assert_units_whole(again.chat)


async def test_a_prompt_with_an_image_and_a_file_is_read_back_whole(
    store: wm.Store, tenant: str, capabilities: Capabilities
) -> None:
    """A prompt of text, an image URL and a file's bytes is stored whole (the next run gets
    the same parts, bytes and all); its chat view, which other clients read and the window
    counts, has the text, the image and the file as a chat file part (a PDF counted by its
    pages, not as a placeholder's few tokens)."""
    memory = capabilities(store=store, tenant_id=tenant, thread_id="media", config=SLIDING)
    script = Script(answer="A cat on an invoice.")
    agent = script.agent(memory)
    pdf = BinaryContent(data=pdf_bytes(1), media_type="application/pdf")
    prompt: list[UserContent] = [
        "What are these?",
        ImageUrl(url="https://example.com/cat.png"),
        pdf,
    ]
    first = await agent.run(prompt)
    await agent.run("And the total?")

    (sent,) = [p for p in first.new_messages()[0].parts if isinstance(p, UserPromptPart)]
    assert sent.content == prompt
    read_back = script.seen[-1].messages[0].parts[0]
    assert isinstance(read_back, UserPromptPart)
    assert read_back.content == prompt

    turns = await memory.memory.all_turns(tenant_id=tenant, thread_id="media")
    assert turns[0].content == [
        {"type": "text", "text": "What are these?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "file", "file": {"filename": pdf.identifier, "file_data": pdf.data_uri}},
    ]
    tokenizer = wm.tokenizer_for(GPT4O)
    words_and_image = {"role": "user", "content": turns[0].content[:2]}
    counted = tokenizer.count_message(turns[0].to_message())
    assert counted == tokenizer.count_message(words_and_image) + PDF_PAGE_TOKENS


def test_every_kind_of_prompt_content_has_the_chat_part_that_counts_it() -> None:
    """Bytes become the chat part that carries them (an image, a WAV or MP3 recording, any
    other file), a provider's uploaded file its id, content by URL a line naming it; a cache
    point is no content."""
    png = BinaryContent(data=b"\x89PNG\r\n", media_type="image/png")
    wav = BinaryContent(data=wav_bytes(1.0), media_type="audio/wav")
    ogg = BinaryContent(data=b"OggS", media_type="audio/ogg")
    notes = BinaryContent(data=b"Budget: 4,000 euros.", media_type="text/plain")
    uploaded = UploadedFile(file_id="file-abc", provider_name="openai")
    report = DocumentUrl(url="https://example.com/report.pdf")
    prompt: list[UserContent] = [png, wav, ogg, notes, uploaded, report, CachePoint()]
    (view,) = chat_messages([ModelRequest(parts=[UserPromptPart(content=prompt)])])
    assert view["content"] == [
        {"type": "image_url", "image_url": {"url": png.data_uri}},
        {"type": "input_audio", "input_audio": {"data": wav.base64, "format": "wav"}},
        {"type": "file", "file": {"filename": ogg.identifier, "file_data": ogg.data_uri}},
        {"type": "file", "file": {"filename": notes.identifier, "file_data": notes.data_uri}},
        {"type": "file", "file": {"file_id": "file-abc"}},
        {"type": "text", "text": "[document: https://example.com/report.pdf]"},
    ]
    tokenizer = wm.tokenizer_for(GPT4O)
    texts = "Budget: 4,000 euros.", "[document: https://example.com/report.pdf]"
    media = IMAGE_HIGH_DETAIL + AUDIO_TOKENS_PER_SECOND + 2 * FILE_TOKENS
    assert tokenizer.count_message(view) == 3 + 1 + media + sum(map(tokenizer.count_text, texts))


async def test_parallel_tool_results_another_client_stored_reach_the_model_as_one_request(
    store: wm.Store, tenant: str, capabilities: Capabilities
) -> None:
    """Chat turns of another client (a question in text parts, one assistant turn calling two
    tools, a tool turn for each) are the messages Pydantic AI would have made, for the model
    and from `all_messages`: the question's text, both calls, both results in one request
    under their tools' names."""
    memory = capabilities(store=store, tenant_id=tenant, thread_id="parallel", config=SLIDING)
    calls = [
        {"id": f"c-{city}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for city, name in (("paris", "clock_paris"), ("rome", "clock_rome"))
    ]
    await memory.memory.append(
        tenant_id=tenant,
        thread_id="parallel",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "The time in Paris "},
                    {"type": "text", "text": "and in Rome?"},
                ],
            },
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c-paris", "content": "noon"},
            {"role": "tool", "tool_call_id": "c-rome", "content": "noon too"},
            {"role": "assistant", "content": "Noon in both."},
        ],
    )
    script = Script()
    await script.agent(memory).run("thanks")
    (seen,) = script.seen
    assert seen.prompts == ["The time in Paris and in Rome?", "thanks"]
    called = seen.messages[1]
    assert isinstance(called, ModelResponse)
    assert [(c.tool_name, c.tool_call_id) for c in called.tool_calls] == [
        ("clock_paris", "c-paris"),
        ("clock_rome", "c-rome"),
    ]
    results = seen.messages[2]
    assert isinstance(results, ModelRequest)
    returns = [p for p in results.parts if isinstance(p, ToolReturnPart)]
    assert returns == results.parts
    assert [(p.tool_name, p.content, p.tool_call_id) for p in returns] == [
        ("clock_paris", "noon", "c-paris"),
        ("clock_rome", "noon too", "c-rome"),
    ]
    assert seen.messages[3].parts == [TextPart("Noon in both.")]
    assert_units_whole(seen.chat)
    stored = await memory.all_messages()
    assert stored[2].parts == results.parts, "the thread's messages have them as one request"


async def test_a_thread_that_opens_with_the_assistant_gets_the_system_prompt_first(
    store: wm.Store, tenant: str, capabilities: Capabilities
) -> None:
    """A thread another client opened with the assistant's greeting: the window opens on the
    user's first turn (R3), and the agent's system prompt comes first, once, in its request."""
    memory = capabilities(store=store, tenant_id=tenant, thread_id="greeted", config=SLIDING)
    await memory.memory.append(
        tenant_id=tenant,
        thread_id="greeted",
        messages=[
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "A table for two."},
            {"role": "assistant", "content": "For when?"},
        ],
    )
    script = Script()
    await script.agent(memory, system_prompt="You are terse.").run("Tonight.")
    (seen,) = script.seen
    system, question = seen.messages[0].parts
    assert isinstance(system, SystemPromptPart)
    assert isinstance(question, UserPromptPart)
    assert (system.content, question.content) == ("You are terse.", "A table for two.")
    assert seen.messages[1].parts == [TextPart("For when?")]
    assert seen.prompts == ["A table for two.", "Tonight."]
    assert sum(isinstance(p, SystemPromptPart) for m in seen.messages for p in m.parts) == 1


async def test_a_stored_message_this_version_cannot_read_is_read_as_its_chat_turn(
    store: wm.Store, tenant: str, capabilities: Capabilities
) -> None:
    """A message stored in Pydantic AI's format that the installed version cannot load (a
    part kind from a newer one) is not an error: the run reads its chat view instead."""
    memory = capabilities(store=store, tenant_id=tenant, thread_id="newer", config=SLIDING)
    future = {"kind": "request", "parts": [{"part_kind": "hologram", "content": "a cat"}]}
    await memory.memory.append(
        tenant_id=tenant,
        thread_id="newer",
        messages=[
            wm.NativeItem(
                format=FORMAT, item=future, message={"role": "user", "content": "A cat?"}
            ),
            {"role": "assistant", "content": "A cat."},
        ],
    )
    script = Script()
    await script.agent(memory).run("What else?")
    (seen,) = script.seen
    assert seen.prompts == ["A cat?", "What else?"]
    turns = await memory.memory.all_turns(tenant_id=tenant, thread_id="newer")
    assert turns[0].item == future, "the stored item is kept as it was"
