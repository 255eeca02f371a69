"""Tools a request's own API layer runs inside an ask, between two calls of the model: the
tools an API says its server runs, where the gateway is that server (a Responses
``tool_search``: `service.tool_search`).

    result = await gateway.ask(..., tools=tools, served=runner)

A call of a served tool does not end the answer as a client's call does: the runner answers it,
the thread stores the call and its result as the client's API says them (`ServedRound.turns`),
and the model is asked again with the tools as they are now (a search loads tools). The
gateway's agent-memory tools run in the same loop, and the same cap on rounds holds for each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .types import MessageIn, NativeItem

__all__ = ["ServedRound", "ServedTools"]


@dataclass(frozen=True, slots=True)
class ServedRound:
    """What a round of served calls made."""

    turns: list[MessageIn | NativeItem]
    """What the thread stores of the round: the calls and their results, in order."""
    tools: list[dict[str, Any]]
    """The client's tools (chat function tools) as the model is offered them from the next
    round on."""


class ServedTools(Protocol):
    """The tools of a request that its API layer runs."""

    def serves(self, name: str) -> bool:
        """Whether a call of the (chat) function `name` is the layer's to run."""
        ...

    def run(self, calls: Sequence[dict[str, Any]], *, text: str) -> ServedRound:
        """Runs the model's `calls` (chat tool calls) of the layer's tools; `text` is what
        the model said with them."""
        ...
