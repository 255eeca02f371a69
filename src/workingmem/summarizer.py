"""The cheap-model update of summary + facts: one prompt, one call, strict validation.

    summarizer = Summarizer(llm=client, templates=PromptTemplates())
    result = await summarizer.update(summary=old, facts=old_facts, turns=new_turns, caps=caps,
                                     meta=CallMeta(tenant_id="t1", kind=CallKind.MEMORY_WORKING,
                                                   model="gpt-4o-mini", thread_id="th1"))

The model reads the old summary, the old facts and only the new turns, and answers with JSON:
``{"summary": str, "facts": [{"text": str, "first_turn": int, "last_turn": int}],
"remove": [{"text": str, "why": "contradicted" | "obsolete"}]}``: the facts to add or confirm,
and the old facts no longer true. The library applies them (`curation.merge_facts`: an old fact
stays unless removed; repeats are one fact); it never takes a whole new list on trust. Anything
else (not JSON, a wrong shape, an empty summary where there was one, a summary that merely
repeats a fact or the last turn, a summary or facts over their caps, an answer cut at
`max_tokens`) is `InvalidOutputError`: the caller keeps the stored state as it was (R8). A
summary that comes back unchanged although the new turns said something is `stalled`. Nothing
here writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .config import WorkingMemoryConfig
from .curation import Removal, merge_facts, normalized, repeats
from .errors import WorkingMemoryError
from .llm import CallMeta, Completion, LLMClient, LLMError, Usage
from .prompts import PromptKind, PromptTemplates
from .tokens import Tokenizer
from .transcript import render_turns, text_of
from .types import Fact, Turn

__all__ = [
    "Caps",
    "InvalidOutputError",
    "ParsedUpdate",
    "Summarizer",
    "SummaryResult",
    "input_cost",
    "parse_answer",
    "parse_update",
    "render_facts",
    "render_turns",
]

MAX_REMOVALS = 10
"""The most facts one update may remove."""
_WHY = ("contradicted", "obsolete")
_CONTENT_CHARS = 40
"""New turns with fewer characters of text than this say nothing a summary must take in."""

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_PLACEHOLDER = re.compile(r"^\s*<[^<>]*>\s*$")
"""A text that is only ``<something>``: a template's example value, copied, not a memory."""


class InvalidOutputError(WorkingMemoryError):
    """The helper model's answer was not a valid update; nothing was stored."""


@dataclass(frozen=True, slots=True)
class Caps:
    """The limits an update must respect."""

    summary_max_chars: int
    max_facts: int
    fact_max_chars: int

    @classmethod
    def of(cls, config: WorkingMemoryConfig) -> Caps:
        return cls(config.summary_max_chars, config.max_facts, config.fact_max_chars)

    @property
    def max_output_tokens(self) -> int:
        """A bound on the answer's tokens, so that a looping model stops (about 3 characters a
        token for the text, plus the JSON around it)."""
        text = self.summary_max_chars + self.max_facts * (self.fact_max_chars + 40)
        text += MAX_REMOVALS * (self.fact_max_chars + 30)
        return text // 3 + 200


@dataclass(frozen=True, slots=True)
class SummaryResult:
    summary: str
    facts: tuple[Fact, ...]
    """The facts after the update: the old ones merged with the answer's (`merge_facts`)."""
    usage: Usage
    stalled: bool = False
    """The summary came back unchanged although the new turns said something."""
    notes: tuple[str, ...] = ()
    """What of the answer was not applied (a removal naming no fact, facts over the cap)."""


@dataclass(frozen=True, slots=True)
class ParsedUpdate:
    """A helper's answer, validated: what it proposes, before it is applied."""

    summary: str
    facts: tuple[Fact, ...]
    removals: tuple[Removal, ...]


def response_schema(caps: Caps, removable: int = MAX_REMOVALS) -> dict[str, Any]:
    """The JSON schema of an update, for upstreams with structured outputs.

    `removable`: how many old facts there are to remove, so no more removals than that are
    offered (none for a thread without facts): a small model under a grammar otherwise fills
    the removals with inventions, up to its token cap."""
    fact = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "maxLength": caps.fact_max_chars},
            "first_turn": {"type": "integer"},
            "last_turn": {"type": "integer"},
        },
        "required": ["text", "first_turn", "last_turn"],
        "additionalProperties": False,
    }
    removal = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "maxLength": caps.fact_max_chars},
            "why": {"type": "string", "enum": list(_WHY)},
        },
        "required": ["text", "why"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "maxLength": caps.summary_max_chars},
            "facts": {"type": "array", "items": fact, "maxItems": caps.max_facts},
            "remove": {
                "type": "array",
                "items": removal,
                "maxItems": min(removable, MAX_REMOVALS),
            },
        },
        "required": ["summary", "facts", "remove"],
        "additionalProperties": False,
    }


