"""Context overflow: a request longer than the server's window, recognised in the error shapes
of real servers, so the caller can shrink the request and try again instead of failing.

Shapes recognised (the numbers are parsed when the message gives them):

- llama.cpp server: ``{"error": {"type": "exceed_context_size_error", "message": "request
  (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
  "n_prompt_tokens": 4476, "n_ctx": 4096}}``; older builds say only "the request exceeds the
  available context size, try increasing it". llama-cpp-python: "Requested tokens (2829)
  exceed context window of 2048".
- vLLM and OpenAI: "This model's maximum context length is 2048 tokens. However, you
  requested 2829 tokens (2317 in the messages, 512 in the completion)", "... However, your
  request has 2829 input tokens", "... and your request has 2104 input tokens (2000 > 4096 -
  2104)", "... However, you requested 512 output tokens and your prompt contains at least
  1600 input tokens"; OpenAI's ``code`` is ``context_length_exceeded``.
- Anthropic: "prompt is too long: 208656 tokens > 200000 maximum", "input length and
  `max_tokens` exceed context limit: 197202 + 8192 > 200000".

Token counts here are the server's, in its own tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from durable_agents.activities.providers.failure import ProviderError

CONTEXT_OVERFLOW = "ContextOverflow"

_MARKERS = (
    "exceed_context_size_error",
    "context_length_exceeded",
    "exceeds the available context size",
    "maximum context length is",
    "prompt is too long",
    "exceed context limit",
    "exceed context window",
    "input tokens exceed the configured limit",
)
# window: the server's context size; prompt: tokens of the prompt; reply: of the completion.
_NUMBERS = (
    re.compile(
        r"request \((?P<prompt>\d+) tokens\) exceeds the available context size "
        r"\((?P<window>\d+)"
    ),
    re.compile(r"requested tokens \((?P<prompt>\d+)\) exceed context window of (?P<window>\d+)"),
    re.compile(
        r"maximum context length is (?P<window>\d+) tokens\. however, you requested "
        r"(?P<total>\d+) tokens \((?P<prompt>\d+) in the messages, (?P<reply>\d+) in the completion"
    ),
    re.compile(
        r"maximum context length is (?P<window>\d+) tokens(?:\. however,| and) your request "
        r"has (?P<prompt>\d+) input tokens"
    ),
    re.compile(
        r"maximum context length is (?P<window>\d+) tokens\. however, you requested "
        r"(?P<reply>\d+) output tokens and your prompt contains at least (?P<prompt>\d+)"
    ),
    re.compile(
        r"maximum context length is (?P<window>\d+) tokens\. however, your messages resulted "
        r"in (?P<prompt>\d+) tokens"
    ),
    re.compile(
        r"maximum context length is (?P<window>\d+) tokens\. however, you requested "
        r"(?P<total>\d+) tokens"
    ),
    re.compile(r"prompt is too long: (?P<prompt>\d+) tokens > (?P<window>\d+) maximum"),
    re.compile(r"exceed context limit: (?P<prompt>\d+) \+ (?P<reply>\d+) > (?P<window>\d+)"),
    re.compile(
        r"exceed the configured limit of (?P<window>\d+) tokens\. your messages resulted in "
        r"(?P<prompt>\d+) tokens"
    ),
    re.compile(r"maximum context length is (?P<window>\d+) tokens"),
)


@dataclass(frozen=True)
class Overflow:
    """What a server said about a request that did not fit (None: it did not say)."""

    window: int | None = None
    prompt_tokens: int | None = None
    reply_tokens: int | None = None
    # Prompt and reply together, when the server gave only their sum.
    total_tokens: int | None = None


def recognise_overflow(body: object) -> Overflow | None:
    """The overflow a decoded error body describes, or None if it is some other error."""
    inner: Any = body
    if isinstance(inner, Mapping) and isinstance(inner.get("error"), Mapping):
        inner = inner["error"]
    if isinstance(inner, Mapping):
        text = " ".join(str(inner.get(k) or "") for k in ("type", "code", "message"))
    elif isinstance(inner, bytes):
        text = inner.decode("utf-8", "replace")
    else:
        text = str(inner or "")
    text = " ".join(text.lower().split())
    if not any(marker in text for marker in _MARKERS):
        return None
    found = _numbers(text)
    if isinstance(inner, Mapping):
        # llama.cpp also gives the numbers as fields; they beat the prose.
        fields = {"window": inner.get("n_ctx"), "prompt": inner.get("n_prompt_tokens")}
        found.update({k: v for k, v in fields.items() if isinstance(v, int)})
    return Overflow(
        found.get("window"), found.get("prompt"), found.get("reply"), found.get("total")
    )


def _numbers(text: str) -> dict[str, int]:
    for pattern in _NUMBERS:
        match = pattern.search(text)
        if match:
            return {k: int(v) for k, v in match.groupdict().items() if v is not None}
    return {}


def overflow_error(message: str, overflow: Overflow) -> ProviderError:
    """The provider's error for an overflow. Retryable: the caller learns the window from its
    details, so the next attempt sends less; the details are numbers only."""
    return ProviderError(message, asdict(overflow), type=CONTEXT_OVERFLOW)


def overflow_of(error: BaseException) -> Overflow | None:
    """The Overflow a provider's error carries (the ProviderError, or the ApplicationError the
    activity edge made of it), or None for other errors."""
    details_of = getattr(error, "details", None)
    if getattr(error, "type", None) != CONTEXT_OVERFLOW or not isinstance(details_of, tuple | list):
        return None
    details = details_of[0] if details_of else {}
    if not isinstance(details, Mapping):
        return Overflow()
    known = Overflow.__dataclass_fields__
    return Overflow(**{k: v for k, v in details.items() if k in known and isinstance(v, int)})
