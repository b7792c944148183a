"""The claim check's rewriting of one JSON value: large parts out, references in.

Pure and synchronous; workers/peers/claim_check.py does the uploads and downloads around it.
Bottom-up, each rewritten value is named by its sha256 when it is large:

- a string of `string_threshold` UTF-8 bytes or more: {"$da": "s<size>:<sha256>"};
- an object whose rewritten JSON is `object_threshold` bytes or more: {"$da": "j<token>"}
  (an SDK's tool definitions and each long message are then stored once, not per call);
- a list of at least `group` items, once they were rewritten: its leading groups of `group`
  items become content-addressed JSON arrays, named in "c" (a list of tokens, rewritten by
  the same rule), the last `len % group` items stay inline in "t": {"$da": "l", "c", "t"}.
  Groups start at index 0, so a list that only grows (a conversation sent again with every
  model call) yields the same groups each time, each stored once, and a model call's input
  keeps O(group · log N) bytes of references, not O(N).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MARK = "$da"
STRING_TYPE = "text/plain; charset=utf-8"
JSON_TYPE = "application/json"
_REF_BYTES = 90  # {"$da":"j<size>:<sha256>"}, about


class MarkerCollision(ValueError):
    """The value already holds an object with our marker key: it is left as it was."""


@dataclass(frozen=True)
class Blob:
    sha256: str
    data: bytes
    content_type: str

    @property
    def token(self) -> str:
        return token(self.sha256, len(self.data))


def token(sha256: str, size: int) -> str:
    return f"{size}:{sha256}"


def parse_token(text: object) -> tuple[str, int]:
    """(sha256, size) of a token; ValueError naming it when it is not one of ours."""
    if isinstance(text, str):
        size, _, sha = text.partition(":")
        if size.isdigit() and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha):
            return sha, int(size)
    raise ValueError(f"malformed claim-check reference {str(text)[:80]!r}")


def dumps(value: Any) -> bytes:
    """Canonical JSON: the same value gives the same bytes, so the same part the same sha."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode()


class Encoder:
    """Rewrites values; `blobs` collects what the references it wrote name (token -> Blob)."""

    def __init__(self, string_threshold: int, object_threshold: int, group: int) -> None:
        self.string_threshold = string_threshold
        self.object_threshold = object_threshold
        self.group = group
        self.blobs: dict[str, Blob] = {}

    def _blob(self, data: bytes, content_type: str) -> str:
        blob = Blob(hashlib.sha256(data).hexdigest(), data, content_type)
        self.blobs.setdefault(blob.token, blob)
        return blob.token

    def encode(self, value: Any) -> Any:
        """The rewritten value. The value itself is never replaced by one reference: a
        payload of one reference would store the whole, new each call, for nothing."""
        if isinstance(value, dict):
            if MARK in value:
                raise MarkerCollision(MARK)
            return {k: self._encode(v)[0] for k, v in value.items()}
        return self._encode(value)[0]

    def _encode(self, value: Any) -> tuple[Any, int]:
        """The rewritten value and about how many bytes of JSON it is (sizes decide what
        moves out; only large parts are serialized, once)."""
        if isinstance(value, str):
            # A str of n characters has n to 4n UTF-8 bytes: only long ones need encoding.
            if 4 * len(value) < self.string_threshold:
                return value, len(value) + 2
            data = value.encode()
            if len(data) < self.string_threshold:
                return value, len(data) + 2
            return {MARK: "s" + self._blob(data, STRING_TYPE)}, _REF_BYTES
        if isinstance(value, list):
            parts = [self._encode(v) for v in value]
            return self._groups([v for v, _ in parts], [n for _, n in parts])
        if isinstance(value, dict):
            if MARK in value:
                raise MarkerCollision(MARK)
            out, size = {}, 2
            for k, v in value.items():
                out[k], n = self._encode(v)
                size += len(str(k)) + 4 + n
            if size < self.object_threshold:
                return out, size
            return {MARK: "j" + self._blob(dumps(out), JSON_TYPE)}, _REF_BYTES
        return value, 8

    def _groups(self, items: list[Any], sizes: list[int]) -> tuple[Any, int]:
        size = 2 + sum(sizes) + len(items)
        full = len(items) - len(items) % self.group
        if full == 0 or sum(sizes[:full]) < self.object_threshold:
            return items, size
        tokens: list[Any] = [
            self._blob(dumps(items[i : i + self.group]), JSON_TYPE)
            for i in range(0, full, self.group)
        ]
        chunks, chunk_size = self._groups(tokens, [_REF_BYTES] * len(tokens))
        tail = sum(sizes[full:]) + len(items) - full
        return {MARK: "l", "c": chunks, "t": items[full:]}, chunk_size + tail + 20


def _refs(value: Any, parsed: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, token) the value needs: "s" a string, "j" a JSON part not yet in `parsed`."""
    if isinstance(value, list):
        for v in value:
            yield from _refs(v, parsed)
        return
    if not isinstance(value, dict):
        return
    kind = value.get(MARK)
    if kind is None:
        for v in value.values():
            yield from _refs(v, parsed)
    elif isinstance(kind, str) and kind[:1] == "s":
        yield "s", kind[1:]
    elif isinstance(kind, str) and kind[:1] == "j":
        if kind[1:] in parsed:
            yield from _refs(parsed[kind[1:]], parsed)
        else:
            yield "j", kind[1:]
    elif kind == "l":
        pending = list(_refs(value.get("c"), parsed))
        if pending:  # the group list itself is still being fetched
            yield from pending
            return
        for tok in _group_tokens(value.get("c"), parsed):
            if tok in parsed:
                yield from _refs(parsed[tok], parsed)
            else:
                yield "j", tok
        yield from _refs(value.get("t"), parsed)
    else:
        raise ValueError(f"unknown claim-check node {str(kind)[:40]!r}")


def _group_tokens(c: Any, parsed: dict[str, Any]) -> list[str]:
    out = _restore(c, {}, parsed)
    if not isinstance(out, list) or not all(isinstance(t, str) for t in out):
        raise ValueError("malformed claim-check list")
    return out


def missing(value: Any, strings: dict[str, str], parsed: dict[str, Any]) -> set[tuple[str, str]]:
    """(kind, token) to fetch before `restore` can rebuild `value`, a round at a time: a
    part's own references show up once the part itself was fetched."""
    known = {"s": strings, "j": parsed}
    return {(k, t) for k, t in _refs(value, parsed) if t not in known[k]}


def restore(value: Any, strings: dict[str, str], parsed: dict[str, Any]) -> Any:
    """`value` with every reference replaced by what it names (all fetched already)."""
    return _restore(value, strings, parsed)


def _restore(value: Any, strings: dict[str, str], parsed: dict[str, Any]) -> Any:
    if isinstance(value, list):
        return [_restore(v, strings, parsed) for v in value]
    if not isinstance(value, dict):
        return value
    kind = value.get(MARK)
    if kind is None:
        return {k: _restore(v, strings, parsed) for k, v in value.items()}
    if isinstance(kind, str) and kind[:1] == "s":
        return strings[kind[1:]]
    if isinstance(kind, str) and kind[:1] == "j":
        return _restore(parsed[kind[1:]], strings, parsed)
    items: list[Any] = []
    for tok in _group_tokens(value.get("c"), parsed):
        items.extend(_restore(parsed[tok], strings, parsed))
    items.extend(_restore(value.get("t") or [], strings, parsed))
    return items
