"""The activity edge's errors: our failures as Temporal's typed ApplicationErrors. Domain
errors (a provider's, storage's) become Temporal's here and nowhere else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio.exceptions import ApplicationError

from durable_agents.activities.providers.failure import ProviderError
from durable_agents.storage.errors import StorageError


def non_retryable(error_type: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=error_type, non_retryable=True)


def retryable(error_type: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=error_type, non_retryable=False)


def temporal_error(err: ProviderError) -> ApplicationError:
    """A provider's failure as Temporal raises it: same type, words, details and retry advice."""
    return ApplicationError(
        err.message,
        *err.details,
        type=err.type,
        non_retryable=err.non_retryable,
        next_retry_delay=err.next_retry_delay,
    )


@asynccontextmanager
async def storage_errors_are_final() -> AsyncIterator[None]:
    """A missing session or a corrupt artifact will not heal on retry: fail fast, typed."""
    try:
        yield
    except StorageError as err:
        raise non_retryable(err.error_type, str(err)) from err
