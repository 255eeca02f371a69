"""Configuration: the memory's settings and the profile a call runs under.

    config = WorkingMemoryConfig(strategy=Strategy.SLIDING_WINDOW, chat_history_ratio=0.6)
    profile = Profile(id="support", working_memory=Strategy.SUMMARY_BUFFER)

Both are frozen and validated when built, so a bad setting fails at start-up, not mid-request.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from .types import Settings, Strategy

__all__ = ["DISABLED_WINDOW_TURNS", "Profile", "WorkingMemoryConfig"]

DISABLED_WINDOW_TURNS = 20
"""With memory switched off, load gives at most this many of the newest turns (R2)."""


class WorkingMemoryConfig(Settings):
    """How the built-in WorkingMemory behaves.

    Defaults: enabled; the strategy unset, which resolves to SUMMARY_BUFFER (R1); history gets
    half of the budget; SUMMARY_BUFFER keeps the last 12 turns verbatim and rewrites the summary
    every 6 turns.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    """False switches memory off: load gives the last 20 turns and no notes (R2)."""
    strategy: Strategy | None = None
    """The default strategy; a profile's `working_memory` overrides it; None means
    SUMMARY_BUFFER."""
    chat_history_ratio: float = Field(default=0.5, gt=0.0, le=1.0)
    """The share of `budget_tokens` the verbatim history may take (R4, R6)."""
    recall_ratio: float = Field(default=0.0, ge=0.0, lt=1.0)
    """The share of the history's tokens (`chat_history_ratio` of the budget) kept for turns
    recalled from earlier in the thread: those that share words with the current user turn,
    found by the store's full-text index, shown in the notes under "From earlier in this
    conversation" with their turn numbers and dates. The window takes the rest, and recall
    what the window leaves unused too (SUMMARY_BUFFER's short tail leaves most of it). 0, the
    default, switches recall off: the strategies are then exactly as the spec describes."""
    recall_rewrite: bool = False
    """With recall and SUMMARY_BUFFER's facts: the gateway also searches for the query
    rewriter's standalone query (R19: "Is it vegetarian?" with the facts becomes "vegetarian
    restaurants in Lyon"), one cheap-model call before the answer. Off by default: it adds a
    model call to every request that has facts (`load` itself never calls a model)."""
    window_step_ratio: float = Field(default=0.0, ge=0.0, le=0.5)
    """SLIDING_WINDOW: the share of the window's tokens it may leave unused so that its start
    moves in steps rather than one unit per request, and a provider's prompt cache (a repeated
    prefix, billed at a fraction when byte-identical) keeps the history's start. 0, the
    default, is the longest suffix that fits (R4). The notes come before the history: a recall
    section (which follows the question) changes the prefix anyway."""
    recent_turns: int = Field(default=12, ge=1, le=10_000)
    """SUMMARY_BUFFER: how many of the newest turns the model reads verbatim."""
    update_every_turns: int = Field(default=6, ge=1, le=10_000)
    """SUMMARY_BUFFER: the summary is rewritten once the thread grew by this many turns."""
    summary_max_chars: int = Field(default=4_000, ge=100, le=100_000)
    """SUMMARY_BUFFER: the cap on the summary's length."""
    max_facts: int = Field(default=50, ge=0, le=1_000)
    """SUMMARY_BUFFER: the cap on the number of facts."""
    fact_max_chars: int = Field(default=300, ge=20, le=10_000)
    """SUMMARY_BUFFER: the cap on one fact's length."""
    helper_input_max_tokens: int = Field(default=6_000, ge=200, le=1_000_000)
    """SUMMARY_BUFFER: the most tokens of new turns one helper call reads; a larger backlog is
    folded in chunks, oldest first."""

    @model_validator(mode="after")
    def _no_gap_between_summary_and_tail(self) -> WorkingMemoryConfig:
        # A turn older than the verbatim tail but newer than the summary would reach the
        # model in neither: the summary must be rewritten before the tail moves past a turn.
        if self.update_every_turns > self.recent_turns:
            raise ValueError(
                f"update_every_turns ({self.update_every_turns}) must not exceed recent_turns "
                f"({self.recent_turns}): turns between the summary and the verbatim tail would "
                "reach the model in neither"
            )
        return self


class Profile(Settings):
    """The profile a call runs under: who the assistant is and how it remembers.

    `working_memory` overrides the memory's strategy for this profile (R1): a `Strategy`, or a
    whole `WorkingMemoryConfig` that replaces the memory's own for calls under this profile.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    """The profile's id."""
    working_memory: Strategy | WorkingMemoryConfig | None = None
    """The strategy (or the whole memory configuration) for this profile; None inherits."""
    cheap_model_id: str | None = None
    """The model for helper calls (summaries); None takes the platform default."""
    system_prompt: str | None = None
    """The system prompt template; its ``{memory}`` slot receives the memory."""
    model_id: str | None = None
    """The answering model; None takes the platform default."""
    output_reserve_tokens: int | None = Field(default=None, gt=0)
    """Tokens reserved for the answer; None takes the model's `max_output_tokens`."""
    history: Literal["memory", "client"] = "memory"
    """What the model reads of the conversation: ``memory`` (the thread's window and notes:
    what bounds a long conversation's cost), or ``client``: the history the client sent, as
    it sent it (a coding agent whose prompt cache or reasoning items must reach the model
    untouched). Either way the turns are stored and the memory updated."""
    client_history_memory: bool = False
    """With ``history="client"``: also put the thread's memory (the agent memory and its
    tools, the notes) in the client's system message. Off, the request is the client's own."""

    def resolve(self, config: WorkingMemoryConfig) -> WorkingMemoryConfig:
        """The configuration a call under this profile runs with, and its strategy (R1)."""
        chosen = config
        if isinstance(self.working_memory, WorkingMemoryConfig):
            chosen = self.working_memory
        strategy = chosen.strategy or Strategy.SUMMARY_BUFFER
        if isinstance(self.working_memory, Strategy):
            strategy = self.working_memory
        if chosen.strategy is strategy:
            return chosen
        return chosen.model_copy(update={"strategy": strategy})