def render_facts(facts: Sequence[Fact]) -> str:
    if not facts:
        return "(none yet)"
    return "\n".join(f"- {_span(fact)}{fact.text}" for fact in facts)


def _span(fact: Fact) -> str:
    if fact.first_turn is None:
        return ""
    if fact.last_turn is None or fact.last_turn == fact.first_turn:
        return f"[turn {fact.first_turn}] "
    return f"[turns {fact.first_turn}-{fact.last_turn}] "


def parse_update(
    text: str, *, caps: Caps, previous_summary: str, last_turn: int
) -> tuple[str, tuple[Fact, ...]]:
    """The summary and facts of the helper's answer (`parse_answer` without its removals)."""
    parsed = parse_answer(text, caps=caps, previous_summary=previous_summary, last_turn=last_turn)
    return parsed.summary, parsed.facts


def parse_answer(text: str, *, caps: Caps, previous_summary: str, last_turn: int) -> ParsedUpdate:
    """Validates the helper's answer; raises InvalidOutputError saying what is wrong.

    Turn numbers outside 1..`last_turn` (or reversed) are dropped, not fatal: the fact is
    still worth keeping, its provenance is not. A fact with an empty text is dropped (it says
    nothing). ``remove`` may be missing (a host's own template that asks for none): nothing is
    removed.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidOutputError(f"the answer is not JSON ({exc.msg} at {exc.pos})") from exc
    if not isinstance(data, dict):
        raise InvalidOutputError(f"the answer is a JSON {type(data).__name__}, not an object")
    summary = data.get("summary")
    if not isinstance(summary, str):
        raise InvalidOutputError("'summary' is missing or not a string")
    summary = summary.strip()
    if _PLACEHOLDER.match(summary):
        raise InvalidOutputError(f"the summary is a placeholder, not a summary: {summary!r}")
    if not summary and previous_summary:
        raise InvalidOutputError("the summary came back empty where there was one")
    if len(summary) > caps.summary_max_chars:
        raise InvalidOutputError(
            f"the summary has {len(summary)} characters; the cap is {caps.summary_max_chars}"
        )
    raw_facts = data.get("facts")
    if not isinstance(raw_facts, list):
        raise InvalidOutputError("'facts' is missing or not a list")
    if len(raw_facts) > caps.max_facts:
        raise InvalidOutputError(f"{len(raw_facts)} facts; the cap is {caps.max_facts}")
    facts = tuple(
        fact
        for i, item in enumerate(raw_facts)
        if (fact := _fact(item, i, caps=caps, last_turn=last_turn)) is not None
    )
    return ParsedUpdate(summary, facts, _removals(data.get("remove", [])))


def _removals(raw: object) -> tuple[Removal, ...]:
    if not isinstance(raw, list):
        raise InvalidOutputError("'remove' is not a list")
    if len(raw) > MAX_REMOVALS:
        raise InvalidOutputError(f"{len(raw)} removals; the cap is {MAX_REMOVALS}")
    removals = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InvalidOutputError(f"remove[{index}] is not an object with a 'text'")
        if item.get("why") not in _WHY:
            raise InvalidOutputError(
                f"remove[{index}].why must be 'contradicted' or 'obsolete', got {item.get('why')!r}"
            )
        removals.append(Removal(item["text"], item["why"]))
    return tuple(removals)


def _fact(item: object, index: int, *, caps: Caps, last_turn: int) -> Fact | None:
    """One fact of the answer; None for an empty one (it says nothing: dropped, not fatal,
    as a small model writes them under a grammar)."""
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, dict):
        raise InvalidOutputError(f"facts[{index}] is not an object")
    text = item.get("text")
    if isinstance(text, str) and not text.strip():
        return None
    if not isinstance(text, str):
        raise InvalidOutputError(f"facts[{index}].text is missing or not a string")
    text = text.strip()
    if _PLACEHOLDER.match(text):
        raise InvalidOutputError(f"facts[{index}] is a placeholder, not a fact: {text!r}")
    if len(text) > caps.fact_max_chars:
        raise InvalidOutputError(
            f"facts[{index}] has {len(text)} characters; the cap is {caps.fact_max_chars}"
        )
    first, last = item.get("first_turn"), item.get("last_turn")
    if not (isinstance(first, int) and _turn_ok(first, last_turn)):
        return Fact(text=text)
    if not (isinstance(last, int) and _turn_ok(last, last_turn)) or last < first:
        last = first
    return Fact(text=text, first_turn=first, last_turn=last)


def input_cost(turn: Turn, tokenizer: Tokenizer) -> int:
    """The tokens one turn adds to a helper's input: its rendering, and the line between."""
    return tokenizer.count_text(render_turns([turn])) + 1


