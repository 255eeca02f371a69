"""``GET /v1/models``: what a request's ``model`` may name, as OpenAI lists models.

Many OpenAI-compatible tools ask for it first (to fill a model picker, or to check a key).
The list: the profiles this gateway serves (a request that names one is answered under it),
then the upstream models it knows (its default, its cheap model, the ones it has windows
for). A model not listed is still passed to the upstream as it is.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

from ..auth import Tenant
from ..errors import ApiError
from ..state import get_services
from . import ERRORS

__all__ = ["router"]

router = APIRouter(tags=["models"], responses=ERRORS)


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str
    """``workingmem`` for a profile, ``upstream`` for a model the upstream serves."""


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


def _models(request: Request) -> list[ModelOut]:
    gateway = get_services(request).gateway
    config = gateway.config
    listed = [ModelOut(id=profile.id, owned_by="workingmem") for profile in gateway.profiles]
    upstream = (
        [config.fixed_model]
        if config.fixed_model
        else [config.default_model, config.cheap_model, *config.models]
    )
    seen = {model.id for model in listed}
    for model_id in upstream:
        if model_id not in seen:
            seen.add(model_id)
            listed.append(ModelOut(id=model_id, owned_by="upstream"))
    return listed


@router.get("/v1/models", summary="The profiles and models a request may name")
async def list_models(request: Request, tenant: Tenant) -> ModelList:
    return ModelList(data=_models(request))


@router.get("/v1/models/{model:path}", summary="One profile or model")
async def get_model(request: Request, tenant: Tenant, model: str) -> ModelOut:
    for found in _models(request):
        if found.id == model:
            return found
    raise ApiError(
        404, f"no model {model!r} is listed here", code="model_not_found", type="not_found_error"
    )
