"""JSON Schema -> llama.cpp grammar (GBNF), for the local model's structured output.

    grammar = schema_grammar({"type": "object", "properties": {...}, "required": [...]})

Written here for the schemas structured outputs use, because llama-cpp-python's own converter
writes ``maxLength: 4000`` as 4,000 nested groups (which llama.cpp refuses) and lets raw control
characters into strings (which `json.loads` refuses). Other schemas go to its converter.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import jsonschema.exceptions

from ._text import shortened
from .base import LLMError

__all__ = ["cached_grammar", "schema_grammar"]

_MAX_REPETITION = 1000
"""The largest ``{m,n}`` count written: llama.cpp rejects 2,000 and more."""
_BLOCK = 100
"""A long run (of characters, of items) is written as blocks of this many (see `repeated`)."""
_MAX_COUNT = 100_000
"""The largest length or item count written (a thousand rules); more than the local model
writes in any answer (its context is at most 8,192 tokens)."""


def schema_grammar(schema: dict[str, Any]) -> str:
    """The GBNF grammar of the JSON that `schema` allows; ``{}`` allows any JSON object.

    Written here for the schemas structured outputs use (OpenAI's strict subset: objects
    whose properties are all required, arrays with ``minItems`` / ``maxItems``, strings with
    ``minLength`` / ``maxLength``, numbers, booleans, null, ``enum``, ``const``, ``anyOf``),
    because llama-cpp-python's converter gets two things wrong for us: it writes
    ``maxLength: 4000`` as 4,000 nested groups, which llama.cpp refuses to parse (no count
    over 2,000), and it lets raw control characters into strings, which `json.loads` refuses.
    Here a long string or array is a chain of blocks, and string characters are JSON's; a
    schema is checked to be JSON Schema first, and one no value satisfies is refused. Any other
    schema (``$ref``, optional properties, ``pattern``, ...) goes to llama-cpp-python's
    converter as it is.

    Raises:
        LLMError: status 400, for a schema that is not valid JSON Schema, that no JSON value
            satisfies (an empty ``enum``, ``minLength`` over ``maxLength``, ...), or that
            neither converter can follow.
    """
    _check_schema(schema)
    try:
        return _Grammar().build(schema or {"type": "object"})
    except _UnsupportedSchemaError:
        pass
    except _RefusedSchemaError as exc:
        raise LLMError(
            f"the local model cannot answer under this JSON schema: {exc}", status_code=400
        ) from None
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return str(json_schema_to_gbnf(json.dumps(schema)))
    except Exception as exc:  # its converter asserts, raises ValueError, KeyError, ...
        raise LLMError(
            f"the local model cannot follow this JSON schema: {shortened(repr(exc))}",
            status_code=400,
        ) from exc


def _check_schema(schema: dict[str, Any]) -> None:
    """A 400 naming the place of the first error, for a schema that is not JSON Schema (the
    converters would write a grammar of what they guess it means)."""
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        raise LLMError(
            f"the JSON schema is not valid: {shortened(exc.message)} at #/{where}", status_code=400
        ) from None


class _UnsupportedSchemaError(Exception):
    """A schema feature `_Grammar` does not write."""


class _RefusedSchemaError(Exception):
    """A schema no answer of the local model satisfies (none at all, or none it can write):
    any grammar of it would be a guess."""


def _unsatisfiable(why: str) -> _RefusedSchemaError:
    return _RefusedSchemaError(f"no JSON value satisfies it: {why}")


_PRIMITIVES: dict[str, tuple[str, tuple[str, ...]]] = {
    "space": ('" "?', ()),
    "char": (r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})', ()),
    "string": (r'"\"" char* "\"" space', ("char", "space")),
    "integer": ('"-"? ([0-9] | [1-9] [0-9]{0,15}) space', ("space",)),
    "number": (
        '"-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space',
        ("space",),
    ),
    "boolean": ('("true" | "false") space', ("space",)),
    "null": ('"null" space', ("space",)),
    "value": (
        "object | array | string | number | boolean | null",
        ("object", "array", "string", "number", "boolean", "null"),
    ),
    "object": (
        '"{" space (string ":" space value ("," space string ":" space value)*)? "}" space',
        ("string", "value", "space"),
    ),
    "array": ('"[" space (value ("," space value)*)? "]" space', ("value", "space")),
}
"""GBNF rules of JSON's primitives, with the rules each one uses."""


