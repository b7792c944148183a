"""Deterministic large data and a spying S3 client for the large-artifact tests."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from durable_agents.storage.artifacts import ArtifactStore

MiB = 1024 * 1024

Hook = Callable[..., Awaitable[Any]]


class Spy:
    """An S3 client stand-in: records each call and lets a test wrap chosen operations."""

    def __init__(self, client: Any, **hooks: Hook) -> None:
        self._client = client
        self._hooks = hooks
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name in self._hooks:
                return await self._hooks[name](real, *args, **kwargs)
            return await real(*args, **kwargs)

        return call


def blocks(total: int, seed: str) -> Iterator[bytes]:
    """`total` bytes of deterministic data in 1 MiB blocks, each made distinct by its index."""
    base = hashlib.shake_256(seed.encode()).digest(MiB)
    for i in range(total // MiB):
        yield i.to_bytes(8, "big") + base[8:]
    if rest := total % MiB:
        yield base[:rest]


async def stream(total: int, seed: str, *, fail_at: int | None = None) -> AsyncIterator[bytes]:
    """The same data generated on the fly, never held whole; optionally failing part-way."""
    for i, block in enumerate(blocks(total, seed)):
        if i == fail_at:
            raise ConnectionError("source went away")
        yield block
        await asyncio.sleep(0)


def sha_of(total: int, seed: str) -> str:
    digest = hashlib.sha256()
    for block in blocks(total, seed):
        digest.update(block)
    return digest.hexdigest()


def raw_client(store: ArtifactStore) -> Any:
    return store.client


def spied(store: ArtifactStore, **hooks: Hook) -> tuple[ArtifactStore, Spy]:
    spy = Spy(raw_client(store), **hooks)
    return ArtifactStore(spy, store.bucket, store.prefix), spy


async def open_uploads(store: ArtifactStore, tenant: str) -> list[str]:
    """Multipart uploads still open under the tenant's prefix."""
    listed = await raw_client(store).list_multipart_uploads(
        Bucket=store.bucket, Prefix=f"{store.prefix}/{tenant}/"
    )
    return [u["Key"] for u in listed.get("Uploads", [])]
