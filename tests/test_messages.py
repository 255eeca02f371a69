"""Input validation: every malformed message is a ValidationError naming the field."""

from __future__ import annotations

import re
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import workingmem as wm
from workingmem.formats.anthropic import turns_of as anthropic_turns_of
from workingmem.messages import (
    ID_PATTERN,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_ID_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_PARTS,
    check_id,
    depth,
    normalize_messages,
    normalize_turns,
)


@pytest.mark.parametrize(
    ("message", "field", "reason"),
    [
        pytest.param(
            {"role": "system", "content": "x"},
            "messages[0].role",
            "user, assistant or tool",
            id="unknown-role",
        ),
        pytest.param({"content": "x"}, "messages[0].role", "got None", id="missing-role"),
        pytest.param(
            {"role": "user"}, "messages[0].content", "needs content", id="user-without-content"
        ),
        pytest.param(
            {"role": "user", "content": 3},
            "messages[0].content",
            "string or a list",
            id="content-number",
        ),
        pytest.param(
            {"role": "user", "content": []},
            "messages[0].content",
            "empty list",
            id="content-empty-parts",
        ),
        pytest.param(
            {"role": "user", "content": [{"type": "text", "text": 5}]},
            "messages[0].content[0].text",
            "string text",
            id="non-string-text-part",
        ),
        pytest.param(
            {"role": "user", "content": ["hi"]},
            "messages[0].content[0]",
            "part dict",
            id="part-not-a-dict",
        ),
        pytest.param(
            {"role": "user", "content": [{"text": "x"}]},
            "messages[0].content[0].type",
            "non-empty",
            id="part-without-type",
        ),
        pytest.param(
            {"role": "assistant", "content": None},
            "messages[0].content",
            "content or tool_calls",
            id="empty-assistant",
        ),
        pytest.param(
            {"role": "assistant", "content": None, "tool_calls": "x"},
            "messages[0].tool_calls",
            "must be a list",
            id="tool-calls-not-list",
        ),
        pytest.param(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "", "function": {"name": "f", "arguments": "{}"}}],
            },
            "messages[0].tool_calls[0].id",
            "empty",
            id="empty-call-id",
        ),
        pytest.param(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"name": "", "arguments": "{}"}}],
            },
            "messages[0].tool_calls[0].function.name",
            "non-empty",
            id="empty-function-name",
        ),
        pytest.param(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"x": 1}}}],
            },
            "messages[0].tool_calls[0].function.arguments",
            "must be a string",
            id="arguments-not-string",
        ),
        pytest.param(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "web", "function": {"name": "f"}}],
            },
            "messages[0].tool_calls[0].type",
            "function",
            id="call-type-not-function",
        ),
        pytest.param(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "function": {"name": "f", "arguments": ""}},
                    {"id": "c", "function": {"name": "g", "arguments": ""}},
                ],
            },
            "messages[0].tool_calls[1].id",
            "used twice",
            id="duplicate-call-id",
        ),
        pytest.param(
            {"role": "tool", "content": "r"},
            "messages[0].tool_call_id",
            "must be a string",
            id="tool-without-call-id",
        ),
        pytest.param(
            {"role": "tool", "content": "r", "tool_call_id": "x" * 300},
            "messages[0].tool_call_id",
            "limit is 256",
            id="long-call-id",
        ),
        pytest.param(
            {
                "role": "tool",
                "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}],
                "tool_call_id": "c",
            },
            "messages[0].content[0].type",
            "file, image_url, text",
            id="tool-audio",
        ),
        pytest.param(
            {"role": "user", "content": "x", "audio": {"id": "a"}},
            "messages[0].audio",
            "not a field",
            id="unknown-key-with-value",
        ),
        pytest.param(
            {"role": "user", "content": "x" * (MAX_MESSAGE_BYTES + 1)},
            "messages[0]",
            f"limit is {MAX_MESSAGE_BYTES}",
            id="over-size-limit",
        ),
        pytest.param(
            {"role": "user", "content": "bad \ud800 surrogate"},
            "messages[0]",
            "not valid Unicode",
            id="lone-surrogate",
        ),
        pytest.param("hello", "messages[0]", "message dict", id="message-not-a-dict"),
    ],
)
def test_malformed_messages_name_the_field(message: Any, field: str, reason: str) -> None:
    with pytest.raises(wm.ValidationError) as caught:
        normalize_messages([message])
    assert caught.value.field == field
    assert reason in caught.value.reason


SURROGATE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA\ud800"}}
"""An image whose data is not valid Unicode."""


