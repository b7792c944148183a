"""What the loop and the check activity agree on: ids and counts in, a verdict out. The
reason is our words naming what the declared check missed (a path, a text it asked for),
bounded to 400 characters; never file content."""

# No `from __future__ import annotations` in payload modules (see workflows/contracts.py).

from dataclasses import dataclass


@dataclass
class CheckAnswerInput:
    session_id: str
    tenant_id: str
    step: int
    idempotency_key: str
    # The reply taken as the final answer (the check may read its text).
    answer_item_id: str


@dataclass
class CheckVerdict:
    # False: the task declares no check (it completes unchecked).
    checked: bool
    passed: bool
    # Failed checks committed for this session so far (this one included), and how many
    # the check allows before the task ends check_failed.
    failures: int = 0
    attempts: int = 0
    reason: str | None = None

    def final(self) -> bool:
        return not self.passed and self.failures >= self.attempts
