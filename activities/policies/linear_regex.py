"""Regular expressions from untrusted text, compiled by RE2: matching takes time linear in
the subject's length, whatever the pattern. A backtracking engine would let one pattern
(`^(a+)+$` on 30 characters) stall a worker's event loop; what RE2 cannot do in linear time
(backreferences, lookaround) is refused with the reason."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

# Long enough for any sensible pattern; one of megabytes would only cost compile memory.
MAX_PATTERN_CHARS = 512
# RE2's own memory budget for one compiled pattern (its default is 8 MiB too); a pattern
# that needs more, e.g. nested counted repetitions, fails to compile and is refused.
_MAX_PATTERN_MEMORY = 8 << 20


class RegexRefused(ValueError):
    """RE2 cannot take the pattern; the message says why."""


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = _MAX_PATTERN_MEMORY
    options.log_errors = False  # the reason goes into the exception, not to stderr
    return options


@lru_cache(maxsize=256)
def compile_linear(pattern: str) -> Any:
    """The compiled pattern (`.search(text)`); RegexRefused saying why RE2 cannot take it."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RegexRefused(f"regex of {len(pattern)} characters is longer than {MAX_PATTERN_CHARS}")
    try:
        return re2.compile(pattern, _options())
    except re2.error as err:
        reason = err.args[0] if err.args else err
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RegexRefused(
            f"bad regex: {reason} (RE2 syntax: no backreferences or lookaround)"
        ) from None
