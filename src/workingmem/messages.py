"""Messages in, turns out: validation, the canonical form, and the units of tool calls.

    clean = normalize_messages([{"role": "user", "content": "hi"}])
    planned = plan_units(previous=None, messages=clean, first_seq=1)

Every message a thread stores passes through here first, so a store never sees a malformed
one. A *unit* is a user turn, or an assistant turn with all the tool turns that answer its
calls; windows are cut between units, which is what keeps them provider-valid.

Limits (documented, each checked with the field and the limit in the error):

- ids (tenant, thread, user, tool call): 1 to 256 printable characters, none of them whitespace at
  either end, and no ``.`` or ``..`` between slashes (a URL would resolve it to another path);
- one message: at most 1 MiB once serialized as JSON (UTF-8) besides the base64 of the files
  it carries inline, those at most 20 MiB (`MAX_FILE_BYTES`), `MAX_PARTS` content parts, and
  no value nested deeper than `MAX_DEPTH` (what older versions stored deeper reads with the
  excess replaced: `bounded`); a turn's original item (`NativeItem`) at most both together;
- one append: at most 1,000 messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .errors import ValidationError
from .types import CHAT_FORMAT, ChatMessage, Message, MessageIn, NativeItem, Role, Turn

__all__ = [
    "ID_PATTERN",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_ID_CHARS",
    "MAX_MESSAGES_PER_APPEND",
    "MAX_MESSAGE_BYTES",
    "MAX_PARTS",
    "TOO_DEEP",
    "Continuation",
    "OpenUnit",
    "Origin",
    "PlannedTurn",
    "bounded",
    "carried_bytes",
    "check_id",
    "common_start",
    "continuation",
    "depth",
    "dumps_message",
    "inline_bytes",
    "may_rewrite",
    "normalize_messages",
    "normalize_turns",
    "opening_turns",
    "overlap",
    "plan_units",
    "said",
    "same",
]

MAX_ID_CHARS = 256
MAX_MESSAGE_BYTES = 1 << 20
"""One message as JSON, besides the base64 of the files it carries inline."""
MAX_FILE_BYTES = 20 << 20
"""The base64 of one message's inline files (images, PDFs, recordings): a phone's photo, a
screenshot, a long PDF. A window reads them only when its request sends them (`SHED_BYTES`)."""
MAX_MESSAGES_PER_APPEND = 1_000
MAX_PARTS = 256
"""Content parts in one message."""
MAX_DEPTH = 16
"""How deeply one value of a message (a part, a native item) may nest dicts and lists: enough
for every provider's shapes, and far from what breaks a JSON serializer."""
TOO_DEEP = "[nested too deep]"

