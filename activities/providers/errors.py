"""Provider failures as ProviderErrors (providers/failure.py), so Temporal (not an SDK) owns
retries: the activity edge raises each as an ApplicationError with the same fields.

Every provider maps its SDK's exceptions through these functions. The messages carry the
provider name, the HTTP status and a short summary of the vendor's error; they never carry
the API key or the prompt, because they end up in workflow history and in logs. Callers
must raise the result ``from None``: a chained SDK exception would be serialized into
history too, with the full response body in its message.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from durable_agents.activities.providers.failure import ProviderError
from durable_agents.activities.providers.overflow import overflow_error, recognise_overflow
from durable_agents.vocabulary.non_answers import CUT_FINISH_REASONS

MODEL_UNAVAILABLE = "ModelUnavailable"
MODEL_AUTH_ERROR = "ModelAuthError"
MODEL_REQUEST_REJECTED = "ModelRequestRejected"

# Tool-call arguments that are not a JSON object are kept under this key, for the tool layer
# to reject: one bad tool call from the model must not fail the whole model call.
RAW_ARGUMENTS_KEY = "_raw"
# Beside it, when the reply ran out of tokens before the arguments ended: a call to make
# again shorter, not one to correct.
CUT_ARGUMENTS_KEY = "_cut"

# Statuses where the same request can succeed later.
_RETRYABLE_STATUSES = frozenset({408, 409, 429})
_AUTH_STATUSES = frozenset({401, 403})
_MAX_SUMMARY_CHARS = 200
# A vendor asking for a longer pause than this is more likely broken than busy; Temporal's
# own backoff is the better guide then.
_MAX_RETRY_AFTER = timedelta(minutes=10)
# Key-shaped tokens (sk-..., sk-ant-..., Bearer ...) that vendors sometimes echo back, partly
# masked, in auth errors.
_KEY_LIKE = re.compile(r"(?i)\b(sk-[A-Za-z0-9_\-*]{6,}|bearer\s+\S+)")


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status from a model vendor is worth retrying."""
    return status in _RETRYABLE_STATUSES or status >= 500