class _Grammar:
    """Writes a schema's grammar rule by rule; `_UnsupportedSchemaError` for what it cannot."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def build(self, schema: dict[str, Any]) -> str:
        root = self.visit(schema, "root")
        if root != "root":
            self.rules["root"] = root
        return "\n".join(f"{name} ::= {body}" for name, body in self.rules.items())

    def visit(self, schema: object, name: str) -> str:
        """The name of the rule for `schema`, added with the rules it needs."""
        if schema is True:
            return self.primitive("value")
        if schema is False:
            raise _unsatisfiable("a false schema")
        if not isinstance(schema, dict):
            raise _UnsupportedSchemaError(f"schema {schema!r}")
        if "const" in schema:
            return self.rule(name, _literal(schema["const"]) + " space", "space")
        if "enum" in schema:
            values = schema["enum"]
            if not values:
                raise _unsatisfiable("an empty enum")
            return self.rule(name, " | ".join(_literal(v) for v in values) + " space", "space")
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                return self.rule(
                    name,
                    " | ".join(self.visit(s, f"{name}-{i}") for i, s in enumerate(options)),
                )
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.rule(
                name, " | ".join(self.visit({**schema, "type": t}, f"{name}-{t}") for t in kind)
            )
        known = {
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
            "title",
            "description",
        }
        if not set(schema) <= known:
            raise _UnsupportedSchemaError(", ".join(sorted(set(schema) - known)))
        if kind == "object":
            if schema.get("properties"):
                return self.object(schema, name)
            if schema.get("additionalProperties") is False:
                return self.rule(name, '"{" space "}" space', "space")
            return self.primitive("object")
        if kind == "array" and "items" in schema:
            return self.array(schema, name)
        if kind == "string" and ("minLength" in schema or "maxLength" in schema):
            return self.string(schema, name)
        if kind is None:
            return self.primitive("value")
        return self.primitive(str(kind))  # the schema is checked: one of JSON's types

    def object(self, schema: dict[str, Any], name: str) -> str:
        properties = schema["properties"]
        if not isinstance(properties, dict) or set(schema.get("required", ())) != set(properties):
            raise _UnsupportedSchemaError("optional properties")  # OpenAI's strict mode has none
        pairs = [
            f'{_literal(key)} space ":" space {self.visit(value, f"{name}-{_rule_name(key)}")}'
            for key, value in properties.items()
        ]
        self.primitive("space")
        return self.rule(name, '"{" space ' + ' "," space '.join(pairs) + ' "}" space')

    def array(self, schema: dict[str, Any], name: str) -> str:
        low, high = _bounds(schema, "minItems", "maxItems")
        self.primitive("space")
        if high == 0 or schema["items"] is False:
            if low:
                raise _unsatisfiable(f"minItems {low} of items that cannot be")
            return self.rule(name, '"[" space "]" space')
        item = self.visit(schema["items"], f"{name}-item")
        more = self.repeated(
            f'"," space {item}',
            max(low - 1, 0),
            None if high is None else high - 1,
            f"{name}-more",
        )
        items = f"{item} {more}".strip()
        return self.rule(name, f'"[" space {items if low else f"({items})?"} "]" space')

    def string(self, schema: dict[str, Any], name: str) -> str:
        low, high = _bounds(schema, "minLength", "maxLength")
        char = self.primitive("char")
        self.primitive("space")
        chars = self.repeated(char, low, high, f"{name}-chars")
        return self.rule(name, rf'"\"" {chars} "\"" space')

    def repeated(self, unit: str, low: int, high: int | None, name: str) -> str:
        """`unit` `low` to `high` times (None: no limit), with no repetition count over
        llama.cpp's limit: a long run is a chain of rules of `_BLOCK` each."""
        blocks, rest = divmod(low, _BLOCK) if low > _MAX_REPETITION else (0, low)
        head = [_repeat(unit, _BLOCK, _BLOCK)] * blocks + [_repeat(unit, rest, rest)]
        more = None if high is None else high - low
        if more is None or more <= _MAX_REPETITION:
            tail = _repeat(unit, 0, more)
        else:  # chain_1 = 0..B+r units; chain_k = 0..B-1 units, or B then chain_(k-1)
            blocks, rest = divmod(more, _BLOCK)
            tail = self.rule(f"{name}-1", _repeat(unit, 0, _BLOCK + rest))
            for level in range(2, blocks + 1):
                tail = self.rule(
                    f"{name}-{level}",
                    f"{_repeat(unit, 0, _BLOCK - 1)} | {_repeat(unit, _BLOCK, _BLOCK)} {tail}",
                )
        return " ".join(part for part in [*head, tail] if part)

    def primitive(self, name: str) -> str:
        body, needs = _PRIMITIVES[name]
        if name not in self.rules:
            self.rules[name] = body
            for need in needs:
                self.primitive(need)
        return name

    def rule(self, name: str, body: str, *needs: str) -> str:
        for need in needs:
            self.primitive(need)
        unique, n = name, 1
        while unique in self.rules or unique in _PRIMITIVES:
            unique, n = f"{name}{n}", n + 1
        self.rules[unique] = body
        return unique


def _bounds(schema: dict[str, Any], low_key: str, high_key: str) -> tuple[int, int | None]:
    low, high = int(schema.get(low_key, 0)), schema.get(high_key)  # checked: ints >= 0
    if high is not None and high < low:
        raise _unsatisfiable(f"{low_key} {low} is over {high_key} {high}")
    if max(low, high or 0) > _MAX_COUNT:
        raise _RefusedSchemaError(
            f"{low_key} {low}, {high_key} {high}: the local model writes at most "
            f"{_MAX_COUNT:,} characters or items"
        )
    return low, high


def _repeat(item: str, low: int, high: int | None) -> str:
    """`item` `low` to `high` times (None: no limit), in GBNF; "" for none at all."""
    if high == 0:
        return ""
    if high is None:
        return f"({item}){{{low},}}" if low else f"({item})*"
    return f"({item}){{{low},{high}}}"


def _literal(value: object) -> str:
    """The GBNF literal of a value's JSON text."""
    text = json.dumps(value, ensure_ascii=False)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _rule_name(key: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in key) or "key"


@functools.lru_cache(maxsize=16)
def cached_grammar(schema_json: str) -> str:
    """`schema_grammar` of a schema given as canonical JSON, remembered: a service asks for
    the same few schemas again and again."""
    return schema_grammar(json.loads(schema_json))