def _turn_ok(value: object, last_turn: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= last_turn


def _carry_content(texts: Sequence[str]) -> bool:
    return sum(len(text.strip()) for text in texts) >= _CONTENT_CHARS


class Summarizer:
    """Runs one update through an LLM client, asking for structured output.

    `structured_output` is ``"json_schema"`` (OpenAI structured outputs; an upstream that
    rejects it with a 400 is asked again with ``"json_object"``, and remembered per model),
    ``"json_object"``, or ``"none"`` (the prompt alone asks for JSON).
    """

    def __init__(
        self,
        *,
        llm: LLMClient,
        templates: PromptTemplates | None = None,
        structured_output: str = "json_schema",
    ) -> None:
        if structured_output not in ("json_schema", "json_object", "none"):
            raise ValueError(f"structured_output: unknown mode {structured_output!r}")
        self.llm = llm
        self.templates = templates or PromptTemplates()
        self.structured_output = structured_output
        self._no_json_schema: set[str] = set()

    def prompt(
        self,
        *,
        summary: str,
        facts: Sequence[Fact],
        turns: Sequence[Turn],
        caps: Caps,
        tenant_id: str,
    ) -> str:
        """The MEMORY_WORKING prompt for these inputs (the tenant's template, if it has one)."""
        return self.templates.render(
            PromptKind.MEMORY_WORKING,
            tenant_id=tenant_id,
            summary=summary or "(none yet)",
            facts=render_facts(facts),
            turns=render_turns(turns),
            summary_max_chars=caps.summary_max_chars,
            max_facts=caps.max_facts,
            fact_max_chars=caps.fact_max_chars,
        )

    async def update(
        self,
        *,
        summary: str,
        facts: Sequence[Fact],
        turns: Sequence[Turn],
        caps: Caps,
        meta: CallMeta,
    ) -> SummaryResult:
        """One helper call; raises InvalidOutputError, LLMError or UsageRefusedError."""
        prompt = self.prompt(
            summary=summary, facts=facts, turns=turns, caps=caps, tenant_id=meta.tenant_id
        )
        completion = await self._call(prompt, caps, meta, removable=len(facts))
        if completion.finish_reason == "length":
            raise InvalidOutputError("the answer was cut at max_tokens")
        last_turn = max((t.seq or 0) for t in turns) if turns else 0
        parsed = parse_answer(
            completion.text, caps=caps, previous_summary=summary, last_turn=last_turn
        )
        merged, notes = merge_facts(facts, parsed.facts, parsed.removals, max_facts=caps.max_facts)
        said = [text_of(t.content) for t in turns if t.role != "tool"]
        if repeats(parsed.summary, [*(fact.text for fact in merged), *said[-1:]]):
            raise InvalidOutputError(
                f"the summary merely repeats a fact or the last turn: {parsed.summary[:80]!r}"
            )
        stalled = bool(summary) and normalized(parsed.summary) == normalized(summary)
        return SummaryResult(
            summary=parsed.summary,
            facts=merged,
            usage=completion.usage,
            stalled=stalled and _carry_content(said),
            notes=tuple(notes),
        )

    async def _call(self, prompt: str, caps: Caps, meta: CallMeta, *, removable: int) -> Completion:
        mode = self.structured_output
        if mode == "json_schema" and meta.model in self._no_json_schema:
            mode = "json_object"
        try:
            return await self._complete(prompt, caps, meta, mode, removable)
        except LLMError as exc:
            if mode != "json_schema" or exc.status_code != 400:
                raise
            self._no_json_schema.add(meta.model)
            return await self._complete(prompt, caps, meta, "json_object", removable)

    async def _complete(
        self, prompt: str, caps: Caps, meta: CallMeta, mode: str, removable: int
    ) -> Completion:
        response_format: dict[str, Any] | None = None
        if mode == "json_schema":
            response_format = {
                "type": "json_schema",
                "json_schema": {
                    "name": "memory_update",
                    "schema": response_schema(caps, removable),
                },
            }
        elif mode == "json_object":
            response_format = {"type": "json_object"}
        return await self.llm.complete(
            model=meta.model,
            messages=[{"role": "user", "content": prompt}],
            meta=meta,
            max_tokens=caps.max_output_tokens,
            temperature=0.0,
            response_format=response_format,
        )
