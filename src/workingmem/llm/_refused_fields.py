"""The request fields an OpenAI upstream refuses for some of its models, learned from its 400s.

    fields = RefusedFields()
    body = fields.applied(model, body, own_temperature=True)   # what was learned, at once
    body = fields.adapted(model, body, error, own_temperature=True)  # None: not such a refusal

OpenAI's reasoning models (the o-series, GPT-5 and later) refuse ``max_tokens`` ("Use
'max_completion_tokens' instead") and any ``temperature`` but their default; the other models,
and the other OpenAI-compatible servers (vLLM, llama.cpp's, Ollama's), take them. So the
client sends ``max_tokens``, which every server knows, until the upstream refuses it for a
model; from then on that model's requests carry ``max_completion_tokens``. The gateway's own
temperature (its summaries' 0) is left out for a model that refuses it; a client's own is the
client's to change, and the refusal reaches it as it would from the upstream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .base import LLMError

__all__ = ["RefusedFields"]

_MAX_TOKENS = "max_tokens"
_COMPLETION_TOKENS = "max_completion_tokens"
_TEMPERATURE = "temperature"


@dataclass
class RefusedFields:
    """What this upstream refused, by model."""

    completion_tokens: set[str] = field(default_factory=set)
    """The models that take ``max_completion_tokens`` in place of ``max_tokens``."""
    default_temperature: set[str] = field(default_factory=set)
    """The models that take no ``temperature`` but their default."""

    def applied(self, model: str, body: dict[str, Any], *, own_temperature: bool) -> dict[str, Any]:
        """`body` in the words this upstream takes for `model`, as learned so far."""
        if model in self.completion_tokens and _MAX_TOKENS in body:
            body = _renamed(body)
        if own_temperature and model in self.default_temperature and _TEMPERATURE in body:
            body = {key: value for key, value in body.items() if key != _TEMPERATURE}
        return body

    def adapted(
        self, model: str, body: dict[str, Any], error: LLMError, *, own_temperature: bool
    ) -> dict[str, Any] | None:
        """`body` again, without what `error` says the upstream refuses of it for `model`
        (remembered for its next requests); None when `error` is no such refusal."""
        if error.status_code != 400:
            return None
        said = str(error)
        if _MAX_TOKENS in body and f"'{_MAX_TOKENS}'" in said and _COMPLETION_TOKENS in said:
            self.completion_tokens.add(model)
        elif own_temperature and _TEMPERATURE in body and f"'{_TEMPERATURE}'" in said:
            self.default_temperature.add(model)
        else:
            return None
        return self.applied(model, body, own_temperature=own_temperature)


def _renamed(body: dict[str, Any]) -> dict[str, Any]:
    return {(_COMPLETION_TOKENS if key == _MAX_TOKENS else key): v for key, v in body.items()}
