"""How the loop ends a task that did not fail: completed (checked or not), or with no answer,
a failed check or no progress. Each records its status (with its reason as an error item),
after any compaction in flight settles. Deterministic code only."""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

from durable_agents.workflows.compactions import Compactions
from durable_agents.workflows.contracts import AgentInput, AgentResult
from durable_agents.workflows.status_board import StatusBoard

with workflow.unsafe.imports_passed_through():
    from durable_agents.vocabulary.session_status import SessionStatus


class Endings:
    def __init__(
        self,
        inp: Callable[[], AgentInput],
        board: StatusBoard,
        compactions: Compactions,
        step: Callable[[], int],
    ) -> None:
        self._inp = inp
        self._board = board
        self._compactions = compactions
        self._step = step

    async def completed(self, final_item: str | None, checked: bool) -> AgentResult:
        await self._compactions.settle(wait=True)
        self._board.status = SessionStatus.COMPLETED
        await self._board.write(SessionStatus.COMPLETED, checked=checked)
        return AgentResult(
            self._inp().session_id,
            SessionStatus.COMPLETED,
            self._step(),
            final_item_id=final_item,
            checked=checked,
        )

    async def ended(self, status: str, words: str, final_item: str | None) -> AgentResult:
        """End as `status` (no_answer, check_failed, stuck) with `words` as the reason."""
        await self._compactions.settle(wait=True)
        await self._board.show(status, words, status)
        return AgentResult(
            self._inp().session_id, status, self._step(), final_item, last_error=words
        )
