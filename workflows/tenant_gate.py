"""The loop's side of its tenant's quotas and kill switch: a step that finds the tenant
frozen, or its token or cost quota reached, parks the task (frozen, quota_exhausted) with
nothing called or committed, and takes the same step again once woken. Deterministic code.

Woken by the `tenant_changed` signal (a thaw, a quota set: workers/client/tenant_controls.py
sends it to every parked task of the tenant), and at the latest when the quota's period
rolls over (UTC midnight, or the first of the month) or after RECHECK_SECONDS, so a wake
that was never sent (a client that died between its commit and its signals) costs an
hour's wait, not a task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow

from durable_agents.workflows.contracts import ModelCallResult

with workflow.unsafe.imports_passed_through():
    from durable_agents.vocabulary.session_status import SessionStatus

RECHECK_SECONDS = 3600.0
FROZEN_WORDS = "tenant frozen: the task goes on when an operator thaws it"


def is_gated(result: ModelCallResult) -> bool:
    return result.frozen or result.quota_exhausted is not None


def park_of(result: ModelCallResult) -> tuple[str, str, float]:
    """The status, the park's note (our words and numbers only) and the longest wait."""
    if result.frozen:
        return SessionStatus.FROZEN, FROZEN_WORDS, RECHECK_SECONDS
    reached = result.quota_exhausted
    assert reached is not None
    wait = min(max(reached.resets_in_seconds, 1.0), RECHECK_SECONDS)
    return SessionStatus.QUOTA_EXHAUSTED, f"tenant quota {reached.words}", wait


class TenantGate:
    """Wakes received (a signal's tenant checked) and parks taken in this run."""

    def __init__(self, tenant_id: str) -> None:
        self._tenant = tenant_id
        self._wakes = 0
        self._parks = 0

    def woken(self, tenant_id: str | None) -> None:
        # A signal cannot be refused: a stranger's wake (or none) is ignored.
        if tenant_id == self._tenant:
            self._wakes += 1

    async def park(
        self, result: ModelCallResult, set_status: Callable[[str, str, str], Awaitable[None]]
    ) -> None:
        """Record the park, wait for a wake (or the period's end); the caller re-runs the
        step, which checks again and parks again while the tenant is still closed."""
        status, note, wait = park_of(result)
        wakes = self._wakes
        self._parks += 1
        await set_status(status, note, f"gate{self._parks}")
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._wakes > wakes, timeout=timedelta(seconds=wait)
            )