def with_files(text: str, file_bytes: int, tail: str = "") -> dict[str, Any]:
    """A user message with `text` and an image of `file_bytes` of base64 (its data URL's),
    its data ending with `tail`."""
    url = "data:image/png;base64,"
    data = "A" * (file_bytes - len(url) - len(tail)) + tail
    image = {"type": "image_url", "image_url": {"url": url + data}}
    return {"role": "user", "content": [{"type": "text", "text": text}, image]}


@pytest.mark.parametrize(
    ("message", "fits"),
    [
        pytest.param({"role": "user", "content": "\u00e9" * 500_000}, True, id="2-byte-chars-fit"),
        pytest.param(
            {"role": "user", "content": "\u00e9" * 530_000}, False, id="2-byte-chars-over"
        ),
        pytest.param({"role": "user", "content": "\x01" * 170_000}, True, id="escapes-fit"),
        pytest.param({"role": "user", "content": "\x01" * 180_000}, False, id="escapes-over"),
        pytest.param(
            {"role": "tool", "content": "x" * 1000 + "\ud800", "tool_call_id": "c"},
            False,
            id="surrogate-in-tool-result",
        ),
        pytest.param(with_files("x" * 1_000, 5 * 2**20), True, id="5-mib-photo-fits"),
        pytest.param(with_files("x" * 1_000, MAX_FILE_BYTES + 1), False, id="files-over"),
        pytest.param(
            with_files("x" * (MAX_MESSAGE_BYTES + 1), 2**20), False, id="text-over-beside-files"
        ),
        pytest.param(
            with_files("x" * (MAX_MESSAGE_BYTES - 100), 2**20), True, id="text-at-beside-files"
        ),
        pytest.param(  # a payload's escapes are JSON the message takes besides the base64
            with_files("x" * (MAX_MESSAGE_BYTES - 100), 2**20, '"' * 200),
            False,
            id="escapes-in-a-file-over",
        ),
        pytest.param(with_files("\x01" * 180_000, 2**20), False, id="escapes-over-beside-files"),
        pytest.param(
            with_files("x", 1_000) | {"content": [*with_files("x", 1_000)["content"], SURROGATE]},
            False,
            id="surrogate-in-a-file",
        ),
    ],
)
def test_size_limit_counts_serialized_bytes(message: dict[str, Any], fits: bool) -> None:
    """The limit is on the message's JSON in UTF-8: multi-byte characters and escapes count
    for what they take, however the check gets there; the base64 of its inline files has a
    limit of its own (a photo, a screenshot), and the rest keeps the message's."""
    if fits:
        assert normalize_messages([message]) == [message]
    else:
        with pytest.raises(wm.ValidationError) as caught:
            normalize_messages([message])
        assert caught.value.field == "messages[0]"


def test_sdk_dumps_with_null_extras_are_accepted() -> None:
    """An assistant message dumped from the OpenAI SDK carries empty extras: they are dropped."""
    dumped: dict[str, object] = {
        "role": "assistant",
        "content": "hi",
        "refusal": None,
        "annotations": [],
        "audio": None,
        "function_call": None,
        "tool_calls": None,
    }
    assert normalize_messages([dumped]) == [{"role": "assistant", "content": "hi"}]


def test_tool_call_type_defaults_to_function() -> None:
    (clean,) = normalize_messages(
        [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}]
    )
    assert clean["tool_calls"] == [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}
    ]
    assert clean["content"] is None


def test_too_many_messages_in_one_append() -> None:
    with pytest.raises(wm.ValidationError, match="at most 1000"):
        normalize_messages([{"role": "user", "content": "x"}] * 1001)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("victim ", "start or end with whitespace"),
        (" victim", "start or end with whitespace"),
        ("x/../../threads/victim", "'.' or '..'"),
        ("..", "'.' or '..'"),
        ("a/./b", "'.' or '..'"),
        ("tab\there", "control, format"),
        ("evil\u202etxt.exe", "control, format"),  # a bidi override: the page would reorder it
        ("zero\u200bwidth", "control, format"),
    ],
)
def test_an_id_that_a_url_or_a_header_would_change_is_refused(value: str, words: str) -> None:
    """Ids are checked once, the same way on every path: a header strips surrounding spaces
    and a browser resolves dot segments, so either would aim a request at another thread."""
    with pytest.raises(wm.ValidationError) as caught:
        check_id("thread_id", value)
    assert words in caught.value.reason


@pytest.mark.parametrize("value", ["trip/lyon", "a.b", "...", "x/.hidden", "Grüße 👋", "a b"])
def test_ids_with_slashes_dots_and_unicode_inside_are_fine(value: str) -> None:
    assert check_id("thread_id", value) == value


