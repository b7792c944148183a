"""Where the loop waits when the gate (activities/policies/admission.py) did not admit a
model call, a tool call or a sub-agent: nothing ran or was committed, so the loop parks the
task and asks again under the same key once woken. Deterministic code only.

- frozen: until the tenant is thawed (the `tenant_changed` signal), or RECHECK_SECONDS;
- quota_exhausted: until the quota is raised (the same signal), or the quota's period rolls
  over (UTC midnight, the first of the month), or RECHECK_SECONDS;
- budget_exhausted: until a raise is accepted; when only the budget's calls in flight hold
  it (their reservations), also after IN_FLIGHT_RECHECK_SECONDS, as they may end under it.

A wake counts from the moment the loop asked the gate (`mark`, taken before the admission's
activity), not from the park: a thaw, quota change or raise that lands while the gate's
answer is on its way ends the park at once. A wake that was never sent (a client that died
between its commit and its signals) costs the recheck's wait, not the task.

Several admissions of one step may park at once (each tool call of a reply passes the
gate): the status is written when the first parks and set back to running when the last
leaves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow

from durable_agents.workflows.budgets import budget_words
from durable_agents.workflows.contracts import Closed, TaskBudget

with workflow.unsafe.imports_passed_through():
    from durable_agents.vocabulary.session_status import SessionStatus

RECHECK_SECONDS = 3600.0
IN_FLIGHT_RECHECK_SECONDS = 10.0
FROZEN_WORDS = "tenant frozen: the task goes on when an operator thaws it"

# (status, note, idempotency suffix): records the park; None, None, None: running again.
StatusWriter = Callable[[str, str | None, str | None], Awaitable[None]]


@dataclass(frozen=True)
class Mark:
    """The wakes and raises a run had received when it asked the gate."""

    wakes: int
    raises: int


class Parks:
    """The wakes (a thaw or quota change, a budget raise) this run received, and its parks."""

    def __init__(
        self, tenant_id: str, budget: Callable[[], TaskBudget | None], write: StatusWriter
    ) -> None:
        """`budget`: the task's budget now (a raise changes it); `write`: record a status."""
        self._tenant = tenant_id
        self._budget = budget
        self._write = write
        self._wakes = 0
        self._raises = 0
        self._parks = 0
        self._parked = 0
        self._status: str | None = None

    def woken(self, tenant_id: str | None) -> None:
        """The tenant was thawed or its quotas changed. A signal cannot be refused: a
        stranger's wake (or one that names no tenant) is ignored."""
        if tenant_id == self._tenant:
            self._wakes += 1

    def raised(self) -> None:
        """A raise of the task's budget was accepted."""
        self._raises += 1

    @property
    def raises(self) -> int:
        return self._raises

    def mark(self) -> Mark:
        """Taken before asking the gate: a wake after it ends the park that answer brings."""
        return Mark(self._wakes, self._raises)

    async def wait(self, closed: Closed, since: Mark) -> None:
        """Park for `closed` (the gate's answer to a question asked at `since`), then
        return: the caller asks the gate again."""
        status, note, wait, woken = self._park_of(closed, since)
        self._parked += 1
        try:
            if self._status != status:
                self._status = status
                self._parks += 1
                await self._write(status, note, f"park{self._parks}")
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    woken, timeout=timedelta(seconds=wait) if wait else None
                )
        finally:
            self._parked -= 1
        if self._parked == 0 and self._status is not None:
            self._status = None
            await self._write(SessionStatus.RUNNING, None, None)

    def _park_of(
        self, closed: Closed, since: Mark
    ) -> tuple[str, str, float | None, Callable[[], bool]]:
        """The status, the park's note, the longest wait (None: none) and what ends it."""
        wakes, raises = since.wakes, since.raises
        status, note = park_of(closed, self._budget())
        if closed.frozen:
            return status, note, RECHECK_SECONDS, lambda: self._wakes > wakes
        if closed.quota is not None:
            wait = min(max(closed.quota.resets_in_seconds, 1.0), RECHECK_SECONDS)
            return status, note, wait, lambda: self._wakes > wakes
        held = closed.budget is not None and closed.budget.in_flight_tokens > 0
        in_flight = IN_FLIGHT_RECHECK_SECONDS if held else None
        return status, note, in_flight, lambda: self._raises > raises


def park_of(closed: Closed, budget: TaskBudget | None) -> tuple[str, str]:
    """The status a task parks in for `closed`, and the park's note (our words and numbers
    only); `budget`: the task's budget now."""
    if closed.frozen:
        return SessionStatus.FROZEN, FROZEN_WORDS
    if closed.quota is not None:
        return SessionStatus.QUOTA_EXHAUSTED, f"tenant quota {closed.quota.words}"
    if closed.budget is None:
        raise ValueError("a closed gate names why")
    return SessionStatus.BUDGET_EXHAUSTED, budget_words(closed.budget, budget)
