"""Reading an artifact's raw bytes out of S3 whatever its stored form (artifact_codec).

A raw object is read as it is. A compressed one is decoded as it streams in, bounded by the
raw size our records give; a slice of it fetches only the frames that hold the slice.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from durable_agents.storage import artifact_codec as codec
from durable_agents.storage.artifact_streams import READ_CHUNK, exact_chunks
from durable_agents.storage.errors import ArtifactIntegrityError


async def raw_chunks(
    s3: Any,
    bucket: str,
    key: str,
    raw_size: int,
    chunk_size: int = READ_CHUNK,
    stop_at: int | None = None,
) -> AsyncGenerator[bytes, None]:
    """The object's raw bytes in `chunk_size` pieces (the last may be shorter).

    A compressed object decodes to at most `raw_size` bytes (ArtifactIntegrityError beyond,
    as soon as they appear), and decoding stops once `stop_at` bytes came out.
    """
    obj = await s3.get_object(Bucket=bucket, Key=key)
    body = obj["Body"]
    layout = codec.layout_of(obj)
    if layout is None:
        async with body:  # not `as`: entering yields the raw response, not the StreamingBody
            async for chunk in exact_chunks(body, chunk_size):
                yield chunk
        return
    inflater = codec.Inflater(raw_size, stop_at)
    pending = bytearray()
    async with body:
        # One frame at a time: its output is at most a frame's raw size, so memory stays at
        # about a frame however well the object compressed. Bytes past the table's frames
        # (a lying table) are fed as they come, still bounded by raw_size.
        pieces = [*layout.frames]
        while not inflater.done:
            stored = await _read_exactly(body, pieces.pop(0) if pieces else READ_CHUNK)
            if not stored:
                break
            pending += inflater.feed(stored)
            while len(pending) >= chunk_size:
                yield bytes(pending[:chunk_size])
                del pending[:chunk_size]
    if pending:
        yield bytes(pending)


async def _read_exactly(body: Any, size: int) -> bytes:
    """`size` bytes of the body, fewer only at its end."""
    out = bytearray()
    while len(out) < size and (piece := await body.read(size - len(out))):
        out += piece
    return bytes(out)


async def compressed_range(
    s3: Any,
    bucket: str,
    key: str,
    layout: codec.Layout,
    raw_size: int,
    first: dict[str, Any] | None,
    start: int,
    end_inclusive: int,
) -> bytes:
    """Raw bytes `start`..`end_inclusive` of a compressed object, given `first`: the ranged
    response (of the same raw offsets) that revealed the object is compressed, if any.

    A prefix decodes what `first` holds — the first end+1 stored bytes nearly always decode to
    more than end+1 raw ones. Otherwise one ranged GET fetches the frames holding the slice.
    """
    size = layout.frame_size
    if first is not None and start == 0:
        async with first["Body"] as body:
            stored: bytes = await body.read()
        head = codec.Inflater(raw_size, stop_at=end_inclusive + 1).feed(stored)
        if len(head) > end_inclusive:
            return head[: end_inclusive + 1]
    elif first is not None:
        first["Body"].close()  # compressed bytes at a raw offset mean nothing
    k0, k1 = start // size, end_inclusive // size
    if k1 >= len(layout.frames):
        raise ArtifactIntegrityError(f"object {key} has fewer frames than its raw size needs")
    lo, hi = layout.stored_span(k0, k1)
    obj = await s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={lo}-{hi}")
    async with obj["Body"] as body:
        stored = await body.read()
    base = k0 * size
    # Bounded by the frames' raw sizes: whole frames until the last, which holds the rest.
    limit = min(raw_size, (k1 + 1) * size) - base
    raw = codec.Inflater(limit, stop_at=end_inclusive + 1 - base).feed(stored)
    return raw[start - base : end_inclusive + 1 - base]
