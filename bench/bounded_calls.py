"""Client calls a bench makes many of, a limited number in flight at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


async def bounded(
    limit: int, items: Sequence[T], fn: Callable[[T], Awaitable[Any]]
) -> tuple[list[Any], list[BaseException]]:
    """fn over items, at most `limit` at a time; results in order (None where it raised)."""
    gate = asyncio.Semaphore(limit)
    errors: list[BaseException] = []

    async def one(item: T) -> Any:
        async with gate:
            try:
                return await fn(item)
            except Exception as err:
                errors.append(err)
                return None

    return list(await asyncio.gather(*(one(x) for x in items))), errors
