"""The memory gateway service: an OpenAI-compatible endpoint with memory, REST, a web page.

    from workingmem.service import ServiceSettings, create_app

    app = create_app(ServiceSettings(upstream_base_url="http://127.0.0.1:8000/v1"))
    # uvicorn.run(app, host="127.0.0.1", port=8080), or: workingmem serve

Needs the ``server`` extra (FastAPI, uvicorn, Jinja2). Modules: `app` (the factory and its
lifespan), `settings`, `state` and `auth` (API key → tenant), `errors` (the one table of
library errors → HTTP), `schemas` (the HTTP shapes), `turns` (a request as new turns), `sse`
(streaming), `metrics`, `limits`, and `routes/` (chat, threads, working memory, ops, the page).
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
    import jinja2  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the workingmem service needs the server extra: pip install 'workingmem[server]'"
    ) from exc

from .app import create_app
from .settings import LOCAL_TENANT, ServiceSettings

__all__ = ["LOCAL_TENANT", "ServiceSettings", "create_app"]
