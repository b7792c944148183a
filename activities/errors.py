"""Turn our deterministic failures into typed, non-retryable activity errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio.exceptions import ApplicationError

from storage.errors import StorageError


def non_retryable(error_type: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=error_type, non_retryable=True)


def retryable(error_type: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=error_type, non_retryable=False)


@asynccontextmanager
async def storage_errors_are_final() -> AsyncIterator[None]:
    """A missing session or a corrupt artifact will not heal on retry: fail fast, typed."""
    try:
        yield
    except StorageError as err:
        raise non_retryable(err.error_type, str(err)) from err
