"""A claim-check reference names its object's size, but the codec never trusts it: the size
and the bound on decoding come from our own record of the object (the tenant's artifact row,
or bytes it read and verified before). A reference that disagrees with the record is
refused in our words before anything is read; an object that decodes past the record is
refused as soon as it does. Memory stays bounded either way (tracemalloc's peak)."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from collections.abc import Awaitable

import pytest
import zstandard
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, WorkflowSerializationContext

from durable_agents.storage import artifact_codec as codec
from durable_agents.storage.errors import (
    ArtifactIntegrityError,
    ArtifactNotFound,
    ArtifactRecordMismatch,
)
from durable_agents.workers.peers.claim_check import ClaimCheckCodec, ClaimCheckStore
from durable_agents.workers.resources import Resources

CONTEXT = WorkflowSerializationContext(namespace="default", workflow_id="wf-forged")
MiB = 1024 * 1024
CLAIM = 256 * MiB
# What the planted object decodes to: past the claim, as a zstd bomb of zeros (~17 KB).
BOMB_BYTES = 512 * MiB
PEAK_BOUND = 8 * MiB
TEXT = "true " * 4000


def codec_for(res: Resources, tenant: str, cache: int = 0) -> ClaimCheckCodec:
    return ClaimCheckCodec(ClaimCheckStore(res.store, res.sessions, read_cache_bytes=cache), tenant)


async def _encoded(res: Resources, tenant: str, text: str = TEXT) -> tuple[Payload, str, int]:
    """A payload the codec wrote (its object uploaded, registered and held), with the
    sha256 and size its reference names."""
    value = {"input": [{"role": "tool", "output": text}]}
    [original] = DataConverter.default.payload_converter.to_payloads([value])
    [encoded] = await codec_for(res, tenant).with_context(CONTEXT).encode([original])
    size, _, sha = json.loads(encoded.data)["input"][0]["output"]["$da"][1:].partition(":")
    return encoded, sha, int(size)


def _claiming(encoded: Payload, sha: str, size: int, claimed: int) -> Payload:
    """The payload with its reference rewritten to claim `claimed` bytes."""
    forged = Payload()
    forged.CopyFrom(encoded)
    forged.data = encoded.data.replace(f"s{size}:{sha}".encode(), f"s{claimed}:{sha}".encode())
    assert forged.data != encoded.data
    return forged


async def _plant_bomb(res: Resources, tenant: str, sha: str) -> None:
    """Put, at the object's key, zstd frames that decode to BOMB_BYTES of zeros, marked as
    our compressed objects are (something with write access to the bucket could)."""
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = bytes(MiB)
    body = b"".join([compressor.compress(zeros) for _ in range(BOMB_BYTES // MiB)])
    body += compressor.flush()
    await res.store.client.put_object(
        Bucket=res.store.bucket,
        Key=res.store.ref_for(tenant, sha, 0, "").key,
        Body=body,
        ContentEncoding=codec.ENCODING,
        Metadata={
            "encoding": codec.ENCODING,
            "raw-size": str(BOMB_BYTES),
            "frame-size": str(BOMB_BYTES),
            "frames": str(len(body)),
        },
    )


async def _refusal_and_peak(decoding: Awaitable[object]) -> tuple[Exception, int]:
    """The error decoding raised, and the peak of memory Python allocated meanwhile."""
    tracemalloc.start()
    try:
        await decoding
    except Exception as err:
        return err, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    raise AssertionError("the forged reference was decoded")


async def test_a_reference_claiming_more_than_our_record_is_refused_before_reading(
    resources: Resources, migrated: object, tenant: str
) -> None:
    encoded, sha, size = await _encoded(resources, tenant)
    await _plant_bomb(resources, tenant, sha)  # reading it would grow to the claim
    forged = _claiming(encoded, sha, size, CLAIM)
    err, peak = await _refusal_and_peak(codec_for(resources, tenant).decode([forged]))
    # Refused before any decoding: the record, not the claim, bounds it.
    assert peak < PEAK_BOUND, f"peak {peak / MiB:.1f} MiB"
    assert isinstance(err, ArtifactRecordMismatch), repr(err)
    assert str(CLAIM) in str(err) and str(size) in str(err) and "true" not in str(err)


async def test_a_reference_to_an_object_we_have_no_record_of_is_refused_before_reading(
    resources: Resources, migrated: object, tenant: str
) -> None:
    encoded, sha, size = await _encoded(resources, tenant)
    # The same reference to bytes this tenant never stored: only an object in the bucket.
    unknown = hashlib.sha256(b"never stored").hexdigest()
    await _plant_bomb(resources, tenant, unknown)
    forged = Payload()
    forged.CopyFrom(encoded)
    forged.data = encoded.data.replace(f"s{size}:{sha}".encode(), f"s{CLAIM}:{unknown}".encode())
    err, peak = await _refusal_and_peak(codec_for(resources, tenant).decode([forged]))
    assert peak < PEAK_BOUND, f"peak {peak / MiB:.1f} MiB"
    assert isinstance(err, ArtifactNotFound), repr(err)


async def test_an_object_decoding_past_our_record_is_refused_within_the_record(
    resources: Resources, migrated: object, tenant: str
) -> None:
    encoded, sha, _ = await _encoded(resources, tenant)
    await _plant_bomb(resources, tenant, sha)
    err, peak = await _refusal_and_peak(codec_for(resources, tenant).decode([encoded]))
    assert isinstance(err, ArtifactIntegrityError), repr(err)
    assert peak < PEAK_BOUND, f"peak {peak / MiB:.1f} MiB"


async def test_a_reference_claiming_fewer_bytes_is_refused_not_cut_short(
    resources: Resources, migrated: object, tenant: str
) -> None:
    encoded, sha, size = await _encoded(resources, tenant)
    reader = codec_for(resources, tenant, cache=64 * MiB)
    assert (await reader.decode([encoded]))[0].data.count(b"true") == 4000  # now cached
    short = _claiming(encoded, sha, size, 10)
    # A claim shorter than the record is refused too, cached bytes or not.
    for decoder in (reader, codec_for(resources, tenant)):
        with pytest.raises(ArtifactRecordMismatch):
            await decoder.decode([short])