_PUBLISHED = jsonschema_rs.validator_for(
    {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": ID_PATTERN}
)
_EDGES = st.sampled_from([" ", ".", "/", "a", "é", "\t", "\u00a0", "\u200b", "\u202e", "\ue000"])
"""The characters the rule is about, drawn often: a wide alphabet rarely puts a space first."""


@given(
    st.one_of(
        st.text(_EDGES, max_size=8),
        st.from_regex(ID_PATTERN, fullmatch=True),
        st.text(max_size=MAX_ID_CHARS + 4),
    )
)
@settings(max_examples=600, deadline=None)
def test_the_published_id_pattern_is_exactly_the_id_rule(value: str) -> None:
    """The OpenAPI document states `ID_PATTERN` with 1 to MAX_ID_CHARS characters: a value
    matches it if and only if `check_id` takes it, so no client is surprised either way."""
    published = 1 <= len(value) <= MAX_ID_CHARS and re.fullmatch(ID_PATTERN, value) is not None
    assert _PUBLISHED.is_valid(value) == published  # a JSON Schema validator reads it the same
    try:
        check_id("thread_id", value)
    except wm.ValidationError:
        assert not published, f"published, but refused: {value!r}"
    else:
        assert published, f"taken, but not published: {value!r}"


def _nested(levels: int) -> dict[str, object]:
    value: dict[str, object] = {"k": 1}
    for _ in range(levels):
        value = {"k": value}
    return value


def test_a_part_nested_too_deep_or_too_many_parts_is_refused() -> None:
    deep = {"role": "user", "content": [{"type": "input_audio", "input_audio": _nested(300)}]}
    with pytest.raises(wm.ValidationError) as caught:
        normalize_messages([deep])
    assert caught.value.field == "messages[0].content[0]"
    many = {"role": "user", "content": [{"type": "text", "text": "x"}] * (MAX_PARTS + 1)}
    with pytest.raises(wm.ValidationError, match="parts"):
        normalize_messages([many])
    audio = {"data": "UklGRg==", "format": "wav", "extra": _nested(8)}
    fine = {"role": "user", "content": [{"type": "input_audio", "input_audio": audio}]}
    assert normalize_messages([fine])[0]["content"][0]["input_audio"] == audio


@pytest.mark.parametrize(
    ("part", "field", "reason"),
    [
        ({"type": "file"}, "file", "file_data or file_id"),
        ({"type": "file", "file": {"filename": "a.pdf"}}, "file", "needs file_data"),
        ({"type": "file", "file": {"file_data": ""}}, "file", "needs file_data"),
        ({"type": "file", "file": {"file_id": 7}}, "file.file_id", "a string"),
        ({"type": "input_audio", "input_audio": {"format": "wav"}}, "input_audio.data", "base64"),
        ({"type": "input_audio", "input_audio": "UklGRg=="}, "input_audio.data", "base64"),
    ],
)
def test_a_file_or_audio_part_without_its_content_is_refused(
    part: dict[str, Any], field: str, reason: str
) -> None:
    """Stored, a file without its data or id would go upstream with every later request and
    be refused there each time."""
    with pytest.raises(wm.ValidationError, match=reason) as caught:
        normalize_messages([{"role": "user", "content": [part]}])
    assert caught.value.field == f"messages[0].content[0].{field}"


def test_a_file_by_data_or_by_id_is_kept_as_sent() -> None:
    parts = [
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JVBERg==", "filename": "a.pdf"},
        },
        {"type": "file", "file": {"file_id": "file-abc"}},
    ]
    assert normalize_messages([{"role": "user", "content": parts}])[0]["content"] == parts


@pytest.mark.parametrize(
    ("role", "kind"),
    [("user", "hologram"), ("assistant", "image_url"), ("user", "input_text")],
)
def test_a_content_part_type_the_chat_format_lacks_is_refused(role: str, kind: str) -> None:
    message = {"role": role, "content": [{"type": kind, "text": "x"}]}
    with pytest.raises(wm.ValidationError) as caught:
        normalize_messages([message])
    assert caught.value.field == "messages[0].content[0].type"


def test_an_assistant_messages_refusal_field_is_kept_as_a_refusal_part_after_its_content() -> None:
    """OpenAI's ``refusal`` field (an SDK message dumped, a history resent) is where the
    library keeps refusals; anything but a text there is refused with its place."""
    said = normalize_messages(
        [
            {"role": "assistant", "content": "Partly:", "refusal": "not that."},
            {"role": "assistant", "content": None, "refusal": "No."},
        ]
    )
    assert said[0]["content"] == [
        {"type": "text", "text": "Partly:"},
        {"type": "refusal", "refusal": "not that."},
    ]
    assert said[1]["content"] == [{"type": "refusal", "refusal": "No."}]
    with pytest.raises(wm.ValidationError) as bad:
        normalize_messages([{"role": "assistant", "content": "x", "refusal": ["no"]}])
    assert bad.value.field == "messages[0].refusal"


