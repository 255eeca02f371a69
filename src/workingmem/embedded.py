"""The embedded defaults: what answers when nothing is configured.

    upstream = choose_upstream()          # OPENAI_BASE_URL / OPENAI_API_KEY, else the local model
    async with Gateway(store=store, llm=upstream.client, config=upstream.config,
                       templates=upstream.templates) as gateway:
        ...
    await upstream.aclose()

Like SQLite for the database, the local model makes the upstream need no set-up: with no
upstream URL and no API key, `workingmem demo` and `workingmem serve` run SmolLM2-135M-Instruct
on the CPU (the ``local`` extra), as both the answering and the cheap model. A model that small
gets a prompt and caps made for it: a short MEMORY_WORKING template without example values, a
600-character summary, 8 facts, helper inputs of 1,500 tokens, the last 6 turns verbatim and
answers of at most 96 tokens (it reads a few hundred tokens a second on two cores, and writes
a few dozen). Its validation is exactly as strict as any other upstream's. It counts tokens
with its own vocabulary, read from its GGUF file (`LOCAL_TOKENIZER`), so the gateway plans
with its whole 8,192-token context.

Another GGUF on disk (a 0.5-1.5B instruct model writes better summaries, offline too) takes
SmolLM2's place with the same prompt and caps: `local_model_file` checks it (its SHA-256 when
given, then that it is a GGUF whose vocabulary llama.cpp reads) and the gateway counts with
its vocabulary and plans with its own context, at most the worker's 8,192 tokens.

    upstream = choose_upstream(local_model="/models/qwen2.5-0.5b-instruct-q4_k_m.gguf",
                               local_model_sha256="...")
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .config import WorkingMemoryConfig
from .errors import ValidationError
from .gateway_config import GatewayConfig
from .llm import AnthropicClient, LLMClient, OpenAIClient, OpenAIResponsesClient
from .llm._gguf import GGUF_KEY_PREFIX, gguf_tokenizer
from .llm._weights import (
    INSTALL_COMMAND,
    LOCAL_MODEL,
    LOCAL_MODEL_SHA256,
    LocalModelUnavailableError,
)
from .prompts import SMALL_MODEL_MEMORY_WORKING, PromptKind, PromptTemplates
from .tokens import tokenizer_for
from .types import ModelInfo

__all__ = [
    "ANTHROPIC_GATEWAY_CONFIG",
    "LOCAL_CONTEXT_WINDOW",
    "LOCAL_GATEWAY_CONFIG",
    "LOCAL_MODEL_ENV",
    "LOCAL_MODEL_SHA256_ENV",
    "LOCAL_TOKENIZER",
    "LocalModelFile",
    "Upstream",
    "UpstreamApi",
    "choose_upstream",
    "default_gateway_config",
    "local_model_file",
    "local_templates",
    "upstream_env",
]

LOCAL_MODEL_ENV = "WORKINGMEM_LOCAL_MODEL"
"""The environment variable naming another GGUF file for the local model (a flag wins)."""

LOCAL_MODEL_SHA256_ENV = "WORKINGMEM_LOCAL_MODEL_SHA256"
"""The environment variable with the SHA-256 that file must have (a flag wins)."""

UpstreamApi = Literal["chat", "responses", "anthropic"]
"""What an upstream speaks: chat completions, OpenAI's Responses API, Anthropic's Messages."""

ANTHROPIC_GATEWAY_CONFIG = GatewayConfig(
    default_model="claude-sonnet-4-5",
    cheap_model="claude-haiku-4-5",
    default_context_window=200_000,
)
"""The models an Anthropic upstream answers with when none is named, and the window of those
it is asked for by name: every Claude model's is at least 200,000 tokens (Claude Code asks for
up to 128,000 of them for the answer)."""


def upstream_env(api: str = "chat") -> tuple[str | None, str | None]:
    """The upstream's base URL and key in the environment, as its SDK reads them:
    ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` for Anthropic, ``OPENAI_*`` otherwise."""
    vendor = "ANTHROPIC" if api == "anthropic" else "OPENAI"
    return (
        os.environ.get(f"{vendor}_BASE_URL") or None,
        os.environ.get(f"{vendor}_API_KEY") or None,
    )


LOCAL_CONTEXT_WINDOW = 8_192
"""What the gateway plans with for the local model: SmolLM2's whole context (its GGUF's
``llama.context_length``, and the worker's ``n_ctx``), with no safety margin, since its tokens
are counted with its own vocabulary. Measured on LoCoMo's conv-26 (200 turns, in 20 windows of
10 behind a system prompt), against the worker's own count of the prompt its chat template
renders: 19 windows equal, one 1 token over (a turn's trailing space, which the worker strips).
A larger file's context is capped here too: the worker is started with no more."""

LOCAL_TOKENIZER = f"{GGUF_KEY_PREFIX}{LOCAL_MODEL_SHA256}"
"""How the local model counts: the vocabulary of SmolLM2's GGUF, named by the file's SHA-256
(the key its counts are stored under). A spec, turned into a tokenizer on first use only
(llama-cpp-python reads the vocabulary then, in 0.13 s), so that this module imports without
the ``local`` extra; where the extra or the weights are missing (a command that only reads
memory), the estimate counts instead, after a logged warning."""

LOCAL_GATEWAY_CONFIG = GatewayConfig(
    default_model=LOCAL_MODEL,
    cheap_model=LOCAL_MODEL,
    fixed_model=LOCAL_MODEL,  # a request for "gpt-4o-mini" gets SmolLM2 with its own caps
    models={
        LOCAL_MODEL: ModelInfo(
            id=LOCAL_MODEL,
            context_window=LOCAL_CONTEXT_WINDOW,
            max_output_tokens=96,
            tokenizer=LOCAL_TOKENIZER,
        )
    },
    working_memory=WorkingMemoryConfig(
        recent_turns=6,
        update_every_turns=6,
        summary_max_chars=600,
        max_facts=8,
        fact_max_chars=150,
        helper_input_max_tokens=1_500,
    ),
)
"""The gateway's settings for the local model."""


@dataclass(frozen=True, slots=True)
class LocalModelFile:
    """Another GGUF file for the local model, checked (`local_model_file` makes one)."""

    path: Path
    """The file, its path resolved."""
    sha256: str
    """Its SHA-256: the one given, checked, or the one computed; the key of its counts."""
    context_window: int
    """The tokens the worker is started with and the gateway plans with: the GGUF's own
    context (``<architecture>.context_length``), at most `LOCAL_CONTEXT_WINDOW`."""

    @property
    def model_id(self) -> str:
        """The model answers are said to come from: the file's name without ``.gguf``."""
        return self.path.stem

    @property
    def config(self) -> GatewayConfig:
        """`LOCAL_GATEWAY_CONFIG` for this file: its id, its window, its vocabulary."""
        model = ModelInfo(
            id=self.model_id,
            context_window=self.context_window,
            max_output_tokens=LOCAL_GATEWAY_CONFIG.model_info(LOCAL_MODEL).max_output_tokens,
            tokenizer=f"{GGUF_KEY_PREFIX}{self.path}",
        )
        return LOCAL_GATEWAY_CONFIG.model_copy(
            update={
                "default_model": model.id,
                "cheap_model": model.id,
                "fixed_model": model.id,
                "models": {model.id: model},
            }
        )


_MIN_CONTEXT = 256
"""The smallest context `LocalModelClient` starts a worker with."""


def local_model_file(path: str | os.PathLike[str], sha256: str | None = None) -> LocalModelFile:
    """Checks another GGUF file for the local model, in the order that loads nothing unchecked:
    the file exists and is a GGUF, its SHA-256 (when given) is `sha256`, then llama.cpp reads
    its vocabulary, which gives its context. The hash and the vocabulary are kept for the
    process, so the gateway's counts cost nothing more to set up.

    Raises:
        ImportError: llama-cpp-python is not installed (the message says how to install it).
        LocalModelUnavailableError: no such file, not a GGUF, another SHA-256, a vocabulary
            llama.cpp cannot read, or a context under 256 tokens; one line says which.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise ImportError(
            "another local model needs llama-cpp-python; install it with: "
            "pip install 'workingmem[local]'"
        )
    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        raise LocalModelUnavailableError(f"{sha256!r} is not a SHA-256 (64 hex digits)")
    try:
        # An absolute path: never mistaken for a bare SHA-256, which names a loaded file.
        spec = str(Path(path).expanduser().absolute())
        tokenizer = gguf_tokenizer(spec, sha256=sha256)
    except ValidationError as exc:
        raise LocalModelUnavailableError(exc.reason) from exc
    window = min(tokenizer.context_length or LOCAL_CONTEXT_WINDOW, LOCAL_CONTEXT_WINDOW)
    if window < _MIN_CONTEXT:
        raise LocalModelUnavailableError(
            f"{os.fspath(path)!r} has a context of {window} tokens; the local model needs at "
            f"least {_MIN_CONTEXT}"
        )
    # Its own path: the same file elsewhere (the same SHA-256) may have been loaded first.
    resolved = Path(spec).resolve()
    return LocalModelFile(path=resolved, sha256=tokenizer.sha256, context_window=window)


def local_templates() -> PromptTemplates:
    """The prompt templates for the local model: the small-model MEMORY_WORKING prompt."""
    return PromptTemplates(overrides={PromptKind.MEMORY_WORKING: SMALL_MODEL_MEMORY_WORKING})


@dataclass(frozen=True, slots=True)
class Upstream:
    """The model behind a gateway, with the settings that suit it."""

    client: LLMClient
    description: str
    """What to tell the user at start-up."""
    config: GatewayConfig
    templates: PromptTemplates | None
    local: bool

    async def aclose(self) -> None:
        close = getattr(self.client, "aclose", None)
        if close is not None:
            await close()


def _configured(
    base_url: str | None, api_key: str | None, api: str = "chat"
) -> tuple[str | None, str | None]:
    env_url, env_key = upstream_env(api)
    return base_url or env_url, api_key or env_key


def default_gateway_config(
    *, base_url: str | None = None, api_key: str | None = None
) -> GatewayConfig:
    """The settings `choose_upstream` would pick, without loading anything: the local model's
    when no upstream is configured. What a command that only reads memory measures with, so
    that it sizes a window as the server does."""
    if any(_configured(base_url, api_key)):
        return GatewayConfig()
    return LOCAL_GATEWAY_CONFIG


def choose_upstream(
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    config: GatewayConfig | None = None,
    timeout: float = 60.0,
    max_retries: int = 2,
    http: Literal["httpx", "aiohttp"] = "httpx",
    api: UpstreamApi = "chat",
    local_model: str | os.PathLike[str] | None = None,
    local_model_sha256: str | None = None,
) -> Upstream:
    """A configured OpenAI-compatible upstream, else the local model.

    `api`: what the configured upstream speaks, chat completions or the Responses API
    (`OpenAIResponsesClient`); ``anthropic`` is Anthropic's Messages API (`AnthropicClient`:
    ``ANTHROPIC_API_KEY``, its API unless a base URL is given), never the local model.

    Configured means a base URL or an API key, given here or in ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY``. Without either, the local model; when its extra or weights are missing,
    `LocalModelUnavailableError` (or ImportError) says what to install.

    `local_model`: another GGUF file for the local model, instead of SmolLM2-135M-Instruct,
    checked by `local_model_file` (against `local_model_sha256` when given); not used when an
    upstream is configured.
    """
    if api == "anthropic":
        anthropic = AnthropicClient(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
        )
        return Upstream(
            client=anthropic,
            description=f"the Anthropic upstream at {anthropic.base_url}",
            config=config or ANTHROPIC_GATEWAY_CONFIG,
            templates=None,
            local=False,
        )
    base_url, api_key = _configured(base_url, api_key)
    if base_url or api_key:
        kind = OpenAIResponsesClient if api == "responses" else OpenAIClient
        client = kind(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, http=http
        )
        speaks = "Responses" if api == "responses" else "OpenAI-compatible"
        return Upstream(
            client=client,
            description=f"the {speaks} upstream at {client.base_url}",
            config=config or GatewayConfig(),
            templates=None,
            local=False,
        )
    from .llm.local import LocalModelClient  # the local extra, only when it is used

    if local_model is not None:
        chosen = local_model_file(local_model, local_model_sha256)
        # Its hash was just checked: the client need not hash it again.
        local = LocalModelClient(model_path=chosen.path, n_ctx=chosen.context_window)
        name, local_config = chosen.path.name, chosen.config
    else:
        local = LocalModelClient()
        if not local.available():
            raise ImportError(
                "no upstream is configured (--upstream, OPENAI_BASE_URL or OPENAI_API_KEY) and "
                f"the local model is not installed: {INSTALL_COMMAND}"
            )
        name, local_config = LOCAL_MODEL, LOCAL_GATEWAY_CONFIG
    # The vocabulary loads now, at start-up, rather than on the first request.
    tokenizer_for(local_config.model_info(local_config.default_model))
    return Upstream(
        client=local,
        description=(
            f"the local model {name} on the CPU (no key, no network); "
            "set --upstream or OPENAI_API_KEY to use another"
        ),
        config=local_config,
        templates=local_templates(),
        local=True,
    )
