"""Running one offered call on the device: the tool, under the call's key, on the device's
workspace, with no AgentState at hand (memory and artifact tools answer that they need
the cloud). What comes back is bytes or an error, and for an effectful tool its effect
state: the gateway commits it (workers/device_dispatch/calls.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durable_agents.activities.policies.text_limits import ARGUMENTS_TOO_LARGE, oversized_arguments
from durable_agents.activities.tools.args import check_allowed
from durable_agents.activities.tools.base import (
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
    TransientToolError,
)
from durable_agents.activities.tools.effects import (
    EFFECT_IN_DOUBT,
    in_doubt_text,
    reconcile_interrupted,
)
from durable_agents.activities.tools.fetch_policy import FetchPolicy
from durable_agents.activities.tools.outcomes import failure_words

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalResult:
    output: ToolOutput | None
    error_type: str | None = None
    error: str = ""
    # For an effectful tool: completed | failed | reconciled | in_doubt.
    effect: str | None = None


@dataclass(frozen=True)
class LocalTools:
    """The tools this device serves, by agent, and the limits it runs them under."""

    registries: Mapping[str, ToolRegistry]
    workspace: Path
    fetch: FetchPolicy
    max_argument_bytes: int

    async def run(
        self,
        *,
        tool_name: str,
        arguments: dict[str, Any],
        agent: str,
        idempotency_key: str,
        tenant_id: str,
        offered_before: bool,
    ) -> LocalResult:
        """Run the call once; a device that went away mid-call asks `reconcile` first."""
        registry = self.registries.get(agent)
        if registry is None:
            # A task of an agent this device was not started with: never another's tools.
            served = ", ".join(sorted(self.registries)[:20])
            return LocalResult(
                None, "UnknownAgent", f"this device serves agents {served}, not {agent[:100]!r}"
            )
        tool = registry.get(tool_name)
        if tool is None:
            names = ", ".join(sorted(registry.tools)[:20]) or "none"
            return LocalResult(
                None,
                "UnknownTool",
                f"there is no tool named {tool_name[:100]!r}; the tools are: {names}",
            )
        too_large = oversized_arguments(arguments, self.max_argument_bytes)
        if too_large is not None:
            return LocalResult(None, ARGUMENTS_TOO_LARGE, too_large)
        ctx = ToolContext(
            idempotency_key=idempotency_key,
            workspace=self.workspace,
            tenant_id=tenant_id,
            session_id="",
            fetch=self.fetch,
            agent_name=agent,
        )
        effectful = tool.effect == "effectful"
        try:
            check_allowed(arguments, tool.spec.parameters)
            if effectful and offered_before:
                settled = await reconcile_interrupted(tool, ctx, arguments)
                if settled is not None:
                    return LocalResult(
                        settled.output, settled.error_type, settled.error or "", settled.state
                    )
            output = await tool.fn(ctx, arguments)
            return LocalResult(output, effect="completed" if effectful else None)
        except ToolError as err:
            return LocalResult(None, err.error_type, err.message, "failed" if effectful else None)
        except TransientToolError as err:
            return LocalResult(None, "ToolFailed", str(err)[:300], "failed" if effectful else None)
        except Exception as exc:
            # Our words only (the type, an errno name): never a path or text the tool saw.
            logger.warning("tool %s raised %s", tool_name, type(exc).__name__)
            if effectful:  # it may have acted before it raised
                return LocalResult(None, EFFECT_IN_DOUBT, in_doubt_text(), "in_doubt")
            return LocalResult(None, "ToolRaised", f"{tool_name} failed: {failure_words(exc)}")
