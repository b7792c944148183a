"""What a provider raises when a request fails: our words, a type and whether a retry can
help. Nothing here knows Temporal; the activity edge raises each as Temporal's
ApplicationError with the same fields (activities/errors.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any


class ProviderError(Exception):
    """A model provider's failure: `type` names it (ModelUnavailable, ContextOverflow, ...),
    `non_retryable` says a retry cannot help, `next_retry_delay` is the vendor's Retry-After,
    `details` are numbers only. The message never holds a key or a prompt: it reaches
    workflow history and logs."""

    def __init__(
        self,
        message: str,
        *details: Any,
        type: str,
        non_retryable: bool = False,
        next_retry_delay: timedelta | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.type = type
        self.non_retryable = non_retryable
        self.next_retry_delay = next_retry_delay
