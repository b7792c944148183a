"""`agentctl keys`: create, list and revoke the gateway's API keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.table import Table

from durable_agents.storage.api_keys import (
    DEVICE_SCOPE,
    SCOPES,
    ApiKeyRepository,
    NewKey,
    check_scopes,
)
from durable_agents.storage.devices import validate_device_id
from durable_agents.storage.models import ApiKeyRow
from durable_agents.workers.cli.common import console, run_async, with_resources
from durable_agents.workers.cli.gc import parse_duration
from durable_agents.workers.resources import Resources

keys_app = typer.Typer(no_args_is_help=True, help="API keys for the gateway (stored hashed).")


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key acts as.")],
    user: Annotated[
        str | None, typer.Option("--user", help="Who the key's decisions are from.")
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", metavar="SCOPE", help=f"Repeatable: {', '.join(SCOPES)}."),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="A device key for this device id instead: the device routes only, "
            "no --user or --scope.",
        ),
    ] = None,
    name: Annotated[str, typer.Option(help="A label to recognise the key by.")] = "",
    expires_in: Annotated[
        str | None,
        typer.Option(metavar="DURATION", help="Expire after e.g. 12h, 30d (default: never)."),
    ] = None,
) -> None:
    """Create a key and print it once: only its hash is stored."""
    if device is not None:
        if user is not None or scope:
            raise ValueError("a device key takes no --user or --scope: it is the device's")
        validate_device_id(device)
    elif user is None:
        raise ValueError("give --user (and --scope), or --device for a device key")
    scopes = check_scopes(scope or []) if device is None else [DEVICE_SCOPE]
    expires_at = None
    if expires_in is not None:
        expires_at = datetime.now(UTC) + parse_duration(expires_in, minimum=timedelta(seconds=1))

    async def go(res: Resources) -> NewKey:
        async with res.sessions() as db, db.begin():
            keys = ApiKeyRepository(db)
            if device is not None:
                return await keys.create_device_key(
                    tenant, device, name=name, expires_at=expires_at
                )
            assert user is not None  # checked above
            return await keys.create(tenant, user, scopes, name=name, expires_at=expires_at)

    new = run_async(with_resources(go))
    # Plain print: the key must come out whole, never wrapped or highlighted.
    print(new.key)
    who = f"device {device}" if device is not None else user
    console.print(
        f"key {new.row.key_id} for {who} in tenant {tenant} ({', '.join(scopes)}); "
        "store it now, it is not shown again",
        markup=False,
        highlight=False,
    )


@keys_app.command("list")
def keys_list(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant's keys (default: all).")
    ] = None,
) -> None:
    """Keys (all tenants', or --tenant's); never their secrets."""

    async def go(res: Resources) -> list[ApiKeyRow]:
        async with res.sessions() as db:
            return await ApiKeyRepository(db).list(tenant)

    rows = run_async(with_resources(go))
    table = Table(
        "key id", "tenant", "user", "device", "name", "scopes", "created", "expires", "state"
    )
    now = datetime.now(UTC)
    for row in rows:
        state = "active"
        if row.revoked_at is not None:
            state = "revoked"
        elif row.expires_at is not None and row.expires_at <= now:
            state = "expired"
        table.add_row(
            row.key_id,
            row.tenant_id,
            row.user_id,
            row.device_id or "",
            row.name,
            ",".join(row.scopes),
            f"{row.created_at:%Y-%m-%d %H:%M}",
            f"{row.expires_at:%Y-%m-%d %H:%M}" if row.expires_at else "never",
            state,
        )
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (from `keys list`).")],
) -> None:
    """Revoke a key: every request with it is refused from now on."""

    async def go(res: Resources) -> bool:
        async with res.sessions() as db, db.begin():
            return await ApiKeyRepository(db).revoke(key_id)

    if not run_async(with_resources(go)):
        raise ValueError(f"no active key {key_id[:64]!r}")
    console.print(f"revoked {key_id}")
