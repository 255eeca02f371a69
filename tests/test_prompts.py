"""The prompt template store: defaults, host and tenant overrides, rejection at set time."""

from __future__ import annotations

from typing import Any

import pytest

from workingmem.errors import ValidationError
from workingmem.prompts import (
    DEFAULT_TEMPLATES,
    SPECS,
    PromptKind,
    PromptTemplates,
    placeholders,
    validate_template,
)

MEMORY_VALUES: dict[str, Any] = {
    "summary": "Ada is planning a trip to Lyon.",
    "facts": "- [2-3] Ada is vegetarian",
    "turns": "[12] user: Book the train for Friday.\n[13] assistant: Done.",
    "summary_max_chars": 4000,
    "max_facts": 50,
    "fact_max_chars": 300,
}
REWRITE_VALUES: dict[str, Any] = {"facts": "- Ada lives in Lyon", "question": "Is it open?"}
VALUES = {PromptKind.MEMORY_WORKING: MEMORY_VALUES, PromptKind.QUERY_REWRITE: REWRITE_VALUES}


def template_for(kind: PromptKind, text: str = "custom") -> str:
    """A minimal valid template of `kind`, starting with `text`."""
    return text + " " + " ".join("{" + name + "}" for name in sorted(SPECS[kind].required))


@pytest.mark.parametrize("kind", list(PromptKind), ids=str)
def test_defaults_are_valid_and_render(kind: PromptKind) -> None:
    """The shipped defaults pass their own validation and fill in every value."""
    validate_template(kind, DEFAULT_TEMPLATES[kind])

    prompt = PromptTemplates().render(kind, **VALUES[kind])

    for value in VALUES[kind].values():
        assert str(value) in prompt
    assert "{" + "summary" + "}" not in prompt


def test_memory_working_default_asks_for_the_json_shape() -> None:
    prompt = PromptTemplates().render(PromptKind.MEMORY_WORKING, **MEMORY_VALUES)

    # the shape in words, with no example values a small model would copy
    for key in ('"summary"', '"facts"', '"text"', '"first_turn"', '"last_turn"'):
        assert key in prompt
    assert "<one fact>" not in prompt
    assert "<the new summary>" not in prompt
    assert "[turn number] (date and time, UTC) role: text" in prompt
    assert "Never invent" in prompt


def test_resolution_order_tenant_then_host_then_default() -> None:
    kind = PromptKind.QUERY_REWRITE
    host = template_for(kind, "host")
    tenant = template_for(kind, "tenant")
    templates = PromptTemplates(overrides={kind: host})
    templates.set(kind, tenant, tenant_id="t1")

    assert templates.get(kind, tenant_id="t1") == tenant
    assert templates.get(kind, tenant_id="t2") == host
    assert templates.get(kind) == host
    assert (
        templates.get(PromptKind.MEMORY_WORKING, tenant_id="t1")
        == DEFAULT_TEMPLATES[PromptKind.MEMORY_WORKING]
    )
    assert templates.render(kind, tenant_id="t1", **REWRITE_VALUES).startswith("tenant ")

    templates.unset(kind, tenant_id="t1")
    assert templates.get(kind, tenant_id="t1") == host
    templates.unset(kind)
    assert templates.get(kind, tenant_id="t1") == DEFAULT_TEMPLATES[kind]


def test_a_tenant_override_does_not_leak_to_another_tenant() -> None:
    kind = PromptKind.MEMORY_WORKING
    templates = PromptTemplates()
    templates.set(kind, template_for(kind, "secret of t1"), tenant_id="t1")

    for tenant in ("t2", "t10", "T1", None):
        assert templates.get(kind, tenant_id=tenant) == DEFAULT_TEMPLATES[kind]
        assert "secret of t1" not in templates.render(kind, tenant_id=tenant, **MEMORY_VALUES)


def test_kinds_may_be_given_as_strings() -> None:
    templates = PromptTemplates(overrides={"QUERY_REWRITE": "{facts} {question}"})

    assert templates.get("QUERY_REWRITE") == "{facts} {question}"