def status_error(
    provider: str,
    status: int,
    *,
    body: object = None,
    headers: Mapping[str, str] | None = None,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """Map an HTTP error response from ``provider`` to a ProviderError.

    ``body`` is the decoded error body (dict or text) and ``secrets`` are strings (the API key)
    that must be scrubbed from the summary if the vendor echoes them back.
    """
    summary = summarize_error_body(body, secrets)
    message = f"{provider} returned HTTP {status}"
    if summary:
        message += f": {summary}"
    if status in _AUTH_STATUSES:
        return ProviderError(message, type=MODEL_AUTH_ERROR, non_retryable=True)
    overflow = recognise_overflow(body) if status != 429 else None
    if overflow is not None:
        # Not a malformed request: the same conversation, sent shorter, will do.
        return overflow_error(message, overflow)
    if is_retryable_status(status):
        delay = retry_after_delay(headers)
        if delay is not None:
            message += f" (retry after {delay.total_seconds():g}s)"
        return ProviderError(message, type=MODEL_UNAVAILABLE, next_retry_delay=delay)
    return ProviderError(message, type=MODEL_REQUEST_REJECTED, non_retryable=True)


def connection_error(provider: str, *, timed_out: bool, cause: str | None = None) -> ProviderError:
    """Map a failure to reach ``provider`` (no HTTP response at all) to a retryable error.

    ``cause`` is a short description such as the underlying exception's class name.
    """
    what = "timed out" if timed_out else "could not be reached"
    message = f"{provider} {what}"
    if cause:
        message += f" ({cause})"
    return ProviderError(message, type=MODEL_UNAVAILABLE)


def bad_response(provider: str, detail: str) -> ProviderError:
    """A 2xx reply we cannot use (no choices, wrong shape); a later attempt may be fine."""
    message = f"{provider} returned an unusable reply: {detail}"
    return ProviderError(message, type=MODEL_UNAVAILABLE)


def rejected_request(provider: str, detail: str) -> ProviderError:
    """A request we refuse to send because it is malformed; retrying cannot fix it."""
    return ProviderError(
        f"request to {provider} is malformed: {detail}",
        type=MODEL_REQUEST_REJECTED,
        non_retryable=True,
    )


def retry_after_delay(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> timedelta | None:
    """The server-requested delay from ``Retry-After-Ms`` or ``Retry-After``, if any.

    ``Retry-After`` may be seconds or an HTTP date. Nonsense values give None, so Temporal's
    retry policy decides instead.
    """
    if not headers:
        return None
    lowered = {name.lower(): value for name, value in headers.items()}
    seconds: float | None = None
    if "retry-after-ms" in lowered:
        seconds = _parse_float(lowered["retry-after-ms"])
        seconds = None if seconds is None else seconds / 1000
    if seconds is None and "retry-after" in lowered:
        raw = lowered["retry-after"]
        seconds = _parse_float(raw)
        if seconds is None:
            seconds = _seconds_until_http_date(raw, time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return min(timedelta(seconds=seconds), _MAX_RETRY_AFTER)


def summarize_error_body(body: object, secrets: Iterable[str] = ()) -> str:
    """A one-line, truncated, secret-free summary of a vendor error body.

    Understands the OpenAI shape (``{"error": {"message", "type", "code"}}`` or its inner
    dict) and the Anthropic shape (``{"type": "error", "error": {"type", "message"}}``).
    """
    inner: Any = body
    if isinstance(inner, Mapping) and isinstance(inner.get("error"), Mapping):
        inner = inner["error"]
    if isinstance(inner, Mapping):
        kind = inner.get("type") or inner.get("code")
        text = inner.get("message")
        parts = [str(p) for p in (kind, text) if p]
        summary = ": ".join(parts) if parts else json.dumps(inner, default=str)
    elif isinstance(inner, bytes):
        summary = inner.decode("utf-8", "replace")
    elif inner is None:
        summary = ""
    else:
        summary = str(inner)
    return _truncate(_redact(" ".join(summary.split()), secrets))


def cut_marked(arguments: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    """`arguments`, marked cut (CUT_ARGUMENTS_KEY) when they are raw and the reply that
    holds them ended at its token limit."""
    if RAW_ARGUMENTS_KEY in arguments and finish_reason in CUT_FINISH_REASONS:
        return {**arguments, CUT_ARGUMENTS_KEY: True}
    return arguments


def parse_tool_arguments(raw: object) -> dict[str, Any]:
    """Turn a model's tool arguments into a dict; anything but a JSON object is kept raw.

    OpenAI sends a JSON string, Anthropic an object; lenient servers send either. Malformed
    arguments are the model's mistake, not a provider failure, so they go to the tool layer
    (which reports them back to the model) under ``RAW_ARGUMENTS_KEY`` instead of raising.
    """
    if isinstance(raw, dict):
        return {str(key): value for key, value in raw.items()}
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        # Several OpenAI-compatible servers send "" for a tool without parameters.
        return {}
    if not isinstance(raw, str):
        return {RAW_ARGUMENTS_KEY: json.dumps(raw, default=str)}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: raw}
    if not isinstance(parsed, dict):
        return {RAW_ARGUMENTS_KEY: raw}
    return parsed


def _redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _KEY_LIKE.sub("[redacted]", text)


def _truncate(text: str) -> str:
    if len(text) <= _MAX_SUMMARY_CHARS:
        return text
    return text[: _MAX_SUMMARY_CHARS - 3] + "..."


def _parse_float(raw: str) -> float | None:
    try:
        return float(raw.strip())
    except ValueError:
        return None


def _seconds_until_http_date(raw: str, now: float) -> float | None:
    try:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is None:
            return None
        return float(email.utils.mktime_tz(parsed)) - now
    except (TypeError, ValueError, OverflowError):
        return None
