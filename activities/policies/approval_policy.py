"""Approval policies: when a tool call must wait for a human.

A policy is a short string, so it can be configured per task and stored with it:
- `never` / `always`
- `outside:DIR` — needs approval unless the call's `path` argument is inside DIR
  (relative, normalised; `..` can't escape): e.g. `outside:out` lets write_file write
  reports into out/ unattended and asks for anything else
- `match:ARG:REGEX` — needs approval when the string argument ARG matches REGEX

REGEX is RE2 syntax, matched in time linear in the argument's length: a policy is evaluated
on the worker's event loop for every tool call, and a backtracking engine let one pattern
(`^(a+)+$` on 30 characters) stall every tenant's tasks on that worker. What RE2 cannot do
in linear time (backreferences, lookaround) is refused when the task starts. The whole
argument is matched, not a prefix: a cut would let padding slip a call past a policy; the
argument itself is bounded by the tool-argument limit (AGENT_MAX_TOOL_ARGUMENT_BYTES).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from durable_agents.activities.policies.linear_regex import RegexRefused, compile_linear


class PolicyError(ValueError):
    pass


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
    if kind == "match":
        arg, sep, pattern = rest.partition(":")
        if arg and sep:
            try:
                _compiled(pattern)
            except PolicyError as err:
                raise PolicyError(f"policy {policy[:80]!r}: {err}") from None
            return policy
    raise PolicyError(
        f"unknown approval policy {policy[:80]!r}; use never, always, outside:DIR or "
        "match:ARG:REGEX"
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


def needs_any(policies: Sequence[str], arguments: dict[str, Any]) -> bool:
    """Whether any of `policies` holds a call with `arguments` for a decision."""
    return any(needs_approval(policy, arguments) for policy in policies)


def _inside(path: object, directory: str) -> bool:
    if not isinstance(path, str) or not path or path.startswith("/"):
        return False
    norm = posixpath.normpath(path)
    base = posixpath.normpath(directory.strip("/"))
    return norm == base or norm.startswith(base + "/")


def needs_approval(policy: str, arguments: dict[str, Any]) -> bool:
    """Whether a call with `arguments` must wait for a decision under `policy`."""
    kind, _, rest = policy.partition(":")
    if kind != "match":
        kind, _, rest = validate(policy).partition(":")
    if kind == "never":
        return False
    if kind == "always":
        return True
    if kind == "outside":
        return not _inside(arguments.get("path"), rest)
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
