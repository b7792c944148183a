"""`agentctl artifacts`: read committed artifacts, verified against their sha256."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer

from durable_agents.storage.agent_state import agent_state
from durable_agents.workers.cli.common import (
    Tenant,
    console,
    run_async,
    tenant_or_default,
    with_resources,
)
from durable_agents.workers.resources import Resources

artifacts_app = typer.Typer(no_args_is_help=True, help="Read committed artifacts.")


@artifacts_app.command("get")
def artifacts_get(
    artifact_id: Annotated[str, typer.Argument(help="Artifact id, or sha256 (prefix) as shown.")],
    tenant: Tenant = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", dir_okay=False, help="Write here.")
    ] = None,
) -> None:
    """Fetch an artifact (sha256-verified) to stdout or a file."""
    if output is not None and not output.parent.is_dir():
        raise ValueError(f"--output: no such directory: {output.parent}")
    t = tenant_or_default(tenant)

    async def go(res: Resources) -> bytes:
        async with agent_state(res.sessions, t) as st:
            try:
                row = await st.artifacts.get(uuid.UUID(artifact_id))
            except ValueError:
                row = await st.artifacts.find_by_sha_prefix(artifact_id.lower())
        ref = res.store.ref_for(t, row.sha256, row.size_bytes, row.content_type)
        return await res.store.get(t, ref)

    data = run_async(with_resources(go))
    if output:
        output.write_bytes(data)
        console.print(f"wrote {len(data)} bytes to {output}")
    else:
        sys.stdout.buffer.write(data)
