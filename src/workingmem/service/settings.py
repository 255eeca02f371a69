"""What a memory gateway service runs with.

    settings = ServiceSettings(database_url="postgresql://app@db:5432/memory",
                               upstream_base_url="http://127.0.0.1:8000/v1",
                               gateway=GatewayConfig(default_model="qwen2.5-7b"))
    app = create_app(settings)

`ServiceSettings.from_env()` reads the environment: the settings `to_json` wrote into
``WORKINGMEM_SERVICE_SETTINGS`` if set (how ``workingmem serve --workers N`` hands its settings to
the worker processes, which build the app with `create_app()`), ``WORKINGMEM_DATABASE_URL``
(else the SQLite file ``.workingmem/memory.db``), ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` for
the upstream, ``WORKINGMEM_LOCAL_MODEL`` and ``WORKINGMEM_LOCAL_MODEL_SHA256`` for the local
model's file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from ..agent_memory import AgentMemoryConfig
from ..config import Profile
from ..embedded import LOCAL_MODEL_ENV, LOCAL_MODEL_SHA256_ENV, UpstreamApi, upstream_env
from ..errors import ValidationError
from ..gateway_config import GatewayConfig

__all__ = ["LOCAL_TENANT", "SETTINGS_ENV", "ServiceSettings"]

SETTINGS_ENV = "WORKINGMEM_SERVICE_SETTINGS"
"""The environment variable that carries `ServiceSettings.to_json` to worker processes."""

LOCAL_TENANT = "local"
"""The one tenant a server without API keys serves (the tenant `workingmem demo` writes to)."""


@dataclass(frozen=True)
class ServiceSettings:
    """The service's configuration; every field has a working default."""

    database_url: str | None = None
    """A database URL or a SQLite file path; None: ``WORKINGMEM_DATABASE_URL``, else
    ``.workingmem/memory.db``."""
    upstream_base_url: str | None = None
    """The upstream, ``.../v1``; None: ``OPENAI_BASE_URL`` (``ANTHROPIC_BASE_URL`` for an
    Anthropic upstream), else OpenAI's (Anthropic's)."""
    upstream_api_key: str | None = None
    """The upstream's key; None: ``OPENAI_API_KEY`` (``ANTHROPIC_API_KEY``); a local upstream
    may need none."""
    upstream_api: UpstreamApi = "chat"
    """What the upstream speaks: chat completions (every OpenAI-compatible server), the
    Responses API (OpenAI: reasoning items and their encrypted content round-trip), or
    Anthropic's Messages API (thinking blocks and their signatures round-trip)."""
    upstream_timeout: float = 60.0
    """Seconds one upstream attempt may take."""
    upstream_max_retries: int = 1
    """The SDK's retries of an upstream call (429, 5xx, timeouts) before the error is returned:
    a request waits at most ``upstream_timeout x (upstream_max_retries + 1)`` for its upstream
    (120 s by default; with 2 retries a hung upstream held a request 183 s)."""
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    """Models, the default system prompt, the memory's settings."""
    profiles: Sequence[Profile] = ()
    """The profiles served (``X-Profile``, or a request's ``model`` naming one)."""
    agent_memory: AgentMemoryConfig | None = None
    """The agent-editable working memory; None: no working-memory tools or endpoints."""
    require_keys: bool = False
    """True: every request needs an API key even while the database has none. False: with no
    key in the database, the local tenant is served on loopback only."""
    max_body_bytes: int = 32 * 1024 * 1024
    """A larger request body is refused with 413 before it is read."""
    mcp_user: str = "default"
    """The user whose working memory an MCP request at ``/mcp`` edits when it sends no
    ``X-User-Id`` header (MCP clients send no user of their own)."""
    recall_ratio: float | None = None
    """The memory's `recall_ratio` for every call, whatever the upstream's settings (the local
    model's included); None leaves the gateway's own (off unless it sets one)."""
    local_model_path: str | None = None
    """Another GGUF file for the local model, when no upstream is configured; None:
    SmolLM2-135M-Instruct (`from_env` reads ``WORKINGMEM_LOCAL_MODEL`` into it)."""
    local_model_sha256: str | None = None
    """The SHA-256 `local_model_path` must have, checked before it is loaded (None: not
    checked; `from_env` reads ``WORKINGMEM_LOCAL_MODEL_SHA256`` into it)."""
    tune_gc: bool = False
    """True: the process is the server's alone (``workingmem serve`` sets it), so once started
    it sets what startup built out of the garbage collector's reach and collects the young
    generation less often (`workingmem.service.collector`). False leaves the collector of a
    process the app shares as it is."""

    def __post_init__(self) -> None:
        if self.recall_ratio is not None and not 0 <= self.recall_ratio < 1:
            raise ValidationError(
                "recall_ratio", f"must be at least 0 and below 1, got {self.recall_ratio}"
            )
        if self.upstream_api not in get_args(UpstreamApi):
            raise ValidationError(
                "upstream_api",
                f"must be 'chat', 'responses' or 'anthropic', got {self.upstream_api!r}",
            )

    @classmethod
    def from_env(cls) -> ServiceSettings:
        """The settings in ``WORKINGMEM_SERVICE_SETTINGS`` (else the defaults), with the
        database, the upstream and the local model's file from the environment where they
        leave them unset."""
        written = os.environ.get(SETTINGS_ENV)
        settings = cls.from_json(written) if written else cls()
        env_url, env_key = upstream_env(settings.upstream_api)
        local_path, local_sha256 = settings.local_model_path, settings.local_model_sha256
        if local_path is None:  # the file and its hash go together
            local_path = os.environ.get(LOCAL_MODEL_ENV) or None
            local_sha256 = os.environ.get(LOCAL_MODEL_SHA256_ENV) or None
        return replace(
            settings,
            database_url=settings.database_url or os.environ.get("WORKINGMEM_DATABASE_URL") or None,
            upstream_base_url=settings.upstream_base_url or env_url,
            upstream_api_key=settings.upstream_api_key or env_key,
            local_model_path=local_path,
            local_model_sha256=local_sha256,
        )

    def to_json(self) -> str:
        """These settings as JSON, for another process's `from_json`; without the upstream's
        key (a secret is not copied around: the other process reads ``OPENAI_API_KEY``).

        Raises:
            ValidationError: the agent memory's schema is a Pydantic class (give its JSON
                Schema instead, which can travel).
        """
        agent: dict[str, Any] | None = None
        if self.agent_memory is not None:
            memory = self.agent_memory
            if isinstance(memory.schema, type):
                raise ValidationError(
                    "agent_memory.schema",
                    "a Pydantic class cannot be handed to another process: give its JSON Schema "
                    "(Model.model_json_schema())",
                )
            agent = {
                "enabled": memory.enabled,
                "template": memory.template,
                "schema": None if memory.schema is None else dict(memory.schema),
                "scope": memory.scope,
                "max_chars": memory.max_chars,
                "keep_versions": memory.keep_versions,
            }
        return json.dumps(
            {
                "database_url": self.database_url,
                "upstream_base_url": self.upstream_base_url,
                "upstream_api": self.upstream_api,
                "upstream_timeout": self.upstream_timeout,
                "upstream_max_retries": self.upstream_max_retries,
                "gateway": self.gateway.model_dump(mode="json"),
                "profiles": [profile.model_dump(mode="json") for profile in self.profiles],
                "agent_memory": agent,
                "require_keys": self.require_keys,
                "max_body_bytes": self.max_body_bytes,
                "mcp_user": self.mcp_user,
                "recall_ratio": self.recall_ratio,
                "local_model_path": self.local_model_path,
                "local_model_sha256": self.local_model_sha256,
                "tune_gc": self.tune_gc,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ServiceSettings:
        """The settings `to_json` wrote (the upstream's key unset).

        Raises:
            ValidationError: the text is not such settings.
        """
        try:
            data = json.loads(text)
            agent = data.pop("agent_memory")
            return cls(
                **{
                    **data,
                    "gateway": GatewayConfig.model_validate(data["gateway"]),
                    "profiles": tuple(Profile.model_validate(p) for p in data["profiles"]),
                    "agent_memory": None if agent is None else AgentMemoryConfig(**agent),
                }
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError(
                SETTINGS_ENV, f"not service settings written by to_json: {exc}"
            ) from exc
