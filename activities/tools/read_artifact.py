"""read_artifact: page through or grep a stored result larger than the excerpt the model saw.

Offsets and lengths count bytes, not characters: a byte offset is a ranged read of the
object (a page of a 200 MB artifact fetches only that page), where a character offset would
mean decoding everything before it. A page never splits a UTF-8 character: it starts at the
next character boundary and ends before a character it cannot finish, and says which bytes
it covers and where the next page starts. A grep streams the whole artifact once, line by
line, with an RE2 pattern (linear time, whatever the pattern).
"""

from __future__ import annotations

import asyncio
import codecs
from contextlib import aclosing
from typing import Annotated, Any

from pydantic import Field

from durable_agents.activities.policies.linear_regex import RegexRefused, compile_linear
from durable_agents.activities.tools.base import (
    ArtifactAccess,
    ArtifactInfo,
    ToolContext,
    ToolError,
)
from durable_agents.activities.tools.typed import tool

DEFAULT_PAGE_BYTES = 8 * 1024
MAX_PAGE_BYTES = 64 * 1024
MAX_MATCHES = 50
# A longer line is matched in pieces of this size (a match across two pieces is missed).
MAX_LINE_BYTES = 64 * 1024
# What a matching line shows of itself, around the match.
_SHOWN_LINE_CHARS = 300
_SNIFF_BYTES = 8 * 1024
_BINARY_TYPES = ("image/", "audio/", "video/", "font/")
_BINARY_EXACT = frozenset(
    {
        "application/octet-stream",
        "application/gzip",
        "application/zip",
        "application/pdf",
        "application/x-bzip2",
        "application/x-xz",
    }
)


def _label(info: ArtifactInfo) -> str:
    return f"artifact {info.sha256[:16]} ({info.content_type}, {info.size_bytes} bytes)"


def _binary(info: ArtifactInfo) -> ToolError:
    return ToolError(
        "BinaryArtifact",
        f"{_label(info)} is binary; read_artifact shows text only",
    )


def _declared_binary(info: ArtifactInfo) -> bool:
    media = info.content_type.split(";")[0].strip().lower()
    return media in _BINARY_EXACT or media.startswith(_BINARY_TYPES)


def _text_page(raw: bytes, offset: int, ends_artifact: bool) -> tuple[str, int, int] | None:
    """(text, first byte, byte after the last) of `raw` read at `offset`, cut to whole UTF-8
    characters; None when it is not UTF-8 text."""
    skip = 0
    while offset > 0 and skip < min(3, len(raw)) and raw[skip] & 0xC0 == 0x80:
        skip += 1  # inside a character the previous page ended before
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(raw[skip:], final=ends_artifact)
    except UnicodeDecodeError:
        return None
    pending = len(decoder.getstate()[0])
    if "\x00" in text:
        return None
    return text, offset + skip, offset + len(raw) - pending


async def _page(access: ArtifactAccess, info: ArtifactInfo, offset: int, length: int) -> str:
    if offset > info.size_bytes:
        raise ToolError(
            "InvalidArguments",
            f"offset {offset} is past the end of {_label(info)}",
        )
    raw = await access.read(info.artifact_id, offset, length)
    page = _text_page(raw, offset, offset + len(raw) >= info.size_bytes)
    if page is not None and page[2] == offset and offset + len(raw) < info.size_bytes:
        # Shorter than the character it starts at, the page would never move on: it grows
        # to hold that one character (at most 4 bytes in UTF-8).
        raw = await access.read(info.artifact_id, offset, 4)
        page = _text_page(raw, offset, offset + len(raw) >= info.size_bytes)
    if page is None:
        raise _binary(info)
    text, start, end = page
    where = f"next offset {end}" if end < info.size_bytes else "end of artifact"
    return f"[{_label(info)}: bytes {start}-{end}; {where}]\n{text}"


