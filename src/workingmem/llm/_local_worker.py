"""The local model's worker process: llama.cpp runs here, never in the process that calls it.

    python .../workingmem/llm/_local_worker.py '{"model_path": "...", "n_ctx": 8192, ...}'

It imports nothing of the package (the standard library and llama-cpp-python only), so the
client runs it as a script and the worker starts without importing ``workingmem``.

A crash of native code (an instruction the CPU advertises but its virtual machine does not
honour, a bug in llama.cpp) ends this process only: `LocalModelClient` sees the pipe close,
fails the call in progress with `LLMError` and starts a new worker for the next call.

The protocol is JSON lines. In, on stdin: ``{"op": "generate", "id", "request", "stream"}`` and
``{"op": "cancel", "id"}``. Out, on a private copy of stdout: ``{"event": "ready", ...}`` once
the model is loaded (or ``{"event": "failed", "message"}``), then for each generation one
``started``, any number of ``delta`` events (when it streams) and one ``done``,
``cancelled`` or ``error``. File
descriptor 1 itself is pointed at stderr, so nothing native code prints can corrupt the
protocol; the client keeps the tail of stderr for its error messages. The end of stdin (the
client is gone) ends the process at once, mid-generation too: nobody is listening any more.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

__all__ = ["main"]


class _Model:
    """The loaded model and what generating with it needs."""

    def __init__(self, settings: dict[str, Any]) -> None:
        import llama_cpp
        import llama_cpp.llama_cpp as native
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        _without_extra_buffers(native)
        self.llama: Llama = llama_cpp.Llama(
            model_path=str(settings["model_path"]),
            n_ctx=int(settings["n_ctx"]),
            n_threads=int(settings["n_threads"]),
            n_threads_batch=int(settings["n_threads_batch"]),
            seed=int(settings["seed"]),
            verbose=False,
        )
        self.grammars: set[str] = set()
        """The grammars llama.cpp parsed already."""
        self.formatter: Jinja2ChatFormatter | None = None
        template = self.llama.metadata.get("tokenizer.chat_template")
        if template:
            self.formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=self._token_text(self.llama.token_eos()),
                bos_token=self._token_text(self.llama.token_bos()),
            )
        self.info = {
            "llama_cpp_version": getattr(llama_cpp, "__version__", "unknown"),
            "system_info": native.llama_print_system_info().decode("utf-8", "replace").strip(),
            "pid": os.getpid(),
        }

    def generate(
        self,
        request: dict[str, Any],
        emit: Callable[[str], None] | None,
        cancelled: Callable[[], bool],
    ) -> dict[str, Any] | None:
        """One chat completion, streamed internally so a cancel stops it at the next token.

        Returns the completion's fields, or None when it was cancelled."""
        from llama_cpp.llama_grammar import LlamaGrammar

        keywords = dict(request)
        if keywords.get("grammar") is not None:
            self._check_grammar(keywords["grammar"])
            keywords["grammar"] = LlamaGrammar.from_string(keywords["grammar"], verbose=False)
        pieces: list[str] = []
        finish_reason = "stop"
        chunks = cast(
            Iterator[dict[str, Any]], self.llama.create_chat_completion(**keywords, stream=True)
        )
        try:
            for chunk in chunks:
                if cancelled():
                    return None
                choice = chunk["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    pieces.append(text)
                    if emit is not None:
                        emit(text)
                finish_reason = choice.get("finish_reason") or finish_reason
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        text = "".join(pieces)
        return {
            "text": text,
            "prompt_tokens": self._prompt_tokens(request["messages"]),
            "completion_tokens": self._token_count(text),
            "finish_reason": finish_reason,
        }

    def _check_grammar(self, grammar: str) -> None:
        """GrammarError for a grammar llama.cpp refuses (llama-cpp-python would go on with the
        sampler it did not get, and the process would die of it). Each grammar once."""
        if grammar in self.grammars:
            return
        import llama_cpp.llama_cpp as native

        sampler = native.llama_sampler_init_grammar(
            self.llama._model.vocab, grammar.encode("utf-8"), b"root"
        )
        if not sampler:
            raise GrammarError(
                "llama.cpp refuses the grammar of this JSON schema (too many repetitions?)"
            )
        native.llama_sampler_free(sampler)
        self.grammars.add(grammar)

    def _prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """The prompt's tokens as the chat template renders it (0 for a model without one)."""
        if self.formatter is None:
            return 0
        rendered = self.formatter(messages=cast(Any, messages))
        return len(
            self.llama.tokenize(
                rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
            )
        )

    def _token_count(self, text: str) -> int:
        if not text:
            return 0
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llama.detokenize([token], special=True).decode("utf-8", errors="replace")


def _without_extra_buffers(native: Any) -> None:
    """Loads models without llama.cpp's extra CPU buffer types (weight repacking, AMX).

    They are where a build that enabled AMX runs AMX tile instructions, which some virtual
    machines advertise and fault on; the local model's Q4_1 weights are not repacked anyway
    (measured: the same speed either way). llama-cpp-python exposes no argument for it, so the
    default parameters it starts from are changed, in this worker process only.
    """
    defaults = native.llama_model_default_params

    def model_params() -> Any:
        params = defaults()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    native.llama_model_default_params = model_params


class GrammarError(ValueError):
    """A request's grammar that llama.cpp refuses: the caller's schema, a 400."""


def _error_event(exc: Exception) -> dict[str, Any]:
    """A generation's failure as the client turns it into `LLMError`."""
    message = f"{type(exc).__name__}: {exc}"
    caller_made = isinstance(exc, GrammarError) or (
        isinstance(exc, ValueError) and "context window" in str(exc)
    )
    status = 400 if caller_made else None
    return {"event": "error", "message": message, "status_code": status}


def main(argv: list[str]) -> int:
    settings = json.loads(argv[1])
    channel: TextIO = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # whatever native code prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    lock = threading.Lock()

    def send(event: dict[str, Any]) -> None:
        line = json.dumps(event, ensure_ascii=False) + "\n"
        with lock:
            channel.write(line)
            channel.flush()

    try:
        model = _Model(settings)
    except Exception as exc:  # llama-cpp-python says ValueError("Failed to load model ...")
        send({"event": "failed", "message": f"{type(exc).__name__}: {exc}"})
        return 1
    send({"event": "ready", **model.info})

    requests: queue.Queue[dict[str, Any]] = queue.Queue()
    cancelled: set[int] = set()

    def read() -> None:
        for line in sys.stdin:
            message = json.loads(line)
            if message.get("op") == "cancel":
                cancelled.add(int(message["id"]))
            else:
                requests.put(message)
        os._exit(0)  # the client is gone: stop now, even mid-generation

    threading.Thread(target=read, name="workingmem-worker-stdin", daemon=True).start()
    while True:
        message = requests.get()
        job_id = int(message["id"])

        def emit(text: str, job_id: int = job_id) -> None:
            send({"id": job_id, "event": "delta", "text": text})

        send({"id": job_id, "event": "started"})
        try:
            outcome = model.generate(
                message["request"],
                emit if message.get("stream") else None,
                lambda job_id=job_id: job_id in cancelled,  # type: ignore[misc]
            )
        except Exception as exc:
            send({"id": job_id, **_error_event(exc)})
        else:
            if outcome is None:
                send({"id": job_id, "event": "cancelled"})
            else:
                send({"id": job_id, "event": "done", "completion": outcome})
        cancelled.discard(job_id)


if __name__ == "__main__":  # pragma: no cover - run as the worker process
    sys.exit(main(sys.argv))
