"""How an artifact's bytes are stored: as they are, or zstd-compressed when that saves bytes.

The object's key and every ref name the sha256 of the RAW bytes, so dedup and verification
mean what they did. A compressed object says so itself — HTTP `Content-Encoding: zstd` plus
`x-amz-meta-encoding: zstd`, the raw size and its frame table — so any GET or HEAD tells a
reader how to decode it, and objects written before compression existed (no encoding) read as
before. The body is a plain sequence of independent zstd frames of FRAME_BYTES raw bytes each:
any zstd decoder reads it whole, and a ranged read fetches only the frames of its slice.

Decoding is streamed and bounded: output beyond the raw size the caller knows (the ref's
`size_bytes`, from our own records, never from the object) is refused as soon as it is
produced, so a zstd bomb in the bucket costs at most one write-size buffer, not memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any, cast

import zstandard

from durable_agents.storage.errors import ArtifactIntegrityError

ENCODING = "zstd"
LEVEL = 3  # zstd's default: ~300 MB/s here, most of the ratio of the slower levels
MIN_COMPRESS_BYTES = 512  # below this the frame and metadata eat what it would save
MIN_SAVING = 0.05  # keep the raw bytes unless compression saves at least 5%
SAMPLE_BYTES = 64 * 1024  # a larger body is compressed only if this much of it compresses
MiB = 1024 * 1024
# Each frame decodes on its own, so a ranged read fetches and decodes at most a frame more
# than it asked for. The frame table rides in the object's metadata (S3 allows 2 KB of it).
FRAME_BYTES = 1 * MiB
MAX_FRAMES = 128
_WRITE_SIZE = 64 * 1024  # decompressed output is produced (and bounded) this much at a time


@dataclass(frozen=True)
class Layout:
    """A compressed object: independent zstd frames of `frame_size` raw bytes each (the last
    shorter), whose stored sizes let a reader fetch and decode only the frames of a slice."""

    frame_size: int
    frames: tuple[int, ...]  # the stored (compressed) size of each frame, in order

    def stored_span(self, first: int, last: int) -> tuple[int, int]:
        """The stored byte range (inclusive) that holds frames `first`..`last`."""
        start = sum(self.frames[:first])
        return start, start + sum(self.frames[first : last + 1]) - 1


@dataclass(frozen=True)
class Packed:
    body: bytes
    layout: Layout


def frame_size_for(size: int) -> int:
    """FRAME_BYTES, or more (whole MiB) so that no object has more than MAX_FRAMES frames."""
    if size <= FRAME_BYTES * MAX_FRAMES:
        return FRAME_BYTES
    return -(-size // (MAX_FRAMES * MiB)) * MiB


def compress_if_smaller(data: bytes) -> Packed | None:
    """`data` as zstd frames when that is enough smaller to be worth storing, else None.

    Already-compressed or random content (archives, images, our own gzip snapshots) is
    recognised from a sample of its start, so it costs one small compression, not a full one.
    """
    if len(data) < MIN_COMPRESS_BYTES:
        return None
    compressor = zstandard.ZstdCompressor(level=LEVEL)
    if len(data) > 2 * SAMPLE_BYTES:
        sample = data[:SAMPLE_BYTES]
        if len(compressor.compress(sample)) > len(sample) * (1 - MIN_SAVING):
            return None
    step = frame_size_for(len(data))
    frames = [compressor.compress(data[i : i + step]) for i in range(0, len(data), step)]
    body = b"".join(frames)
    if len(body) > len(data) * (1 - MIN_SAVING):
        return None
    return Packed(body, Layout(step, tuple(len(f) for f in frames)))


def pack(data: bytes) -> Packed | None:
    """compress_if_smaller, checked: what is about to be stored must decode to the bytes
    its key names (ArtifactIntegrityError otherwise)."""
    packed = compress_if_smaller(data)
    if packed is not None and decompress(packed.body, len(data)) != data:
        raise ArtifactIntegrityError("compressed artifact does not decode to its bytes")
    return packed


def put_arguments(packed: Packed, raw_size: int) -> dict[str, Any]:
    """What put_object adds for a compressed body: the encoding and the frame table."""
    return {
        "ContentEncoding": ENCODING,
        "Metadata": {
            "encoding": ENCODING,
            "raw-size": str(raw_size),
            "frame-size": str(packed.layout.frame_size),
            "frames": ",".join(map(str, packed.layout.frames)),
        },
    }


def layout_of(response: Mapping[str, Any]) -> Layout | None:
    """How a GET/HEAD response says the object is stored (None: the raw bytes)."""
    meta = response.get("Metadata") or {}
    claimed = {response.get("ContentEncoding"), meta.get("encoding")} - {None, "", "identity"}
    if not claimed:
        return None
    if claimed != {ENCODING}:
        raise ArtifactIntegrityError(f"stored with an unknown encoding {sorted(map(str, claimed))}")
    try:
        frames = tuple(int(n) for n in str(meta.get("frames", "")).split(","))
        layout = Layout(int(meta["frame-size"]), frames)
    except (KeyError, ValueError) as err:
        raise ArtifactIntegrityError("compressed object without a valid frame table") from err
    if layout.frame_size < 1 or any(n < 1 for n in frames):
        raise ArtifactIntegrityError("compressed object without a valid frame table")
    return layout


class _Enough(Exception):
    """Raised by the sink to stop decoding once a prefix reader has what it asked for."""


class _Sink:
    def __init__(self, limit: int, stop_at: int | None) -> None:
        self.limit, self.stop_at = limit, stop_at
        self.out = bytearray()
        self.total = 0

    def write(self, data: bytes) -> int:
        self.total += len(data)
        if self.total > self.limit:
            raise ArtifactIntegrityError(
                f"stored object decodes to more than its {self.limit} recorded bytes"
            )
        self.out += data
        if self.stop_at is not None and self.total >= self.stop_at:
            raise _Enough
        return len(data)


class Inflater:
    """Streamed zstd decoding with a hard cap on output.

    `limit` is the raw size the caller trusts; `stop_at` ends decoding early (a prefix read)
    once that many bytes came out. feed() returns the bytes decoded so far and not yet
    returned; `done` says stop_at was reached.
    """

    def __init__(self, limit: int, stop_at: int | None = None) -> None:
        self._sink = _Sink(limit, stop_at)
        self._writer = zstandard.ZstdDecompressor().stream_writer(
            cast(IO[bytes], self._sink), write_size=_WRITE_SIZE, write_return_read=True
        )
        self.done = False

    @property
    def produced(self) -> int:
        return self._sink.total

    def feed(self, stored: bytes) -> bytes:
        if not self.done:
            try:
                self._writer.write(stored)
            except _Enough:
                self.done = True
            except zstandard.ZstdError as err:
                raise ArtifactIntegrityError(f"stored object is not valid zstd: {err}") from err
        out = bytes(self._sink.out)
        self._sink.out.clear()
        return out


def decompress(stored: bytes, raw_size: int) -> bytes:
    """All of a compressed object, which must decode to exactly `raw_size` bytes."""
    inflater = Inflater(raw_size)
    data = inflater.feed(stored)
    if len(data) != raw_size:
        raise ArtifactIntegrityError(f"stored object decodes to {len(data)} of {raw_size} bytes")
    return data
