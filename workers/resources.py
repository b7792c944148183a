"""One engine and one S3 client per process, opened and closed together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aioboto3
from aiobotocore.config import AioConfig
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.db import make_engine, make_session_factory
from durable_agents.storage.session_deltas import DeltaPublisher
from durable_agents.storage.session_events import listen_dsn
from durable_agents.workers.settings import DatabaseSettings, S3Settings


@dataclass(frozen=True)
class Resources:
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    store: ArtifactStore
    # Token deltas of model calls (one connection, opened by the first delta published).
    deltas: DeltaPublisher | None = None


@asynccontextmanager
async def open_store(s3: S3Settings) -> AsyncIterator[ArtifactStore]:
    session = aioboto3.Session()
    config = AioConfig(
        s3={"addressing_style": "path"},
        retries={"max_attempts": 3, "mode": "standard"},
        # Only send/validate checksums where we ask for them (ChecksumSHA256 on put).
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        # Presigned URLs in SigV4: regions that no longer accept SigV2 refuse the default.
        signature_version="s3v4",
    )
    async with session.client(
        "s3",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key_id.get_secret_value(),
        aws_secret_access_key=s3.secret_access_key.get_secret_value(),
        config=config,
    ) as client:
        yield ArtifactStore(
            client, s3.bucket, s3.prefix, multipart_threshold=s3.multipart_threshold_bytes
        )


@asynccontextmanager
async def open_resources(db: DatabaseSettings, s3: S3Settings) -> AsyncIterator[Resources]:
    engine = make_engine(db.url.get_secret_value(), pool_size=db.pool_size, echo=db.echo)
    deltas = DeltaPublisher(listen_dsn(db.url.get_secret_value()))
    try:
        async with open_store(s3) as store:
            yield Resources(engine, make_session_factory(engine), store, deltas)
    finally:
        await deltas.aclose()
        await engine.dispose()
