"""`agentctl start`'s option parsers: the check (--check-file, --check-contains PATH=TEXT)
and approval policies (--policy, --loosen TOOL=POLICY)."""

from __future__ import annotations

from typing import Any


def check_options(files: list[str], pairs: list[str]) -> dict[str, Any]:
    contains: dict[str, list[str]] = {}
    for pair in pairs:
        path, sep, text = pair.partition("=")
        if not sep or not path or not text:
            raise ValueError(f"--check-contains wants PATH=TEXT, got {pair!r}")
        contains.setdefault(path, []).append(text)
    return {"files": files, "contains": contains}


def policy_options(pairs: list[str] | None) -> dict[str, str]:
    policies = {}
    for pair in pairs or []:
        tool, sep, policy = pair.partition("=")
        if not sep or not tool:
            raise ValueError(f"--policy wants TOOL=POLICY, got {pair!r}")
        policies[tool] = policy
    return policies
