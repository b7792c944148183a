"""Approval policies: when a tool call must wait for a human.

A policy is a short string, so it can be configured per task and stored with it:
- `never` / `always`
- `outside:DIR` — needs approval unless the call's `path` argument is inside DIR
  (relative, normalised; `..` can't escape): e.g. `outside:out` lets write_file write
  reports into out/ unattended and asks for anything else
- `match:ARG:REGEX` — needs approval when the string argument ARG matches REGEX
"""

from __future__ import annotations

import posixpath
import re
from typing import Any


class PolicyError(ValueError):
    pass


def validate(policy: str) -> str:
    """Return `policy` if it is well formed, else raise PolicyError saying why."""
    kind, _, rest = policy.partition(":")
    if kind in ("never", "always") and not rest:
        return policy
    if kind == "outside" and rest:
        return policy
    if kind == "match":
        arg, sep, pattern = rest.partition(":")
        if arg and sep:
            try:
                re.compile(pattern)
            except re.error as err:
                raise PolicyError(f"policy {policy!r}: bad regex: {err}") from None
            return policy
    raise PolicyError(
        f"unknown approval policy {policy!r}; use never, always, outside:DIR or match:ARG:REGEX"
    )


def _inside(path: object, directory: str) -> bool:
    if not isinstance(path, str) or not path or path.startswith("/"):
        return False
    norm = posixpath.normpath(path)
    base = posixpath.normpath(directory.strip("/"))
    return norm == base or norm.startswith(base + "/")


def needs_approval(policy: str, arguments: dict[str, Any]) -> bool:
    """Whether a call with `arguments` must wait for a decision under `policy`."""
    kind, _, rest = validate(policy).partition(":")
    if kind == "never":
        return False
    if kind == "always":
        return True
    if kind == "outside":
        return not _inside(arguments.get("path"), rest)
    arg, _, pattern = rest.partition(":")
    value = arguments.get(arg)
    return isinstance(value, str) and re.search(pattern, value) is not None
