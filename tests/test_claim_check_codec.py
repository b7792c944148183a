"""The claim-check codec (workers/peers/claim_check.py) on the real PostgreSQL and S3, without a
workflow: what it writes is verified and held before a reference leaves it, a reference
reads back only through its tenant and only as the bytes it names, and what it cannot hold
(no workflow in the context) it leaves as it was."""

from __future__ import annotations

import json

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, WorkflowSerializationContext

from durable_agents.storage.claim_holds import holds_of
from durable_agents.storage.errors import ArtifactIntegrityError, ArtifactNotFound
from durable_agents.workers.peers.claim_check import ENCODING, ClaimCheckCodec, ClaimCheckStore
from durable_agents.workers.resources import Resources

CONTEXT = WorkflowSerializationContext(namespace="default", workflow_id="wf-1")


def codec_for(res: Resources, tenant: str, cache: int = 0) -> ClaimCheckCodec:
    return ClaimCheckCodec(ClaimCheckStore(res.store, res.sessions, read_cache_bytes=cache), tenant)


def big_payload(text: str) -> Payload:
    value = {"input": [{"role": "tool", "output": text}], "model": "m"}
    return DataConverter.default.payload_converter.to_payloads([value])[0]


async def test_large_strings_leave_as_held_verified_references_and_come_back(
    resources: Resources, migrated: object, tenant: str
) -> None:
    codec = codec_for(resources, tenant).with_context(CONTEXT)
    original = big_payload("result " * 2000)
    [encoded] = await codec.encode([original])
    assert encoded.metadata["encoding"] == ENCODING
    assert len(encoded.data) < 400 and b"result result" not in encoded.data
    async with resources.sessions() as db:
        held = await holds_of(db, tenant, "default/wf-1")
    assert len(held) == 1 and held[0].expires_at is None
    [decoded] = await codec_for(resources, tenant).decode([encoded])
    assert decoded == original


async def test_a_reference_reads_nothing_through_another_tenant(
    resources: Resources, migrated: object, tenant: str
) -> None:
    [encoded] = (
        await codec_for(resources, tenant)
        .with_context(CONTEXT)
        .encode([big_payload("mine " * 2000)])
    )
    with pytest.raises(ArtifactNotFound):
        await codec_for(resources, f"{tenant}-other").decode([encoded])


async def test_an_object_changed_in_the_store_is_refused_not_decoded(
    resources: Resources, migrated: object, tenant: str
) -> None:
    [encoded] = (
        await codec_for(resources, tenant)
        .with_context(CONTEXT)
        .encode([big_payload("true " * 2000)])
    )
    token = json.loads(encoded.data)["input"][0]["output"]["$da"][1:]
    key = resources.store.ref_for(tenant, token.partition(":")[2], 0, "").key
    forged = ("fals " * 2000).encode()
    await resources.store.client.put_object(Bucket=resources.store.bucket, Key=key, Body=forged)
    with pytest.raises(ArtifactIntegrityError):
        await codec_for(resources, tenant).decode([encoded])


async def test_without_a_workflow_nothing_is_written_and_the_payload_is_unchanged(
    resources: Resources, migrated: object, tenant: str
) -> None:
    original = big_payload("loose " * 2000)
    assert await codec_for(resources, tenant).encode([original]) == [original]


async def test_a_client_without_the_codec_fails_on_the_encoding_not_on_data(
    resources: Resources, migrated: object, tenant: str
) -> None:
    [encoded] = (
        await codec_for(resources, tenant)
        .with_context(CONTEXT)
        .encode([big_payload("hidden " * 2000)])
    )
    with pytest.raises(Exception, match="encoding"):
        DataConverter.default.payload_converter.from_payloads([encoded])
