"""What the gateway gives back: an ask's result, its answer as a stream, what it remembers of
a thread and what a reset forgot.

    result = await gateway.ask(tenant_id="t1", thread_id="th1", message="And in May?")
    result.answer, result.usage, result.turns
    stream = gateway.ask_stream(tenant_id="t1", thread_id="th1", message="And in May?")
    async for text in stream: ...
    stream.result                                   # the AskResult, once the stream has ended
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .context import AssembledContext, AssemblyWarning
from .llm import NativeEvent, TextDelta, Usage
from .tokens._recent import counting_for
from .types import Strategy, Thread, Turn, WorkingMemoryState

__all__ = ["AnswerStream", "AskResult", "ResetResult", "ThreadMemory"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class AskResult:
    """What one `ask` produced."""

    answer: str
    """The stored answer (the reviewed text, when a review edited it)."""
    usage: Usage
    """The answering model's tokens, over every round of the call."""
    warnings: list[AssemblyWarning]
    context: AssembledContext
    """The last request sent upstream, with what each part cost."""
    turns: list[Turn]
    """The turns this call stored: the user turn, tool rounds, the answer."""
    model: str
    tool_rounds: int = 0
    reviewed: bool = False
    finish_reason: str = "stop"
    """The upstream's reason for ending the answer (``length`` when cut at max_tokens,
    ``tool_calls`` when it called the client's tools)."""
    tool_calls: tuple[dict[str, Any], ...] = ()
    """The calls of the client's own tools (`ask`'s `tools`) the model made, in OpenAI's
    format: the client runs them and sends their results in its next request. The gateway's
    agent-memory calls never appear here: it runs them itself."""
    thread_id: str = ""
    """The thread answered: the one asked for, or the conversation found (`ask` without a
    thread id)."""
    response: dict[str, Any] | None = None
    """The upstream's last response as it came (every choice, logprobs, fields the gateway
    does not know), when the client gives it (`Completion.raw`); for a service that hands it
    on. Its first choice is what was stored."""
    input_seq: int = 0
    """The seq of the turn answered: the request's last turn as stored (the answer's turns
    follow it)."""
    logprobs: tuple[dict[str, Any], ...] | None = None
    """The answer's tokens with their log probabilities, in the chat API's shape, when the
    request asked for them and the upstream gave them (`Completion.logprobs`)."""
    answered_by: str | None = None
    """The model that answered, as the upstream named it (`Completion.model`: a snapshot's
    id, where `model` is the id asked for); None when no model answered."""


@dataclass(frozen=True, slots=True)
class ResetResult:
    """What `Gateway.reset_thread_memory` forgot."""

    thread_id: str
    summary_cleared: bool = True
    """The thread memory's summary and facts are gone (always: a reset is a forget)."""
    agent_memory_cleared: bool = False
    """The conversation's agent memory (spec 003) and its versions were erased too."""

    @property
    def working_memory_cleared(self) -> bool:
        """`agent_memory_cleared`, by the name spec 003's REST field gives it."""
        return self.agent_memory_cleared


@dataclass(frozen=True, slots=True)
class ThreadMemory:
    """What the gateway remembers of a thread, for a "what do you remember" page."""

    thread: Thread
    strategy: Strategy | None
    """The strategy the profile resolves to; None when memory is switched off."""
    state: WorkingMemoryState
    notes: str
    """The notes as the model sees them now ("" under SLIDING_WINDOW)."""
    versions: list[WorkingMemoryState]
    """The summary's versions, newest first."""
    agent_memory: str | None
    """The agent memory the model reads with this thread (spec 003: the conversation's, or
    its user's), if any."""
    window_tokens: int | None
    """The tokens of the next request's history window; None if it cannot be assembled."""
    budget_tokens: int | None

    @property
    def working_memory(self) -> str | None:
        """`agent_memory`, by the name spec 003 gives the document ("working memory")."""
        return self.agent_memory


class AnswerStream:
    """The answer's text as it arrives; `result` once the stream has ended.

    The answer is stored once the stream ends; a consumer that stops early (a client that
    disconnected) leaves the thread as it was before the answer: no half answer is stored.
    Iterating it gives the text; `deltas` the text with its tokens' log probabilities, when
    the request asked for them; `events` also gives the upstream's own events that text
    cannot carry (`NativeEvent`: a thinking block), for a client that speaks its API.
    """

    def __init__(
        self,
        chunks: AsyncGenerator[TextDelta | NativeEvent, None],
        *,
        tenant_id: str | None = None,
    ) -> None:
        self._chunks = chunks
        self._tenant_id = tenant_id
        self.result: AskResult | None = None
        self.thread_id: str | None = None
        """The thread answered, once the stream has begun (a conversation found without
        an id has one only then)."""
        self.model: str | None = None
        """The model that answers, as the upstream's stream names it, once a piece said
        so (None from an upstream that names none)."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        return (await self._next_delta()).text

    def deltas(self) -> AsyncIterator[TextDelta]:
        """The text's pieces with their tokens' log probabilities (`TextDelta`)."""
        return _Pieces(self._next_delta)

    def events(self) -> AsyncIterator[str | NativeEvent]:
        """The text and the upstream's `NativeEvent`, in the order they came."""
        return _Pieces(self._next_event)

    def pieces(self, format: str) -> AsyncIterator[TextDelta | NativeEvent]:
        """The text's pieces (`TextDelta`) and the upstream's events in `format`, in the order
        they came: for a client that speaks the upstream's API, which passes them on."""
        return _Pieces(lambda: self._next_piece(format))

    async def _next_event(self) -> str | NativeEvent:
        piece = await self._step()
        return piece.text if isinstance(piece, TextDelta) else piece

    async def _next_piece(self, format: str) -> TextDelta | NativeEvent:
        while True:
            piece = await self._step()
            if isinstance(piece, TextDelta) or piece.format == format:
                return piece

    async def _next_delta(self) -> TextDelta:
        while True:
            piece = await self._step()
            if isinstance(piece, TextDelta):
                return piece

    async def _step(self) -> TextDelta | NativeEvent:
        """The next piece, made in the tenant's counting scope (whatever task asks for it)."""
        if self._tenant_id is None:
            piece = await anext(self._chunks)
        else:
            with counting_for(self._tenant_id):
                piece = await anext(self._chunks)
        if piece.model is not None:
            self.model = piece.model
        return piece

    async def aclose(self) -> None:
        await self._chunks.aclose()


class _Pieces(Generic[T]):
    """An iterator over the one stream (`AnswerStream.deltas`, `.events`): each piece as the
    stream's `step` gives it; closing the stream is the stream's own."""

    def __init__(self, step: Callable[[], Awaitable[T]]) -> None:
        self._step = step

    def __aiter__(self) -> _Pieces[T]:
        return self

    async def __anext__(self) -> T:
        return await self._step()
