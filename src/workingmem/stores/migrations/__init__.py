"""Schema migrations, numbered, one folder per dialect.

    for migration in load_migrations("sqlite"):
        ...  # apply migration.statements and record migration.version, in one transaction

Each file ``NNNN_name.sql`` is one migration; a store applies those it has not recorded in
``schema_migrations``, in order, each in one transaction together with its record, so a
crash mid-migration leaves the schema at the previous version.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Literal

__all__ = ["Migration", "load_migrations"]

Dialect = Literal["sqlite", "postgres"]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


def load_migrations(dialect: Dialect) -> list[Migration]:
    """The dialect's migrations in order."""
    folder = resources.files(__package__) / dialect
    migrations = []
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        number, _, rest = entry.name.removesuffix(".sql").partition("_")
        text = entry.read_text(encoding="utf-8")
        statements = tuple(s.strip() for s in _statements(text) if _has_sql(s))
        migrations.append(Migration(version=int(number), name=rest, statements=statements))
    migrations.sort(key=lambda m: m.version)
    return migrations


def _statements(text: str) -> list[str]:
    """The statements of a file: split where a line ends with ``;``, but never inside a
    ``$$``-quoted function body (whose own statements end lines too)."""
    statements: list[str] = []
    pending = ""
    for chunk in text.split(";\n"):
        pending = f"{pending};\n{chunk}" if pending else chunk
        if pending.count("$$") % 2 == 0:
            statements.append(pending)
            pending = ""
    if pending:
        statements.append(pending)
    return statements


def _has_sql(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())
