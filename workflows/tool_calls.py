"""Running one approved tool call from the loop: on the cloud queue or on a device, with a
result committed either way (a failure becomes an error result the model reads).
Deterministic workflow code only.

A device holding a device key gets its calls through offer_device_call on the cloud queue
(recorded in AgentState, leased by any gateway: activities/device_relay.py), bounded by
the device's wait plus the tool's timeout; a device running its own Temporal worker gets
them on its own queue, bounded by schedule-to-start.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.exceptions import TimeoutError as TemporalTimeout

from durable_agents.workflows.contracts import (
    AgentInput,
    Closed,
    DevicePresenceInput,
    DeviceRoute,
    ToolCallRef,
    ToolErrorInput,
    ToolOutcome,
    ToolRunInput,
)
from durable_agents.workflows.policies import (
    STATE_WRITE_RETRY,
    STATE_WRITE_TIMEOUT,
    TOOL_RETRY,
    device_task_queue,
)

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.device_presence import DevicePresenceActivities
    from durable_agents.activities.device_relay import DeviceDispatchActivities
    from durable_agents.activities.session_state import SessionStateActivities
    from durable_agents.activities.tool_run import ToolActivities

StatusHook = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class CallEnd:
    """How a call ended: `error` when it could not produce a result (the loop's own words),
    `in_doubt` when an interrupted attempt may or may not have acted (effects contract)."""

    error: str | None = None
    in_doubt: bool = False
    # The re-run the result came from (a resumed run continues after it).
    rerun: int = 0
    # The gate did not admit the call: it did not run (the loop parks, then asks again).
    closed: Closed | None = None
    # A result that is an error, and how often the session holds this call failing.
    failed: bool = False
    repeats: int = 0
    # A result that changed nothing it was asked to change (no progress).
    unchanged: bool = False


async def run_tool_call(
    inp: AgentInput,
    step: int,
    call: ToolCallRef,
    key: str,
    *,
    device_away: StatusHook,
    device_back: StatusHook,
    rerun: int = 0,
) -> CallEnd:
    """Run `call` under `key` (`rerun`: the n-th approved run after it was in doubt)."""
    device = device_of(inp, call)
    route = await _route(inp.tenant_id, device) if device is not None else None
    away = route is not None and not route.online
    if away:
        await device_away()  # the session shows waiting_device while the call waits
    timeout = timedelta(seconds=inp.settings.tool_timeout())
    run = ToolRunInput(
        inp.session_id,
        inp.tenant_id,
        step,
        call.tool_call_id,
        call.name,
        key,
        rerun,
        budget=inp.settings.budget(),
        budget_session_id=inp.budget_root,
    )
    try:
        outcome: ToolOutcome
        if device is not None and route is not None and route.via_gateway:
            run.device_id = device
            # One attempt waits for the device to take the call and run it; nobody
            # heartbeats a call no device has taken, so the bound is the whole window.
            window = timeout + timedelta(seconds=inp.settings.device_schedule_to_start_seconds)
            outcome = await workflow.execute_activity_method(
                DeviceDispatchActivities.offer_device_call,
                run,
                schedule_to_close_timeout=window,
                retry_policy=TOOL_RETRY,
            )
        else:
            outcome = await workflow.execute_activity_method(
                ToolActivities.run_tool,
                run,
                task_queue=(
                    device_task_queue(inp.tenant_id, device)
                    if device
                    else workflow.info().task_queue
                ),
                start_to_close_timeout=timeout,
                heartbeat_timeout=min(timeout, timedelta(seconds=30)),
                # Bounded wait for a device that is away; cloud calls start at once anyway.
                schedule_to_start_timeout=timedelta(
                    seconds=inp.settings.device_schedule_to_start_seconds
                )
                if device
                else None,
                retry_policy=TOOL_RETRY,
            )
        return CallEnd(
            in_doubt=outcome.in_doubt,
            rerun=outcome.rerun,
            closed=outcome.closed,
            failed=outcome.error_type is not None,
            repeats=outcome.repeats,
            unchanged=outcome.unchanged,
        )
    except ActivityError as err:
        offline = device is not None and isinstance(err.cause, TemporalTimeout)
        message = cause_of(err)
        if offline:
            message = f"device {device} is offline: {message}"
        await workflow.execute_activity_method(
            SessionStateActivities.record_tool_error,
            ToolErrorInput(
                inp.session_id,
                inp.tenant_id,
                step,
                call.tool_call_id,
                call.name,
                "DeviceOffline" if offline else "ToolFailed",
                message,
                key,
            ),
            start_to_close_timeout=STATE_WRITE_TIMEOUT,
            retry_policy=STATE_WRITE_RETRY,
        )
        return CallEnd(error=f"{call.name}: {message}", failed=True)
    finally:
        if away:
            await device_back()


def device_of(inp: AgentInput, call: ToolCallRef) -> str | None:
    """The device `call` runs on, or None for a cloud call."""
    on_device = call.name in inp.settings.device_tools or call.on_device
    return inp.settings.device_id if on_device else None


async def _route(tenant_id: str, device_id: str) -> DeviceRoute:
    route: DeviceRoute = await workflow.execute_activity_method(
        DevicePresenceActivities.device_route,
        DevicePresenceInput(tenant_id, device_id),
        start_to_close_timeout=STATE_WRITE_TIMEOUT,
        retry_policy=STATE_WRITE_RETRY,
    )
    return route


def cause_of(err: BaseException) -> str:
    """The innermost cause's message, short: what the model or a status line is told."""
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err)[:300] or type(err).__name__
