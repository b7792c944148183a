"""Replay a namespace's open and recently closed histories against the code about to be
deployed, and name the runs it would break (`agentctl deploy check`, docs/DEPLOY.md).

A running agent meets new code at its next workflow task (or, pinned, when it is moved):
the new code must make the same commands its history recorded, or the task fails with a
non-determinism error and the run stops until that code is rolled back. Replaying each
history offline with the Replayer is the same check the worker does, before any worker runs.
Closed runs count too: a run closed within the window may still be reset or queried, and
their histories are the recent examples of every path the loop takes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, WorkflowRunner
from temporalio.workflow import NondeterminismError

# A failure line is the SDK's own text (command and event types, activity names, ids),
# never a payload; it is still cut to one line of this length.
MAX_REASON_CHARS = 300


@dataclass(frozen=True)
class BrokenRun:
    """A run the new code would break: `kind` is nondeterminism or error (a workflow task
    that fails in replay for another reason, e.g. an exception in the new code)."""

    workflow_id: str
    run_id: str
    kind: str
    reason: str


@dataclass
class CheckReport:
    replayed: int = 0
    broken: list[BrokenRun] = field(default_factory=list)


def workflow_name(cls: type) -> str:
    """The type name a workflow class is registered under (its @workflow.defn name)."""
    defn = getattr(cls, "__temporal_workflow_definition", None)
    name = getattr(defn, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{cls.__name__} is not a @workflow.defn class")
    return name


def _quote(value: str) -> str:
    # Visibility queries take single-quoted strings; our type names are identifiers, but a
    # quote in one must not end the literal.
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def visibility_query(types: Sequence[str], closed_since: datetime, extra: str | None = None) -> str:
    """Runs of these types that are open, or closed at or after `closed_since` (UTC)."""
    if not types:
        raise ValueError("no workflow types to check")
    since = closed_since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    query = (
        f"WorkflowType IN ({', '.join(_quote(t) for t in types)}) AND "
        f"(ExecutionStatus = 'Running' OR CloseTime >= '{since}')"
    )
    return f"{query} AND ({extra})" if extra else query


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:MAX_REASON_CHARS]


async def _histories(
    client: Client, query: str, limit: int | None
) -> AsyncIterator[WorkflowHistory]:
    async for history in client.list_workflows(query, limit=limit).map_histories():
        yield history


async def check_histories(
    client: Client,
    workflows: Sequence[type],
    *,
    closed_within: timedelta,
    runner: WorkflowRunner,
    limit: int | None = None,
    extra_query: str | None = None,
    now: datetime | None = None,
) -> CheckReport:
    """Replay every open run of `workflows`' types, and every one closed within
    `closed_within`, with `workflows` (the new code); return the ones that fail.

    Histories are decoded with `client`'s data converter, so payloads the workers
    offloaded to the artifact store are read back as the workers read them."""
    since = (now or datetime.now(UTC)) - closed_within
    query = visibility_query([workflow_name(w) for w in workflows], since, extra_query)
    replayer = Replayer(
        workflows=list(workflows),
        workflow_runner=runner,
        namespace=client.namespace,
        data_converter=client.data_converter,
    )
    report = CheckReport()
    async with replayer.workflow_replay_iterator(_histories(client, query, limit)) as results:
        async for result in results:
            report.replayed += 1
            failure = result.replay_failure
            if failure is None:
                continue
            kind = "nondeterminism" if isinstance(failure, NondeterminismError) else "error"
            history = result.history
            report.broken.append(
                BrokenRun(history.workflow_id, history.run_id, kind, _one_line(failure))
            )
    return report
