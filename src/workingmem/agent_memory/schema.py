"""The schema of a schema-mode working memory: its JSON Schema, where null is allowed, validation.

    schema = DocumentSchema.build(Notes)            # a Pydantic model class, or a JSON Schema dict
    schema.null_is_value(("profile", "name"))       # False: a null there means "no change"
    schema.validate({"tasks": ["call Bob"]})        # the document as stored, or ValidationError

A Pydantic model validates with the model itself (its `extra` setting decides about unknown
keys, its coercions apply) and is stored as the model dumps it, without defaults it did not
receive; a JSON Schema dict validates with the `jsonschema` package (its `additionalProperties`
decides). Either way the top level must be an object, since the tools send objects and merge
them, and a ``$ref`` must point inside the schema (``#/...``): nothing is fetched.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jsonschema
import jsonschema.exceptions
import pydantic
from pydantic import BaseModel

from ..errors import ValidationError

__all__ = ["DocumentSchema", "json_path"]

_MAX_DEPTH = 64
_MAX_REASON_CHARS = 300
JSON = Any


def json_path(parts: Sequence[str | int]) -> str:
    """``("tasks", 0, "due")`` -> ``$.tasks[0].due``: how errors name a place in the content."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


class DocumentSchema:
    """A compiled schema: build it with `DocumentSchema.build`."""

    def __init__(
        self,
        json_schema: dict[str, JSON],
        *,
        model: type[BaseModel] | None,
        validator: Any = None,
    ) -> None:
        self._schema = json_schema
        self._model = model
        self._validator = validator

    @classmethod
    def build(cls, schema: type[BaseModel] | Mapping[str, Any]) -> DocumentSchema:
        """Checks and compiles a Pydantic model class or a JSON Schema dict.

        Raises `ValidationError` (field ``schema``) for a schema that is not valid JSON Schema,
        whose top level is not an object, or that references anything outside itself.
        """
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            try:
                produced = schema.model_json_schema()
            except pydantic.PydanticUserError as exc:
                raise ValidationError(
                    "schema", f"{schema.__name__} has no JSON Schema: {exc}"
                ) from exc
            _check_object(produced)
            return cls(produced, model=schema)
        if not isinstance(schema, Mapping):
            raise ValidationError(
                "schema",
                "must be a Pydantic model class or a JSON Schema dict, "
                f"got {type(schema).__name__}",
            )
        try:
            owned: dict[str, JSON] = json.loads(json.dumps(schema))
        except (TypeError, ValueError) as exc:
            raise ValidationError("schema", f"must be JSON (a JSON Schema dict): {exc}") from exc
        validator_class = jsonschema.validators.validator_for(
            owned, default=jsonschema.Draft202012Validator
        )
        try:
            validator_class.check_schema(owned)
        except jsonschema.exceptions.SchemaError as exc:
            where = json_path(list(exc.absolute_path))
            raise ValidationError(
                "schema", f"is not a valid JSON Schema: {exc.message} at {where}"
            ) from exc
        _check_object(owned)
        _check_local_refs(owned, owned)
        return cls(owned, model=None, validator=validator_class(owned))

    @property
    def json_schema(self) -> dict[str, JSON]:
        """The JSON Schema (a copy: changing it changes nothing here)."""
        return copy.deepcopy(self._schema)

    def validate(self, document: dict[str, JSON]) -> dict[str, JSON]:
        """The document as it will be stored, or `ValidationError` naming the first bad path."""
        if self._model is not None:
            try:
                valid = self._model.model_validate_json(json.dumps(document))
            except pydantic.ValidationError as exc:
                problems = [(json_path(e["loc"]), _pydantic_reason(e)) for e in exc.errors()]
                raise _invalid(problems) from None
            dumped: dict[str, JSON] = valid.model_dump(
                mode="json", by_alias=True, exclude_unset=True
            )
            return dumped
        errors = list(self._validator.iter_errors(document))
        if errors:
            first = jsonschema.exceptions.best_match(errors)
            others = [e for e in errors if e is not first]
            problems = [(json_path(list(e.absolute_path)), e.message) for e in [first, *others]]
            raise _invalid(problems)
        return document

    def null_is_value(self, path: Sequence[str]) -> bool:
        """Whether a null at `path` (a key at each level, from the top) is a value to store.

        It is where the schema accepts null, unless null is also the field's default there
        (Pydantic's ``x: str | None = None``): then null means "not given", like leaving the
        key out, which is what models mean when they pad every field they did not fill.
        """
        candidates: list[JSON] = [self._schema]
        for key in path:
            candidates = [child for node in candidates for child in self._children(node, key, 0)]
        return any(
            self._nullable(node, 0)
            and not (isinstance(node, dict) and "default" in node and node["default"] is None)
            for node in candidates
        )

    # -- walking the schema ------------------------------------------------------------------

    def _resolve(self, ref: str) -> JSON:
        return _pointed(self._schema, ref)  # `build` checked that it points somewhere

    def _nullable(self, node: JSON, depth: int) -> bool:
        if depth > _MAX_DEPTH or not isinstance(node, dict):
            return node is not False
        checks: list[bool] = []
        kind = node.get("type")
        if kind is not None:
            checks.append(kind == "null" or (isinstance(kind, list) and "null" in kind))
        if "const" in node:
            checks.append(node["const"] is None)
        if "enum" in node:
            checks.append(None in node["enum"])
        if isinstance(node.get("$ref"), str):
            checks.append(self._nullable(self._resolve(node["$ref"]), depth + 1))
        if "allOf" in node:
            checks.append(all(self._nullable(b, depth + 1) for b in node["allOf"]))
        for keyword in ("anyOf", "oneOf"):
            if keyword in node:
                checks.append(any(self._nullable(b, depth + 1) for b in node[keyword]))
        return all(checks)

    def _children(self, node: JSON, key: str, depth: int) -> list[JSON]:
        """The schemas that apply to `key` of an object `node` accepts."""
        if depth > _MAX_DEPTH or node is True or not isinstance(node, dict):
            return [True] if node is not False else []
        found: list[JSON] = []
        kind = node.get("type")
        object_words = {"properties", "patternProperties", "additionalProperties"} & node.keys()
        combined = {"$ref", "allOf", "anyOf", "oneOf"} & node.keys()
        holds_objects = kind == "object" or (isinstance(kind, list) and "object" in kind)
        if object_words or holds_objects or (kind is None and not combined):
            properties = node.get("properties") or {}
            patterns = node.get("patternProperties") or {}
            if key in properties:
                found.append(properties[key])
            matched = [schema for pattern, schema in patterns.items() if re.search(pattern, key)]
            found.extend(matched)
            if key not in properties and not matched:
                found.append(node.get("additionalProperties", True))
        if isinstance(node.get("$ref"), str):
            found.extend(self._children(self._resolve(node["$ref"]), key, depth + 1))
        for keyword in ("allOf", "anyOf", "oneOf"):
            for branch in node.get(keyword, ()):
                found.extend(self._children(branch, key, depth + 1))
        return found


