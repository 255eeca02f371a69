"""The app factory: the memory gateway as a FastAPI app.

    app = create_app(ServiceSettings(database_url="memory.db",
                                     upstream_base_url="http://127.0.0.1:8000/v1"))
    uvicorn.run(app, host="127.0.0.1", port=8080)

    async with Gateway(store=store, llm=client) as gateway:   # a host's (or a test's) gateway
        app = create_app(settings, gateway=gateway)

Several worker processes (``workingmem serve --workers N``) each build their own app: uvicorn
imports ``workingmem.service:create_app`` as a factory and calls it with no settings, so each
reads them from the environment, where the parent wrote them (`ServiceSettings.to_json` in
``WORKINGMEM_SERVICE_SETTINGS``). They share the database; what must happen once per thread
across them (one ask at a time, one memory update at a time) is held by the store's leases.

The lifespan owns what the app builds: it opens the store (migrating it), builds the `Gateway`
over the upstream (`workingmem.embedded.choose_upstream`: the configured OpenAI-compatible one,
else the local model), and starts its background queue; on shutdown it drains
the queue (every pending memory update runs), then closes the client and the store. A gateway
passed in is the host's: the app starts its queue and closes nothing. In a process of its own
(`ServiceSettings.tune_gc`), once started, it tunes the garbage collector (`collector`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from .. import __version__
from ..embedded import choose_upstream
from ..errors import ValidationError
from ..gateway import Gateway
from ..gateway_config import Profiles
from ..llm.openai_client import aiohttp_available
from ..stores import open_store
from ..stores.keys import ApiKeyStore
from .collector import tune_for_serving
from .errors import install_error_handlers
from .limits import BodyLimitMiddleware
from .metrics import Metrics, MetricsMiddleware
from .openapi import publish
from .page_security import PageSecurityMiddleware
from .routes import (
    chat,
    conversations,
    messages,
    models,
    ops,
    responses,
    responses_socket,
    stored_completions,
    threads,
    ui,
    working_memory,
)
from .routes import mcp as mcp_route
from .settings import ServiceSettings
from .state import Services

__all__ = ["APP_FACTORY", "create_app"]

APP_FACTORY = "workingmem.service:create_app"
"""The import string of the factory worker processes call (uvicorn's ``factory=True``)."""

logger = logging.getLogger("workingmem.service")

DESCRIPTION = """\
An OpenAI-compatible `/v1/chat/completions` with memory: send only the new message with an
`X-Thread-Id` header, and the model gets the thread's memory. OpenAI's Responses and
Conversations APIs (`/v1/responses`, `/v1/conversations`) and Anthropic's Messages API
(`/v1/messages`) work the same way. REST endpoints show and reset a
thread's memory; `/ui/` shows it in a browser; MCP clients reach a user's working memory at
`/mcp` (streamable HTTP, the same keys, the user from `X-User-Id`).

Every `/v1` request needs `Authorization: Bearer <key>` once the database has an API key
(`workingmem keys create --tenant T`); without keys the server serves one local tenant, on
loopback only. Errors have OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
"""


def create_app(
    settings: ServiceSettings | None = None,
    *,
    gateway: Gateway | None = None,
    keys: ApiKeyStore | None = None,
) -> FastAPI:
    """The service's app.

    Args:
        settings: the configuration; None reads the environment (`ServiceSettings.from_env`).
        gateway: a gateway built by the host; then `settings`' database, upstream, models and
            profiles are not used, and the host closes the gateway.
        keys: where API keys live; None takes the gateway's store (SQLite and PostgreSQL
            stores keep them).
    """
    settings = settings or ServiceSettings.from_env()
    metrics = Metrics()
    app = FastAPI(
        title="workingmem memory gateway",
        version=__version__,
        description=DESCRIPTION,
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    if gateway is not None:
        gateway.add_report_hook(metrics.on_report)
        app.state.services = Services(
            gateway=gateway, keys=_keys_of(gateway, keys), metrics=metrics, settings=settings
        )
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(PageSecurityMiddleware)
    routers = (
        chat,
        stored_completions,
        responses,
        responses_socket,
        conversations,
        messages,
        models,
        threads,
        working_memory,
        ops,
        ui,
    )
    for module in routers:
        app.include_router(module.router)
    app.include_router(threads.deletion)  # last: its path matches every path under a thread
    app.router.routes.append(mcp_route.route)
    if gateway is not None:
        profiles, agent = gateway.profiles, gateway.agent_memory
        agent_config = agent.config if agent is not None else None
    else:
        profiles, agent_config = Profiles(settings.profiles), settings.agent_memory
    app.openapi = publish(  # type: ignore[method-assign]
        app, profiles=(p.id for p in profiles), agent_memory=agent_config
    )
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: ServiceSettings = app.state.settings
    injected = getattr(app.state, "services", None)
    if isinstance(injected, Services):
        injected.gateway.queue.start()
        async with mcp_route.serving(app, injected):
            _started(settings)
            yield
        return
    metrics: Metrics = app.state.metrics
    async with AsyncExitStack() as stack:
        store = await open_store(settings.database_url)
        stack.push_async_callback(store.aclose)
        upstream = choose_upstream(
            base_url=settings.upstream_base_url,
            api_key=settings.upstream_api_key,
            config=settings.gateway,
            timeout=settings.upstream_timeout,
            max_retries=settings.upstream_max_retries,
            http="aiohttp" if aiohttp_available() else "httpx",  # the server extra has it
            api=settings.upstream_api,
            local_model=settings.local_model_path,
            local_model_sha256=settings.local_model_sha256,
        )
        stack.push_async_callback(upstream.aclose)
        logger.info("answering with %s", upstream.description)
        config = upstream.config
        if settings.recall_ratio is not None:
            memory = config.working_memory.model_copy(
                update={"recall_ratio": settings.recall_ratio}
            )
            config = config.model_copy(update={"working_memory": memory})
        gateway = Gateway(
            store=store,
            llm=upstream.client,
            config=config,
            profiles=settings.profiles,
            agent_memory=settings.agent_memory,
            templates=upstream.templates,
            on_report=metrics.on_report,
        )
        await stack.enter_async_context(gateway)  # closing it drains the background queue
        app.state.services = services = Services(
            gateway=gateway, keys=_keys_of(gateway, None), metrics=metrics, settings=settings
        )
        try:
            async with mcp_route.serving(app, services):
                _started(settings)
                yield
        finally:
            del app.state.services


def _started(settings: ServiceSettings) -> None:
    if settings.tune_gc:
        tune_for_serving()


def _keys_of(gateway: Gateway, keys: ApiKeyStore | None) -> ApiKeyStore:
    found = keys if keys is not None else gateway.store
    if not isinstance(found, ApiKeyStore):
        raise ValidationError(
            "keys", "the gateway's store keeps no API keys: pass keys= (an ApiKeyStore)"
        )
    return found
