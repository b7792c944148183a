"""Heartbeats cost: each one that reaches the server is a billable Temporal Cloud action.

`heartbeating` exists so a dead worker is noticed within the heartbeat timeout. The server
starts that clock when the activity starts, so a beat at t=0 detects nothing sooner: it is a
pure cost, two extra actions per agent step (call_model and run_tool), measured by
bench/scale_costs.py. The first beat comes one interval in.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from durable_agents.activities.heartbeat import heartbeating


def _env(timeout: timedelta | None) -> tuple[ActivityEnvironment, list[tuple[Any, ...]]]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timeout)
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    return env, beats


async def test_a_short_activity_sends_no_heartbeat() -> None:
    env, beats = _env(timedelta(seconds=30))

    async def short_activity() -> None:
        async with heartbeating(every_seconds=2.0):
            for _ in range(20):  # a DB commit and an S3 PUT: the loop gets control back
                await asyncio.sleep(0.001)

    await env.run(short_activity)
    assert beats == [], "a heartbeat at t=0 is a billable action that detects nothing sooner"


async def test_a_long_activity_keeps_heartbeating() -> None:
    env, beats = _env(timedelta(seconds=30))

    async def long_activity() -> None:
        async with heartbeating(every_seconds=0.02):
            await asyncio.sleep(0.5)  # 25 intervals: a few beats must have gone out

    await env.run(long_activity)
    assert len(beats) >= 3


async def test_no_heartbeat_timeout_means_no_heartbeats() -> None:
    env, beats = _env(None)

    async def activity_without_timeout() -> None:
        async with heartbeating(every_seconds=0.01):
            await asyncio.sleep(0.1)

    await env.run(activity_without_timeout)
    assert beats == []


@activity.defn(name="silent_until_cancelled")
async def silent_until_cancelled() -> None:
    await asyncio.sleep(60)  # a worker that hangs or died before its first beat


@workflow.defn(name="HeartbeatClockProbe", sandboxed=False)
class HeartbeatClockProbe:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_activity(
                silent_until_cancelled,
                start_to_close_timeout=timedelta(seconds=60),
                heartbeat_timeout=timedelta(seconds=1),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, TimeoutError):
                return TimeoutType(cause.type).name
            raise
        return "completed"


async def test_an_activity_that_never_heartbeats_times_out_on_the_heartbeat_clock(
    client: Client,
) -> None:
    """What delaying the first beat relies on: the server's heartbeat clock runs from the
    activity's start, so one that never beats is still noticed within the heartbeat timeout
    (here 1 s), not only at its start-to-close timeout (60 s)."""
    queue = f"heartbeat-clock-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=queue, workflows=[HeartbeatClockProbe],
        activities=[silent_until_cancelled],
    ):  # fmt: skip
        began = time.monotonic()
        outcome = await client.execute_workflow(
            HeartbeatClockProbe.run, id=queue, task_queue=queue,
            execution_timeout=timedelta(seconds=50),
        )  # fmt: skip
    assert outcome == "HEARTBEAT"
    assert time.monotonic() - began < 30, "noticed by the heartbeat clock, not start-to-close"