def _check_object(schema: dict[str, JSON]) -> None:
    kind = schema.get("type")
    if kind != "object":
        raise ValidationError(
            "schema",
            f'must describe a JSON object at the top level ("type": "object"), got type {kind!r}',
        )


def _check_local_refs(node: JSON, root: dict[str, JSON]) -> None:
    """Every `$ref` names a part of the schema itself (else the validator fails on the first
    document that reaches it, long after the schema was accepted)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                if not value.startswith("#"):
                    raise ValidationError(
                        "schema",
                        f"$ref {value!r} points outside the schema; only #/... is supported",
                    )
                try:
                    _pointed(root, value)
                except LookupError:
                    raise ValidationError(
                        "schema", f"$ref {value!r} points to nothing in the schema"
                    ) from None
            _check_local_refs(value, root)
    elif isinstance(node, list):
        for item in node:
            _check_local_refs(item, root)


def _pointed(root: dict[str, JSON], ref: str) -> JSON:
    """The part of `root` a local `$ref` names: a JSON pointer (``#/$defs/node``) or an
    anchor (``#node``). LookupError when there is none."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        anchored = _anchored(root, ref[1:])
        if anchored is None:
            raise LookupError(ref)
        return anchored
    node: JSON = root
    for raw in ref[2:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise LookupError(ref)
    return node


def _anchored(node: JSON, anchor: str) -> dict[str, JSON] | None:
    if isinstance(node, dict):
        if anchor in (node.get("$anchor"), node.get("$dynamicAnchor")):
            return node
        children: Iterable[JSON] = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _anchored(child, anchor)
        if found is not None:
            return found
    return None


def _pydantic_reason(error: Mapping[str, Any]) -> str:
    if error.get("type") == "missing":
        return "is required"
    shown = json.dumps(error.get("input"), ensure_ascii=False, default=str)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{error['msg']} (got {shown})"


def _invalid(problems: list[tuple[str, str]]) -> ValidationError:
    path, reason = problems[0]
    if len(reason) > _MAX_REASON_CHARS:
        reason = reason[: _MAX_REASON_CHARS - 3] + "..."
    if len(problems) > 1:
        reason += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
    return ValidationError(path, reason)