_ROLES: frozenset[str] = frozenset({"user", "assistant", "tool"})
_PART_TYPES: dict[str, frozenset[str]] = {
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
    "tool": frozenset({"text", "image_url", "file"}),
}
"""The content parts of OpenAI's chat format, per role; a tool result's images and files (a
screenshot, a PDF a tool read) as Anthropic's and the Responses API's tool results carry them
(a chat upstream gets them after the results: `formats.tool_files`)."""
_KEYS: dict[str, frozenset[str]] = {
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls", "refusal"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}


_INVISIBLE = (
    r"\x00-\x1f\x7f-\x9f"  # control characters
    r"\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    r"\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"  # format characters
    r"\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"  # spaces other than " "
    r"\ue000-\uf8ff\ufdd0-\ufdef\ufffe\uffff"  # private use, non-characters
)
"""What an id must not contain: characters that do not show, or show as something else (a
bidi override reorders the page's text, a zero-width space makes two ids look one)."""
_HIDDEN = re.compile(f"[{_INVISIBLE}\ud800-\udfff]")
"""With lone surrogates, which only a JSON escape can make (no text encoding carries them,
so no regular expression of a JSON Schema mentions them)."""

ID_PATTERN = rf"^(?! )(?!.* $)(?!(?:.*/)?\.\.?(?:/|$))[^{_INVISIBLE}]+$"
"""The id rule as one regular expression, in the dialect Python and JSON Schema share: no
hidden character, no surrounding space, no ``.``/``..`` segment; with 1 to `MAX_ID_CHARS`
characters, it is exactly what `check_id` accepts (the OpenAPI document publishes it)."""


def check_id(field_name: str, value: object) -> str:
    """Returns `value` when it is a usable id, else raises ValidationError naming the field."""
    if not isinstance(value, str):
        raise ValidationError(field_name, f"must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(field_name, "must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise ValidationError(
            field_name, f"is {len(value)} characters long; the limit is {MAX_ID_CHARS}"
        )
    if _HIDDEN.search(value):
        raise ValidationError(
            field_name, "must not contain control, format or invisible space characters"
        )
    if value != value.strip():
        # HTTP strips a header's surrounding spaces, a URL path keeps them: "victim " would be
        # one thread over REST and another through X-Thread-Id.
        raise ValidationError(field_name, "must not start or end with whitespace")
    if any(segment in (".", "..") for segment in value.split("/")):
        # A browser or proxy resolves them in a URL: the id would name another path.
        raise ValidationError(field_name, "must not have '.' or '..' as a /-separated part")
    return value


_PAYLOAD = {"image_url": "url", "file": "file_data", "input_audio": "data"}
"""Where each kind of part carries its base64."""


def inline_bytes(part: object) -> int:
    """The characters of base64 a content part carries (an image, a file or a recording sent
    inline); 0 for text and for what is sent by URL or id."""
    if not isinstance(part, Mapping):
        return 0
    kind = part.get("type")
    inner = part.get(kind) if isinstance(kind, str) else None
    if not isinstance(inner, Mapping):
        return 0
    field = _PAYLOAD.get(str(kind))
    data = inner.get(field) if field else None
    if not isinstance(data, str) or (kind == "image_url" and not data.startswith("data:")):
        return 0
    return len(data)


def carried_bytes(message: Mapping[str, Any]) -> int:
    """The characters of base64 a message's parts carry inline (`inline_bytes`)."""
    content = message.get("content")
    return sum(map(inline_bytes, content)) if isinstance(content, list) else 0


def dumps_message(message: MessageIn) -> str:
    """The one serializer every store uses for a message."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


_FORMAT = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a stored turn came from: its format and its original item, as given and as the
    JSON text the store keeps (both None when the chat view is the original)."""

    format: str = CHAT_FORMAT
    item: dict[str, Any] | None = None
    text: str | None = None


def normalize_turns(
    messages: object,
    field_name: str = "messages",
    *,
    limit: int | None = MAX_MESSAGES_PER_APPEND,
    texts: bool = True,
) -> tuple[list[Message], list[Origin]]:
    """`normalize_messages` for what a store appends: chat messages, `Turn`s and `NativeItem`s.

    A native item's chat view is validated like any message; its original is kept as given
    (a JSON object of at most `MAX_MESSAGE_BYTES` and `MAX_FILE_BYTES` together), with its
    format. Raises ValidationError with the path of the first bad value. `limit`: the most
    messages (an append's); None for messages that are read, not stored (a conversation to
    compact). `texts` False: the originals are checked, their JSON texts not kept (a request
    checked before anything is stored: most of a resent history is stored already).
    """
    items = _checked_sequence(messages, field_name, limit)
    views: list[Message] = []
    origins: list[Origin] = []
    for index, item in enumerate(items):
        path = f"{field_name}[{index}]"
        if isinstance(item, NativeItem):
            views.append(_normalize_one(item.message, f"{path}.message"))
            origins.append(_origin(item.format, item.item, path, texts, views[-1]))
        elif isinstance(item, Turn) and item.item is not None:
            views.append(_normalize_one(item, path))
            origins.append(_origin(item.format, item.item, path, texts, views[-1]))
        else:
            origins.append(Origin())
            views.append(_normalize_one(item, path))
    return views, origins


def _origin(format: object, item: object, path: str, text: bool, view: Message) -> Origin:
    """The original, checked; its JSON text unless not `text` and its `view` carries files
    (then its size is taken without serializing their base64: `_json_size`)."""
    if not isinstance(format, str) or not _FORMAT.fullmatch(format):
        raise ValidationError(
            f"{path}.format",
            f"must be 1-64 of a-z 0-9 . _ - (like 'openai.responses'), got {format!r}",
        )
    if not isinstance(item, dict):
        raise ValidationError(f"{path}.item", f"must be a JSON object, got {type(item).__name__}")
    if depth(item) > MAX_DEPTH:
        raise ValidationError(f"{path}.item", f"nests deeper than {MAX_DEPTH} levels")
    serialized: str | None = None
    try:
        if text or not carried_bytes(view):
            serialized = _item_json(item)
            size = _bytes(serialized)
        else:
            size = _json_size(item, _item_json)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{path}.item", f"is not JSON: {exc}") from exc
    except UnicodeEncodeError as exc:
        raise _not_unicode(f"{path}.item") from exc
    limit = MAX_MESSAGE_BYTES + MAX_FILE_BYTES
    if size > limit:
        raise ValidationError(f"{path}.item", f"is over {limit} bytes as JSON")
    return Origin(format=format, item=item, text=serialized)


def _item_json(item: object) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_PLAIN_MIN = 4096
"""The length from which a string is measured rather than serialized (`_json_size`)."""


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _json_size(value: Any, dumps: Callable[[Any], str]) -> int:
    """The bytes of `value`'s JSON as `dumps` writes it, its long strings that JSON writes as
    they are (the base64 of files) counted rather than serialized. A value checked nests at
    most `MAX_DEPTH` levels."""
    left_out = 0

    def measured(node: object) -> object:
        nonlocal left_out
        if isinstance(node, str):
            if len(node) >= _PLAIN_MIN and _plain(node):
                left_out += len(node)
                return ""
            return node
        if isinstance(node, dict):
            return {key: measured(value) for key, value in node.items()}
        if isinstance(node, list):
            return [measured(value) for value in node]
        return node

    return _bytes(dumps(measured(value))) + left_out


_AS_IS = bytes(range(0x20, 0x7F)).replace(b'"', b"").replace(b"\\", b"")
"""The characters JSON writes as they are, one byte each: printable ASCII but the quote and
the backslash."""


def _plain(text: str) -> bool:
    """Whether JSON writes `text` as it is (base64, a data URL): each test in C, about three
    times faster than serializing it."""
    return text.isascii() and not text.encode("ascii").translate(None, _AS_IS)


def _checked_sequence(
    messages: object, field_name: str, limit: int | None = MAX_MESSAGES_PER_APPEND
) -> Sequence[object]:
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise ValidationError(field_name, "must be a list of messages")
    if limit is not None and len(messages) > limit:
        raise ValidationError(
            field_name, f"has {len(messages)} messages; at most {limit} per append"
        )
    return messages


def normalize_messages(messages: object, field_name: str = "messages") -> list[Message]:
    """Validates chat-format messages (or `Turn`s) and returns their canonical dicts.

    Keys that are not part of a role's message are rejected, except those whose value is
    null or empty (SDK dumps carry ``"refusal": None``, ``"annotations": []``), which are
    dropped. Raises ValidationError with the path of the first bad value.
    """
    items = _checked_sequence(messages, field_name)
    return [_normalize_one(item, f"{field_name}[{i}]") for i, item in enumerate(items)]


def _normalize_one(item: object, path: str) -> Message:
    if isinstance(item, Turn):
        item = item.to_message()
    if not isinstance(item, dict):
        raise ValidationError(path, f"must be a message dict, got {type(item).__name__}")
    raw = cast(dict[str, Any], item)
    role = raw.get("role")
    if role not in _ROLES:
        raise ValidationError(f"{path}.role", f"must be user, assistant or tool, got {role!r}")
    allowed = _KEYS[role]
    for key, value in raw.items():
        if key not in allowed and value not in (None, "", [], {}):
            raise ValidationError(f"{path}.{key}", f"is not a field of a {role} message")

    message: Message = {"role": role}
    content = raw.get("content")
    refusal = raw.get("refusal")
    if role == "assistant" and refusal:  # the SDK's field: a refusal part after the content
        content = _with_refusal(content, refusal, f"{path}.refusal")
    tool_calls = raw.get("tool_calls") or None
    if role == "assistant":
        if tool_calls is not None:
            message["tool_calls"] = _normalize_tool_calls(tool_calls, f"{path}.tool_calls")
        elif content is None:
            raise ValidationError(
                f"{path}.content", "an assistant turn needs content or tool_calls"
            )
    elif content is None:
        raise ValidationError(f"{path}.content", f"a {role} turn needs content")
    message["content"] = (
        None if content is None else _normalize_content(content, f"{path}.content", role)
    )
    if role == "tool":
        message["tool_call_id"] = check_id(f"{path}.tool_call_id", raw.get("tool_call_id"))
    name = raw.get("name")
    if name is not None and role != "tool":
        message["name"] = check_id(f"{path}.name", name)

    _check_size(message, path)
    return message


def _with_refusal(content: object, refusal: object, path: str) -> list[Any]:
    """An assistant message's content with its ``refusal`` (OpenAI's field, as a resent
    history carries it) as a refusal part after it."""
    if not isinstance(refusal, str):
        raise ValidationError(path, f"must be a string, got {type(refusal).__name__}")
    parts: list[Any] = list(content) if isinstance(content, list) else []
    if isinstance(content, str) and content:
        parts.append({"type": "text", "text": content})
    return [*parts, {"type": "refusal", "refusal": refusal}]


def _normalize_content(content: object, path: str, role: Role) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationError(
            path, f"must be a string or a list of parts, got {type(content).__name__}"
        )
    if not content:
        raise ValidationError(path, "must not be an empty list of parts")
    if len(content) > MAX_PARTS:
        raise ValidationError(path, f"has {len(content)} parts; the limit is {MAX_PARTS}")
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        part_path = f"{path}[{i}]"
        if not isinstance(part, dict):
            raise ValidationError(part_path, f"must be a part dict, got {type(part).__name__}")
        if depth(part) > MAX_DEPTH:
            raise ValidationError(part_path, f"nests deeper than {MAX_DEPTH} levels")
        kind = part.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValidationError(f"{part_path}.type", "must be a non-empty string")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise ValidationError(f"{part_path}.text", "a text part needs a string text")
        elif kind not in _PART_TYPES[role]:
            # Stored, it would be re-sent upstream with every later request, and refused there.
            raise ValidationError(
                f"{part_path}.type",
                f"a {role} message takes parts of type {', '.join(sorted(_PART_TYPES[role]))}; "
                f"got {kind!r}",
            )
        elif kind == "image_url":
            image = part.get("image_url")
            if not isinstance(image, dict) or not isinstance(image.get("url"), str):
                raise ValidationError(f"{part_path}.image_url.url", "must be a string")
        elif kind == "file":
            _check_file(part.get("file"), f"{part_path}.file")
        elif kind == "input_audio":
            audio = part.get("input_audio")
            if not isinstance(audio, dict) or not isinstance(audio.get("data"), str):
                raise ValidationError(f"{part_path}.input_audio.data", "must be a string (base64)")
        parts.append(dict(part))
    return parts


def _check_file(file: object, path: str) -> None:
    """A file part's file: its data or its id, for the model to read it; a part without either
    would be refused upstream with every later request."""
    if not isinstance(file, dict):
        raise ValidationError(path, "must be an object with file_data or file_id")
    for key in ("file_data", "file_id", "filename"):
        if file.get(key) is not None and not isinstance(file[key], str):
            raise ValidationError(f"{path}.{key}", "must be a string")
    if not file.get("file_data") and not file.get("file_id"):
        raise ValidationError(path, "needs file_data (base64) or file_id")


def _normalize_tool_calls(tool_calls: object, path: str) -> list[dict[str, Any]]:
    if not isinstance(tool_calls, list):
        raise ValidationError(path, f"must be a list, got {type(tool_calls).__name__}")
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, call in enumerate(tool_calls):
        call_path = f"{path}[{i}]"
        if not isinstance(call, dict):
            raise ValidationError(call_path, f"must be a tool call dict, got {type(call).__name__}")
        call_id = check_id(f"{call_path}.id", call.get("id"))
        if call_id in seen:
            raise ValidationError(f"{call_path}.id", f"{call_id!r} is used twice in one turn")
        seen.add(call_id)
        kind = call.get("type", "function")
        if kind != "function":
            raise ValidationError(f"{call_path}.type", f"must be 'function', got {kind!r}")
        function = call.get("function")
        if not isinstance(function, dict):
            raise ValidationError(
                f"{call_path}.function", "must be an object with name and arguments"
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError(f"{call_path}.function.name", "must be a non-empty string")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            raise ValidationError(
                f"{call_path}.function.arguments",
                "must be a string (the JSON text the model wrote)",
            )
        calls.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        )
    return calls


_JSON_BYTES_PER_CHAR = 6
"""The most one character of a string takes in a message's JSON (an escape: ``\\u001f``)."""
_JSON_FRAME_BYTES = 64
"""More than a text message's keys and punctuation take."""


def _not_unicode(path: str) -> ValidationError:
    return ValidationError(path, "contains text that is not valid Unicode (a lone surrogate)")


def _check_size(message: Message, path: str) -> None:
    """Rejects a message over `MAX_MESSAGE_BYTES` once serialized besides its inline files,
    with files over `MAX_FILE_BYTES`, or with text that is not valid Unicode. A text message
    far under the limit is not serialized for it (the store serializes each message once, as
    it writes it): its strings are only encoded."""
    content = message.get("content")
    if isinstance(content, str) and "tool_calls" not in message:
        texts = (content, message.get("name") or "", message.get("tool_call_id") or "")
        try:
            for text in texts:
                text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _not_unicode(path) from exc
        bound = _JSON_FRAME_BYTES + _JSON_BYTES_PER_CHAR * sum(len(text) for text in texts)
        if bound <= MAX_MESSAGE_BYTES:
            return
    files = carried_bytes(message)
    if files > MAX_FILE_BYTES:
        raise ValidationError(
            path, f"carries {files} bytes of base64 files; the limit is {MAX_FILE_BYTES}"
        )
    try:  # measured without serializing the files' base64 (`_json_size`)
        whole = _json_size(message, dumps_message) if files else _bytes(dumps_message(message))
        size = whole - files
    except UnicodeEncodeError as exc:
        raise _not_unicode(path) from exc
    if size > MAX_MESSAGE_BYTES:
        raise ValidationError(
            path,
            f"is {size} bytes once serialized (besides its files); "
            f"the limit is {MAX_MESSAGE_BYTES}",
        )


@dataclass(slots=True)
class OpenUnit:
    """The newest unit of a thread, as far as the next append needs it."""

    start_seq: int
    """The seq of the unit's first turn."""
    calls: frozenset[str] = frozenset()
    """The call ids of the unit's assistant turn; empty for a user turn."""
    answered: set[str] = field(default_factory=set)
    """The calls that already have a tool turn."""

    @classmethod
    def from_turns(cls, messages: Sequence[MessageIn], start_seq: int) -> OpenUnit | None:
        """Rebuilds the newest unit from its stored messages (oldest first)."""
        if not messages:
            return None
        head = messages[0]
        calls = frozenset(call["id"] for call in head.get("tool_calls") or ())
        answered = {m["tool_call_id"] for m in messages[1:] if m["role"] == "tool"}
        return cls(start_seq=start_seq, calls=calls, answered=answered)


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    """A validated message with its place in the thread."""

    seq: int
    unit_seq: int
    message: ChatMessage


def plan_units(
    previous: OpenUnit | None,
    messages: Sequence[MessageIn],
    first_seq: int,
    field_name: str = "messages",
) -> list[PlannedTurn]:
    """Gives each message its seq and unit; rejects a tool result that answers no open call.

    A tool turn must follow the assistant turn whose call it answers (with only other results
    of that turn in between), and answer each call once: that is what every provider requires
    of a request, so a thread that breaks it could never be sent whole.
    """
    unit = previous
    planned: list[PlannedTurn] = []
    for offset, message in enumerate(messages):
        seq = first_seq + offset
        if message["role"] == "tool":
            call_id = message["tool_call_id"]
            if unit is None or call_id not in unit.calls:
                raise ValidationError(
                    f"{field_name}[{offset}].tool_call_id",
                    f"{call_id!r} matches no call of the assistant turn it follows",
                )
            if call_id in unit.answered:
                raise ValidationError(
                    f"{field_name}[{offset}].tool_call_id", f"call {call_id!r} already has a result"
                )
            unit.answered.add(call_id)
        else:
            calls = frozenset(call["id"] for call in message.get("tool_calls") or ())
            unit = OpenUnit(start_seq=seq, calls=calls)
        typed = cast(ChatMessage, message)  # validated by normalize_messages before
        planned.append(PlannedTurn(seq=seq, unit_seq=unit.start_seq, message=typed))
    return planned


def overlap(stored: Sequence[MessageIn], request: Sequence[MessageIn]) -> int:
    """How many of a request's turns (from its start) the thread already ends with.

    The overlap rule, for clients that resend the whole history, a part of it, or only the new
    turns: the longest suffix of the stored thread that equals a prefix of the request's turns
    is already there; the rest of the request is new. So a request is stored once however often
    it is sent (a retry after a failure stores nothing again), and a client that resends the
    whole conversation adds only what follows it. `stored` needs only the thread's newest
    ``len(request)`` turns; messages compare by what they say (`said`).
    """
    tail = list(stored[-len(request) :]) if request else []
    for length in range(len(tail), 0, -1):
        start = len(tail) - length
        if all(same(tail[start + i], request[i]) for i in range(length)):
            return length
    return 0


@dataclass(frozen=True, slots=True)
class Continuation:
    """Where a request's turns go in its thread (`continuation`)."""

    keep: int | None
    """How many of the thread's turns (client-visible ones, oldest first) stay: None keeps
    them all (the request extends the thread); a number is an edit or a regenerate, whose
    turns after that many are replaced."""
    start: int
    """The first of the request's turns that is new."""


def continuation(thread: Sequence[MessageIn], request: Sequence[MessageIn]) -> Continuation:
    """How a request continues its thread, for clients that send only the new turns and for
    those that resend the whole history, edit it or regenerate an answer.

    - It extends the thread (`overlap`): the turns the thread ends with are not stored again.
    - Else, when it starts where the thread starts, it is the whole history: the thread keeps
      the turns the two have in common from the start, and the request's turns after those
      replace the rest. A regenerate (the history without its last answer) replaces the last
      answer; an edit replaces the thread from the edited turn on. One turn alone is read so
      only on a thread of one exchange, so that a client sending just its new message never
      rewinds a longer thread by saying again what it said first.
    - Else its turns are all new.

    `thread` holds the thread's client-visible turns from its start, at least
    `opening_turns` of them when there are that many (or the newest ones when the request
    extends them: check `overlap` first).
    """
    if not thread or not request:
        return Continuation(keep=None, start=0)
    common = common_start(thread, request)
    if common and may_rewrite(len(request), len(thread)):
        return Continuation(keep=common, start=common)
    return Continuation(keep=None, start=0)


_ONE_EXCHANGE = 2
"""A thread's client-visible turns after its first question and answer."""


def may_rewrite(request_turns: int, thread_turns: int) -> bool:
    """Whether a request of `request_turns` turns may edit or regenerate a thread of (at
    least) `thread_turns` client-visible turns (`continuation`): a request of several may;
    one turn alone only a thread of one exchange."""
    return request_turns > 1 or thread_turns <= _ONE_EXCHANGE


def opening_turns(request_turns: int) -> int:
    """The thread's client-visible turns from its start that `continuation` needs for a
    request of `request_turns` turns: one more than the request has, and enough to tell a
    thread of one exchange from a longer one."""
    return max(request_turns + 1, _ONE_EXCHANGE + 1)


def common_start(thread: Sequence[MessageIn], request: Sequence[MessageIn]) -> int:
    """How many turns the two have in common from their start (`same`)."""
    common = 0
    for old, new in zip(thread, request, strict=False):
        if not same(old, new):
            break
        common += 1
    return common


def same(a: MessageIn, b: MessageIn) -> bool:
    """Two messages say the same (`said`); equal ones at once, without spelling them out."""
    return a == b or said(a) == said(b)


def said(message: MessageIn) -> str:
    """A message as the overlap rule compares it: what it says, not how a client spells it.
    Text parts read as their text, an empty content as none, a tool call as its id, name and
    arguments (as JSON values: a client that parsed and re-serialized them spells them
    otherwise), a tool result as its call and content. Other fields (a name, extras) too."""
    key: dict[str, Any] = {k: v for k, v in message.items() if v not in (None, "", [], {})}
    content = key.get("content")
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and set(p) <= {"type", "text"}
        for p in content
    ):
        key["content"] = "".join(str(p.get("text", "")) for p in content)
        if not key["content"]:
            del key["content"]
    calls = key.get("tool_calls")
    if isinstance(calls, list):
        key["tool_calls"] = [_said_call(call) for call in calls]
    return json.dumps(key, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _said_call(call: object) -> object:
    if not isinstance(call, dict):
        return call
    function = call.get("function")
    if not isinstance(function, dict):
        return call
    arguments = function.get("arguments", "")
    try:
        parsed: object = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = arguments
    return {"id": call.get("id"), "name": function.get("name"), "arguments": parsed}


def depth(value: object, limit: int = MAX_DEPTH + 3) -> int:
    """How deeply `value` nests dicts and lists, counted up to `limit` (no deeper walk). Only
    containers are walked: a resent history's items are checked on every request."""
    if not isinstance(value, dict | list):
        return 0
    deepest, stack = 1, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if level > deepest:
            deepest = level
            if deepest >= limit:
                return deepest
        below = level + 1
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, below))
    return deepest


def bounded(value: Any, depth: int = MAX_DEPTH) -> Any:
    """`value` with what nests deeper than `depth` replaced by `TOO_DEEP`: stored data written
    before the limit existed still reads, serializes and sends."""
    if depth <= 0 and isinstance(value, dict | list):
        return TOO_DEEP
    if isinstance(value, dict):
        return {key: bounded(item, depth - 1) for key, item in value.items()}
    if isinstance(value, list):
        return [bounded(item, depth - 1) for item in value]
    return value
