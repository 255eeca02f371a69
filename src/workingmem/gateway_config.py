"""The gateway's platform defaults and profile resolution.

    config = GatewayConfig(default_model="gpt-4o", cheap_model="gpt-4o-mini",
                           models={"gpt-4o": ModelInfo(id="gpt-4o", context_window=128_000)})
    profiles = Profiles([Profile(id="support", system_prompt="You help with orders.\\n{memory}")])

A profile says what it needs; where it is silent, the platform defaults apply: the model, the
cheap model for helper calls (R10), the system prompt, the output reserve.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from pydantic import ConfigDict, Field

from .config import Profile, WorkingMemoryConfig
from .context import DEFAULT_SYSTEM_PROMPT, output_reserve
from .errors import ValidationError
from .memory import WorkingMemoryProtocol
from .types import ModelInfo, Settings

__all__ = ["DEFAULT_PROFILE_ID", "CallPlan", "GatewayConfig", "Overrides", "Profiles"]

DEFAULT_PROFILE_ID = "default"


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What one call's settings resolve to, worked out once: the assembler, the answer, the
    background update and the routes all take it, so they cannot disagree."""

    profile: Profile
    """The profile the call runs under."""
    model: ModelInfo
    """The answering model."""
    cheap_model: ModelInfo
    """The model of the call's helper calls (its tokenizer cuts the summary's chunks)."""
    system_prompt: str
    """The system prompt template; ``{memory}`` receives the memory."""
    output_reserve_tokens: int
    """The tokens kept for the answer (and its cap)."""
    memory: WorkingMemoryConfig
    """The built-in thread memory's settings under this profile."""


class GatewayConfig(Settings):
    """Platform defaults for every profile.

    Defaults: answering and cheap model ``gpt-4o-mini``; a model not listed in `models` gets
    a 128,000-token window; at most 4 rounds of agent-memory tool calls per answer.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_model: str = Field(default="gpt-4o-mini", min_length=1)
    """The answering model when a profile names none."""
    cheap_model: str = Field(default="gpt-4o-mini", min_length=1)
    """The model for helper calls (summaries, query rewrites) when a profile names none."""
    models: dict[str, ModelInfo] = Field(default_factory=dict)
    """What the gateway knows of each model: window, output reserve, tokenizer."""
    default_context_window: int = Field(default=128_000, gt=0)
    """The window of a model not listed in `models`."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    """The system prompt template when a profile has none; ``{memory}`` receives the memory."""
    busy_wait_seconds: float = Field(default=60.0, gt=0, le=3600)
    """How long an ask waits for the thread's earlier ask to be answered before it is a
    `ConflictError` (409): one ask at a time per thread, across processes."""
    max_tool_rounds: int = Field(default=4, ge=0, le=32)
    """How many rounds of agent-memory tool calls (spec 003's three tools) one answer may take."""
    max_inline_file_bytes: int = Field(default=24 * 2**20, gt=0)
    """The base64 of the files (images, documents, recordings) one upstream request carries,
    at most: walking back from the question, an older message's files are named instead of
    resent once the newer ones' pass it (the providers refuse a request of more than about
    32 MB). The question's own files always go."""
    working_memory: WorkingMemoryConfig = Field(default_factory=WorkingMemoryConfig)
    """The thread memory's settings (spec 000/001: the built-in WorkingMemory's strategy,
    window, summary); a profile's `working_memory` overrides them. Agent memory (spec 003)
    is the gateway's `agent_memory`, not this."""
    fixed_model: str | None = Field(default=None, min_length=1)
    """When set, every call goes to this model, whatever a request or a profile names: an
    embedded model that can serve nothing else (the local model). Answers name it."""

    def answering_model(self, requested: str | None = None, profile: str | None = None) -> str:
        """The model that answers: the fixed model, else the request's, the profile's, the
        default."""
        return self.fixed_model or requested or profile or self.default_model

    def helper_model(self, profile: str | None = None) -> str:
        """The cheap model of helper calls: the fixed model, else the profile's, the default."""
        return self.fixed_model or profile or self.cheap_model

    def plan(
        self,
        profile: Profile,
        *,
        model: str | None = None,
        system_prompt: str | None = None,
        max_tokens: int | None = None,
    ) -> CallPlan:
        """One call's settings: the request's `model`, `system_prompt` and `max_tokens` (the
        answer's cap, so the output reserve) over the profile's, over these defaults."""
        answering = self.model_info(self.answering_model(model, profile.model_id))
        reserve = output_reserve(max_tokens, profile, answering)
        return CallPlan(
            profile=profile,
            model=answering,
            cheap_model=self.model_info(self.helper_model(profile.cheap_model_id)),
            system_prompt=system_prompt or profile.system_prompt or self.system_prompt,
            output_reserve_tokens=reserve,
            memory=profile.resolve(self.working_memory),
        )

    def model_info(self, model_id: str) -> ModelInfo:
        """The model's info; a model not listed gets the default window."""
        known = self.models.get(model_id)
        if known is not None:
            return known
        return ModelInfo(id=model_id, context_window=self.default_context_window)


class Profiles:
    """The profiles a gateway serves, by id; ``default`` always exists."""

    def __init__(self, profiles: Iterable[Profile] | Mapping[str, Profile] = ()) -> None:
        items = profiles.values() if isinstance(profiles, Mapping) else profiles
        self._by_id: dict[str, Profile] = {DEFAULT_PROFILE_ID: Profile(id=DEFAULT_PROFILE_ID)}
        for profile in items:
            self._by_id[profile.id] = profile

    def get(self, profile: Profile | str | None) -> Profile:
        """The profile itself, the one with this id, or the default; ValidationError for an
        unknown id."""
        if isinstance(profile, Profile):
            return profile
        key = DEFAULT_PROFILE_ID if profile is None else profile
        found = self._by_id.get(key)
        if found is None:
            raise ValidationError("profile", f"unknown profile {key!r}")
        return found

    def for_request(
        self, profile: str | None = None, model: str | None = None
    ) -> tuple[Profile, str | None]:
        """The profile and the model override of a request, as the service reads them: a
        named `profile` (a header) wins, with `model` as its model; else a `model` that names
        a profile is that profile (clients can only set the model); else the default profile,
        `model` overriding its model. ValidationError for an unknown named profile."""
        if profile is not None:
            return self.get(profile), model or None
        if model and model != DEFAULT_PROFILE_ID and model in self._by_id:
            return self._by_id[model], None
        return self.get(None), model or None

    def __iter__(self) -> Iterator[Profile]:
        return iter(self._by_id.values())


@dataclass(frozen=True, slots=True)
class Overrides:
    """A host's own implementations of the gateway's parts (R18)."""

    working_memory: WorkingMemoryProtocol | None = None
    """A host's thread memory (WorkingMemory's four methods) in place of the built-in one."""
