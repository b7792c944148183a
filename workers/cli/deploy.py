"""agentctl deploy: check new code against the histories of the agents already running."""

from __future__ import annotations

from typing import Annotated

import typer

from durable_agents.workers.cli.common import console, run_async, temporal_client
from durable_agents.workers.cli.gc import parse_duration
from durable_agents.workers.process.deploy_check import CheckReport, check_histories, workflow_name
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.process.sandbox import runner_for
from durable_agents.workers.resources import open_store
from durable_agents.workers.settings import get_settings
from durable_agents.workers.temporal_client import connect_client

deploy_app = typer.Typer(help="Check a deploy against the running agents before rollout.")


@deploy_app.command("check")
def check(
    namespace: Annotated[
        str | None, typer.Option(help="Namespace to check (default: TEMPORAL_NAMESPACE).")
    ] = None,
    closed_within: Annotated[
        str,
        typer.Option(
            metavar="DURATION",
            help="Also replay runs closed this recently (30m, 24h, 7d): resets and queries "
            "still meet the new code, and they are recent examples of every path.",
        ),
    ] = "7d",
    limit: Annotated[
        int | None, typer.Option(min=1, help="Replay at most this many runs (default: all).")
    ] = None,
    query: Annotated[
        str | None,
        typer.Option(help="A visibility filter ANDed in, e.g. \"TaskQueue = 'agent-cloud'\"."),
    ] = None,
) -> None:
    """Replay open and recently closed histories with this code's workflows (the cloud
    worker's list); name each run that would break. Exit 1 if any would."""
    # The worker's own modules, loaded only by this command, not by every agentctl call.
    from durable_agents.workers.process.cloud import CLOUD_WORKFLOWS

    window = parse_duration(closed_within)
    settings = get_settings()

    async def go() -> CheckReport:
        await temporal_client()  # a clear error if Temporal is unreachable
        async with open_store(settings.s3) as store:
            # The workers' converter: payloads they offloaded are read back from S3.
            client = await connect_client(
                namespace=namespace, data_converter=data_converter_with_offload(store)
            )
            return await check_histories(
                client,
                CLOUD_WORKFLOWS,
                closed_within=window,
                runner=runner_for(settings.agent.workflow_sandbox),
                limit=limit,
                extra_query=query,
            )

    report = run_async(go())
    types = ", ".join(workflow_name(w) for w in CLOUD_WORKFLOWS)
    console.print(
        f"replayed {report.replayed} run(s) of {types} (open, or closed within {closed_within})",
        markup=False,
        highlight=False,
    )
    for run in report.broken:
        console.print(
            f"BREAKS {run.workflow_id} run {run.run_id} ({run.kind}): {run.reason}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if report.broken:
        console.print(f"{len(report.broken)} run(s) would break: do not roll out", markup=False)
        raise typer.Exit(1)
