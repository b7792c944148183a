"""Approval policies: when a tool call must wait for a human.

A policy is a short string, so it can be configured per task and stored with it:
- `never` / `always`
- `outside:DIR` — needs approval unless the call's `path` argument is inside DIR
  (relative, normalised; `..` can't escape): e.g. `outside:out` lets write_file write
  reports into out/ unattended and asks for anything else
- `match:ARG:REGEX` — needs approval when the string argument ARG matches REGEX
- `exists:ARG` — needs approval when the argument ARG names something that exists in the
  task's workspace: `exists:path` lets write_file create files unattended and asks before
  it replaces one (edit_file's default). Looked up by the activity that decides, on the
  worker holding the workspace; where it cannot look (no workspace, a packed one, a
  device's tool) it asks. A call let through because ARG named nothing runs only while
  that holds (see `existence_args` and activities/tool_call_refs.py)

REGEX is RE2 syntax, matched in time linear in the argument's length: a policy is evaluated
on the worker's event loop for every tool call, and a backtracking engine let one pattern
(`^(a+)+$` on 30 characters) stall every tenant's tasks on that worker. What RE2 cannot do
in linear time (backreferences, lookaround) is refused when the task starts. The whole
argument is matched, not a prefix: a cut would let padding slip a call past a policy; the
argument itself is bounded by the tool-argument limit (AGENT_MAX_TOOL_ARGUMENT_BYTES).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from durable_agents.activities.policies.linear_regex import RegexRefused, compile_linear


class PolicyError(ValueError):
    pass


# Answers whether a (model-supplied, unchecked) argument value names something in the
# workspace; None: nobody can look, so `exists:` policies ask.
Existence = Callable[[object], bool]

_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _compiled(pattern: str) -> Any:
    """The compiled pattern; raises PolicyError saying why RE2 cannot take it."""
    try:
        return compile_linear(pattern)
    except RegexRefused as err:
        raise PolicyError(str(err)) from None


def validate(policy: str) -> str:
    """Return `policy` if it is well formed, else raise PolicyError saying why."""
    kind, _, rest = policy.partition(":")
    if kind in ("never", "always") and not rest:
        return policy
    if kind == "outside" and rest:
        return policy
    if kind == "exists" and _ARG_NAME.fullmatch(rest):
        return policy
    if kind == "match":
        arg, sep, pattern = rest.partition(":")
        if arg and sep:
            try:
                _compiled(pattern)
            except PolicyError as err:
                raise PolicyError(f"policy {policy[:80]!r}: {err}") from None
            return policy
    raise PolicyError(
        f"unknown approval policy {policy[:80]!r}; use never, always, outside:DIR, "
        "match:ARG:REGEX or exists:ARG"
    )


def policy_for(
    policies: Mapping[str, str], name: str, aliases: Sequence[str] = (), default: str = "never"
) -> str:
    """The policy a call of tool `name` runs under: the one keyed by its model-facing name,
    else by the first of `aliases` the task names (an MCP tool's `server.tool`, then
    `server.*`), else `default`."""
    for key in (name, *aliases):
        if key in policies:
            return policies[key]
    return default


def call_policies(
    name: str,
    aliases: Sequence[str],
    *,
    default: str,
    agent: Mapping[str, str],
    task: Mapping[str, str],
    loosened: Mapping[str, str],
) -> tuple[str, ...]:
    """Every policy a call of tool `name` must pass. The agent's (or, with none, the tool's
    `default`) always applies unless a loosening an authorised caller committed replaces
    it; the task's own policy, if any, is one more condition: a task can ask for more
    approvals than its agent, never for fewer."""
    base = policy_for(loosened, name, aliases, "") or policy_for(agent, name, aliases, default)
    extra = policy_for(task, name, aliases, "")
    return (base, extra) if extra else (base,)


def needs_any(
    policies: Sequence[str], arguments: dict[str, Any], exists: Existence | None = None
) -> bool:
    """Whether any of `policies` holds a call with `arguments` for a decision."""
    return any(needs_approval(policy, arguments, exists) for policy in policies)


def existence_args(policies: Sequence[str]) -> frozenset[str]:
    """The arguments `exists:` policies among `policies` look up. A call of them that ran
    without a person's approval was let through because each named nothing, and must not
    find that it names something when it runs."""
    found = set()
    for policy in policies:
        kind, _, rest = policy.partition(":")
        if kind == "exists":
            found.add(rest)
    return frozenset(found)


def _inside(path: object, directory: str) -> bool:
    if not isinstance(path, str) or not path or path.startswith("/"):
        return False
    norm = posixpath.normpath(path)
    base = posixpath.normpath(directory.strip("/"))
    return norm == base or norm.startswith(base + "/")


def needs_approval(policy: str, arguments: dict[str, Any], exists: Existence | None = None) -> bool:
    """Whether a call with `arguments` must wait for a decision under `policy`; `exists`
    looks an `exists:` policy's argument up (None: it cannot be looked up, so it asks)."""
    kind, _, rest = policy.partition(":")
    if kind != "match":
        kind, _, rest = validate(policy).partition(":")
    if kind == "never":
        return False
    if kind == "always":
        return True
    if kind == "outside":
        return not _inside(arguments.get("path"), rest)
    if kind == "exists":
        return exists is None or exists(arguments.get(rest))
    arg, sep, pattern = rest.partition(":")
    try:
        if not (arg and sep):
            validate(policy)  # raises, saying why
        compiled = _compiled(pattern)
    except PolicyError:
        # Fail closed: a task started before patterns were checked for RE2 may carry one
        # that RE2 refuses; asking a human beats failing every model step of that task.
        return True
    value = arguments.get(arg)
    return isinstance(value, str) and compiled.search(value) is not None