def _shown(line: str, at: int) -> str:
    if len(line) <= _SHOWN_LINE_CHARS:
        return line
    start = max(0, at - _SHOWN_LINE_CHARS // 3)
    cut = line[start : start + _SHOWN_LINE_CHARS]
    return ("…" if start else "") + cut + ("…" if start + _SHOWN_LINE_CHARS < len(line) else "")


class _Grep:
    """Lines matching a pattern, fed chunk by chunk; memory stays at about one line."""

    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        self.matches: list[str] = []
        self.more = False  # a match beyond MAX_MATCHES was seen; the scan stopped there
        self.lines = 0
        self.last_match_line = 0
        self._line_no = 1
        self._line_start = 0  # byte offset of the current line
        self._matched_line = False  # the current (long) line already matched in a piece
        self._consumed = 0  # bytes dropped from _pending so far
        self._pending = bytearray()

    def _test(self, piece: bytes) -> None:
        if self._matched_line:
            return
        line = piece.decode("utf-8", "replace").rstrip("\r")
        found = self.pattern.search(line)
        if found is None:
            return
        if len(self.matches) == MAX_MATCHES:
            self.more = True
            return
        self._matched_line = True
        self.last_match_line = self._line_no
        shown = _shown(line, found.start())
        self.matches.append(f"{self._line_no} @{self._line_start}: {shown}")

    def feed(self, chunk: bytes) -> None:
        """Test every line `chunk` completes; a long line is tested in pieces."""
        self._pending += chunk
        start = 0
        while not self.more:
            newline = self._pending.find(b"\n", start)
            if newline < 0:
                break
            self._test(bytes(self._pending[start:newline]))
            self._line_start = self._consumed + newline + 1
            self._line_no += 1
            self._matched_line = False
            start = newline + 1
        del self._pending[:start]
        self._consumed += start
        while len(self._pending) > MAX_LINE_BYTES and not self.more:
            self._test(bytes(self._pending[:MAX_LINE_BYTES]))
            del self._pending[:MAX_LINE_BYTES]
            self._consumed += MAX_LINE_BYTES

    def finish(self) -> None:
        """Test the last line, which has no newline after it."""
        if self._pending and not self.more:
            self._test(bytes(self._pending))
        self.lines = self._line_no - (0 if self._pending else 1)


def _sniff_binary(first: bytes) -> bool:
    head = first[:_SNIFF_BYTES]
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return True
    return b"\x00" in head


async def _grep(access: ArtifactAccess, info: ArtifactInfo, pattern: str) -> str:
    try:
        compiled = compile_linear(pattern)
    except RegexRefused as err:
        raise ToolError("InvalidPattern", f"pattern refused: {err}") from None
    grep = _Grep(compiled)
    first = True
    async with aclosing(access.chunks(info.artifact_id)) as chunks:
        async for chunk in chunks:
            if first and _sniff_binary(chunk):
                raise _binary(info)
            first = False
            # ~50 ms of matching per MiB: in a thread, so heartbeats and other calls go on.
            await asyncio.to_thread(grep.feed, chunk)
            if grep.more:
                break
    if not grep.more:
        grep.finish()
    shown = pattern if len(pattern) <= 80 else pattern[:80] + "..."
    if grep.more:
        head = (
            f"the first {MAX_MATCHES} lines matching {shown!r}; more match after line "
            f"{grep.last_match_line}: narrow the pattern, or read around a match with "
            "offset (its byte offset follows '@')"
        )
    else:
        head = f"{len(grep.matches)} of {grep.lines} lines match {shown!r}"
    return "\n".join([f"[{_label(info)}: {head}]", *grep.matches])


@tool(
    effect="read_only",
    name="read_artifact",
    description=(
        "Page through (offset, length in bytes) or grep (pattern; lines with their numbers) "
        "a stored result of this task, such as one shown truncated. Text only."
    ),
)
async def read_artifact_tool(
    ctx: ToolContext,
    artifact: str,
    offset: Annotated[int, Field(ge=0)] = 0,
    length: Annotated[int, Field(ge=1, le=MAX_PAGE_BYTES)] = DEFAULT_PAGE_BYTES,
    pattern: str | None = None,
) -> str:
    """Page through or grep an artifact of this tenant and session tree.

    Args:
        artifact: Artifact id, or 8+ hex characters of its sha256.
        offset: Byte offset; each page tells the next one.
        length: Bytes per page.
        pattern: RE2 regex ((?i) ignores case; no lookaround): matching lines, not a page.
    """
    if ctx.artifacts is None:
        raise ToolError("ArtifactsUnavailable", "stored artifacts are not available here")
    info = await ctx.artifacts.find(artifact)
    if _declared_binary(info):
        raise _binary(info)
    if pattern is not None:
        return await _grep(ctx.artifacts, info, pattern)
    return await _page(ctx.artifacts, info, offset, length)
