"""``GET /healthz`` and ``GET /metrics``: for load balancers and Prometheus; no key needed
(neither shows anything of a tenant)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from ... import __version__
from ...stores import PooledStore
from ..schemas import Health
from ..state import get_services

__all__ = ["router"]

router = APIRouter(tags=["ops"])


@router.get("/healthz", summary="Liveness, with the database checked")
async def healthz(request: Request) -> Health:
    services = get_services(request)
    await services.keys.has_api_keys()  # one query: the database answers
    return Health(version=__version__, queue_depth=services.gateway.queue.depth)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics",
    responses={200: {"content": {"text/plain": {}}}},
)
async def metrics(request: Request) -> PlainTextResponse:
    services = get_services(request)
    queue = services.gateway.queue
    store = services.gateway.store
    pool = store.pool_stats() if isinstance(store, PooledStore) else None
    body = services.metrics.render(
        queue_depth=queue.depth, queue_failures=queue.failures, pool=pool
    )
    return PlainTextResponse(body, media_type="text/plain; version=0.0.4; charset=utf-8")