def claude_photo(data: str, text: str = "Look.", *more: Any) -> wm.NativeItem:
    """A Claude user message of an image of base64 `data` (and `more` blocks), with its chat
    view."""
    (turn,) = anthropic_turns_of(
        [
            {
                "role": "user",
                "content": [
                    *more,
                    {"type": "text", "text": text},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": data},
                    },
                ],
            }
        ]
    )
    return turn


def found(text: str) -> dict[str, Any]:
    """A search result block (Claude's), whose text no chat view carries."""
    content = [{"type": "text", "text": text}]
    return {"type": "search_result", "source": "s", "title": "t", "content": content}


@pytest.mark.parametrize("texts", [True, False], ids=["stored", "checked"])
@pytest.mark.parametrize(
    ("item", "fits"),
    [
        pytest.param(claude_photo("A" * 5 * 2**20), True, id="5-mib-photo"),
        pytest.param(claude_photo("A" * (MAX_FILE_BYTES + 1)), False, id="files-over"),
        pytest.param(
            claude_photo("A" * 2**20, text="\x01" * 180_000), False, id="escapes-over-beside"
        ),
        pytest.param(
            claude_photo("A" * MAX_FILE_BYTES, text="\u00e9" * 530_000), False, id="bytes-over"
        ),
        pytest.param(claude_photo("A" * 2**20 + "\ud800"), False, id="surrogate-in-the-file"),
        pytest.param(  # a block the view leaves out (its text is not the window's)
            claude_photo("A" * 2**20, "Look.", found("x" * (MAX_FILE_BYTES + 2**20))),
            False,
            id="unviewed-over",
        ),
        pytest.param(
            claude_photo("A" * 2**20, "Look.", found("\x01" * 4_000_000)),
            False,
            id="unviewed-escapes-over",
        ),
        pytest.param(
            claude_photo("A" * 2**20, "Look.", found("x" * 2**20)), True, id="unviewed-fits"
        ),
    ],
)
def test_a_native_item_is_measured_as_its_json_whether_or_not_its_text_is_kept(
    item: wm.NativeItem, fits: bool, texts: bool
) -> None:
    """An original's limit (`MAX_MESSAGE_BYTES` and `MAX_FILE_BYTES` together) is on its JSON
    in UTF-8, escapes and multi-byte characters included, whether the check keeps the text (a
    store's append) or measures it (a request checked before it is stored)."""
    if fits:
        _, (origin,) = normalize_turns([item], texts=texts)
        assert (origin.text is not None) is texts
    else:
        with pytest.raises(wm.ValidationError):
            normalize_turns([item], texts=texts)


def _mixed(levels: int) -> Any:
    """A dict nesting `levels` dicts and lists, alternately, with a scalar beside each."""
    value: Any = "leaf"
    for level in range(levels):
        value = {"n": value, "k": level} if level % 2 else [value, "x"]
    return value


@pytest.mark.parametrize(
    ("value", "levels"),
    [("text", 0), (3, 0), ({}, 1), ([], 1), ([[], {"a": [1]}], 3), (_mixed(7), 7)],
)
def test_depth_counts_the_containers_nested(value: Any, levels: int) -> None:
    assert depth(value) == levels


def test_depth_stops_counting_at_its_limit() -> None:
    assert depth(_mixed(40), limit=19) == 19
    assert depth(_mixed(40), limit=100) == 40


@pytest.mark.parametrize("levels", [MAX_DEPTH, MAX_DEPTH + 1])
def test_a_native_item_nests_at_most_max_depth_levels(levels: int) -> None:
    """The item as given nests `levels` under its own dict."""
    turn = wm.NativeItem("x.y", {"deep": _mixed(levels - 1)}, {"role": "user", "content": "q"})
    if levels <= MAX_DEPTH:
        normalize_turns([turn])
        return
    with pytest.raises(wm.ValidationError) as raised:
        normalize_turns([turn])
    assert (raised.value.field, raised.value.reason) == (
        "messages[0].item",
        f"nests deeper than {MAX_DEPTH} levels",
    )


@pytest.mark.parametrize("levels", [MAX_DEPTH, MAX_DEPTH + 1])
def test_a_part_nests_at_most_max_depth_levels(levels: int) -> None:
    part = {"type": "text", "text": "q", "extra": _mixed(levels - 1)}
    message = {"role": "user", "content": [part]}
    if levels <= MAX_DEPTH:
        normalize_messages([message])
        return
    with pytest.raises(wm.ValidationError) as raised:
        normalize_messages([message])
    assert raised.value.field == "messages[0].content[0]"
