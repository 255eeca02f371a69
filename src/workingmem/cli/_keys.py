"""`workingmem keys`: the service's API keys, one tenant each."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from .. import open_store
from ..stores.keys import ApiKey, ApiKeyStore, NewApiKey
from ._app import HELP_STYLE, Db, TenantOpt, console, run, when

keys_app = typer.Typer(
    help="API keys of the service, one tenant each: create, list, revoke.\n\n"
    "Example: workingmem keys create --tenant acme --label 'chat backend'",
    no_args_is_help=True,
    rich_markup_mode=HELP_STYLE,
)


def key_store(store: object) -> ApiKeyStore:
    if not isinstance(store, ApiKeyStore):  # pragma: no cover - both stores keep keys
        raise typer.BadParameter("this database keeps no API keys", param_hint="--db")
    return store


@keys_app.command("create")
def keys_create(
    tenant: TenantOpt,
    label: Annotated[str, typer.Option(metavar="TEXT", help="What the key is for.")] = "",
    db: Db = None,
) -> None:
    """Create an API key for a tenant. The key is printed once, alone on the last line.

    Only its SHA-256 is stored: keep the key now, it cannot be shown again.

    Example: workingmem keys create --tenant acme --label "chat backend"
    """
    created = run(_create_key(db, tenant, label), "Creating the key…")
    console.print(
        f"Created key [bold]{created.key.key_id}[/] for tenant [bold]{escape(tenant)}[/]. "
        "Keep it now: it is shown once."
    )
    typer.echo(created.secret)


async def _create_key(db: str | None, tenant: str, label: str) -> NewApiKey:
    async with await open_store(db) as store:
        return await key_store(store).create_api_key(tenant_id=tenant, label=label)


@keys_app.command("list")
def keys_list(
    tenant: Annotated[
        str | None, typer.Option("--tenant", metavar="TENANT", help="Only this tenant's keys.")
    ] = None,
    db: Db = None,
) -> None:
    """List API keys (never the secrets): id, tenant, label, start of the key, state.

    Example: workingmem keys list --tenant acme
    """
    keys = run(_list_keys(db, tenant), "Reading the keys…")
    if not keys:
        console.print("No API keys.")
        return
    table = Table(title="API keys")
    table.add_column("id", no_wrap=True)
    for column in ("tenant", "label", "key", "created (UTC)", "state"):
        table.add_column(column)
    for key in keys:
        table.add_row(
            key.key_id,
            escape(key.tenant_id),
            escape(key.label),
            f"{key.hint}…",
            when(key.created_at),
            "active" if key.active else f"revoked {when(key.revoked_at)}",
        )
    console.print(table)


async def _list_keys(db: str | None, tenant: str | None) -> list[ApiKey]:
    async with await open_store(db) as store:
        return await key_store(store).list_api_keys(tenant_id=tenant)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[
        str, typer.Argument(metavar="KEY_ID", help="The key's id (key_…), from keys list.")
    ],
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", metavar="TENANT", help="Revoke only if the key is this tenant's."),
    ] = None,
    db: Db = None,
) -> None:
    """Revoke an API key: every later request with it gets 401.

    Example: workingmem keys revoke key_0123456789abcdef --tenant acme
    """
    key = run(_revoke_key(db, key_id, tenant), "Revoking the key…")
    console.print(
        f"Revoked key [bold]{key.key_id}[/] of tenant [bold]{escape(key.tenant_id)}[/] "
        f"({when(key.revoked_at)} UTC)."
    )


async def _revoke_key(db: str | None, key_id: str, tenant: str | None) -> ApiKey:
    async with await open_store(db) as store:
        return await key_store(store).revoke_api_key(key_id=key_id, tenant_id=tenant)