@pytest.mark.parametrize(
    ("kind", "name"),
    [pytest.param(k, n, id=f"{k}-{n}") for k in PromptKind for n in sorted(SPECS[k].required)],
)
def test_missing_placeholder_is_rejected_at_set_time(kind: PromptKind, name: str) -> None:
    """A template without a required placeholder never gets stored; the error names it."""
    template = template_for(kind).replace("{" + name + "}", "")
    templates = PromptTemplates()

    with pytest.raises(ValidationError, match=r"missing required placeholder\(s\) \{" + name):
        templates.set(kind, template, tenant_id="t1")
    with pytest.raises(ValidationError, match="{" + name + "}"):
        PromptTemplates(overrides={kind: template})

    assert templates.get(kind, tenant_id="t1") == DEFAULT_TEMPLATES[kind]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        pytest.param(
            "{facts} {question} {history}", r"unknown placeholder \{history\}", id="unknown"
        ),
        pytest.param(
            "{facts} {question} {}", r"placeholder \{\} is not a bare name", id="positional"
        ),
        pytest.param("{facts} {question} {0}", r"\{0\} is not a bare name", id="index"),
        pytest.param(
            "{facts.__class__} {question}",
            r"\{facts.__class__\} is not a bare name",
            id="attribute",
        ),
        pytest.param("{facts[0]} {question}", r"is not a bare name", id="item"),
        pytest.param("{facts!r} {question}", r"conversion or format spec", id="conversion"),
        pytest.param("{facts:>10} {question}", r"conversion or format spec", id="format-spec"),
        pytest.param("{facts} {question", "malformed braces", id="unclosed"),
        pytest.param("{facts} {question} }", "malformed braces", id="single-close"),
        pytest.param('{facts} {question} {"json": 1}', "not a bare name", id="unescaped-json"),
    ],
)
def test_bad_templates_are_rejected(template: str, message: str) -> None:
    templates = PromptTemplates()

    with pytest.raises(ValidationError, match=message) as caught:
        templates.set(PromptKind.QUERY_REWRITE, template, tenant_id="t1")

    assert caught.value.field == "templates[QUERY_REWRITE][tenant 't1']"
    assert (
        templates.get(PromptKind.QUERY_REWRITE, tenant_id="t1")
        == DEFAULT_TEMPLATES[PromptKind.QUERY_REWRITE]
    )


def test_a_rejected_set_keeps_the_previous_override() -> None:
    kind = PromptKind.QUERY_REWRITE
    templates = PromptTemplates(overrides={kind: template_for(kind, "good")})

    with pytest.raises(ValidationError):
        templates.set(kind, "{question} only")

    assert templates.get(kind).startswith("good ")


def test_escaped_braces_and_braces_in_values() -> None:
    """Doubled braces are literal; a value's braces are inserted verbatim, never parsed."""
    templates = PromptTemplates(overrides={"QUERY_REWRITE": '{{"q": 1}} {facts} / {question}'})

    prompt = templates.render(PromptKind.QUERY_REWRITE, facts="{question}", question="{0} {x")

    assert prompt == '{"q": 1} {question} / {0} {x'


def test_render_needs_every_value() -> None:
    with pytest.raises(ValidationError, match="no value for placeholder"):
        PromptTemplates().render(PromptKind.QUERY_REWRITE, facts="")


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda t: t.get("SUMMARY"), id="get-unknown-kind"),
        pytest.param(lambda t: t.set("SUMMARY", "x"), id="set-unknown-kind"),
        pytest.param(lambda t: t.set("QUERY_REWRITE", 42), id="not-a-str"),
        pytest.param(
            lambda t: t.set("QUERY_REWRITE", "{facts}{question}" + "x" * 60_000), id="too-long"
        ),
        pytest.param(
            lambda t: t.set("QUERY_REWRITE", "{facts}{question}", tenant_id=""), id="empty-tenant"
        ),
    ],
)
def test_misuse_is_a_validation_error(call: Any) -> None:
    with pytest.raises(ValidationError):
        call(PromptTemplates())


def test_placeholders() -> None:
    assert placeholders("{a} {{b}} {c}{a}") == {"a", "c"}
