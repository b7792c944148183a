"""A plain Temporal client's start input from flat fields, as the doors' TaskOptions take them:
the settings' names go into `settings`, the rest (ids, cursors, text) stay on AgentInput."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from durable_agents.workflows.contracts import AgentInput, TaskSettings

SETTINGS = frozenset(f.name for f in fields(TaskSettings))


def plain_input(session_id: str, tenant_id: str = "default", **given: Any) -> AgentInput:
    settings = TaskSettings(**{k: v for k, v in given.items() if k in SETTINGS})
    rest = {k: v for k, v in given.items() if k not in SETTINGS}
    return AgentInput(session_id=session_id, tenant_id=tenant_id, settings=settings, **rest)
