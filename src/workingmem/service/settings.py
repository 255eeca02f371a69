"""What a memory gateway service runs with.

    settings = ServiceSettings(database_url="postgresql://app@db:5432/memory",
                               upstream_base_url="http://127.0.0.1:8000/v1",
                               gateway=GatewayConfig(default_model="qwen2.5-7b"))
    app = create_app(settings)

`ServiceSettings.from_env()` reads the environment: ``WORKINGMEM_DATABASE_URL`` (else the SQLite
file ``.workingmem/memory.db``), ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` for the upstream.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..agent_memory import AgentMemoryConfig
from ..config import Profile
from ..gateway_config import GatewayConfig

__all__ = ["LOCAL_TENANT", "ServiceSettings"]

LOCAL_TENANT = "local"
"""The one tenant a server without API keys serves (the tenant `workingmem demo` writes to)."""


@dataclass(frozen=True)
class ServiceSettings:
    """The service's configuration; every field has a working default."""

    database_url: str | None = None
    """A database URL or a SQLite file path; None: ``WORKINGMEM_DATABASE_URL``, else
    ``.workingmem/memory.db``."""
    upstream_base_url: str | None = None
    """The OpenAI-compatible upstream, ``.../v1``; None: ``OPENAI_BASE_URL``, else OpenAI."""
    upstream_api_key: str | None = None
    """The upstream's key; None: ``OPENAI_API_KEY`` (a local upstream may need none)."""
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
    max_body_bytes: int = 16 * 1024 * 1024
    """A larger request body is refused with 413 before it is read."""

    @classmethod
    def from_env(cls) -> ServiceSettings:
        """The defaults, with the database and the upstream from the environment."""
        return cls(
            database_url=os.environ.get("WORKINGMEM_DATABASE_URL") or None,
            upstream_base_url=os.environ.get("OPENAI_BASE_URL") or None,
            upstream_api_key=os.environ.get("OPENAI_API_KEY") or None,
        )
