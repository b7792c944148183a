"""The effects contract at run time: an effectful call runs at most once per idempotency
key, or is reported in doubt (DESIGN invariant 8).

The ledger row is committed `started` before the tool runs; run_tool settles it in the
transaction that commits the result. An attempt that finds it started (an earlier one
died between the effect and that commit) never runs the tool again by itself: it asks the
tool's `reconcile`, and without an answer reports the call in doubt, which the loop turns
into an approval to run it again under a new key.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.tools.base import (
    EffectInDoubt,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    TransientToolError,
)
from durable_agents.activities.tools.workspace_probe import refuse_if_named
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import ItemRepository
from durable_agents.storage.models import ItemRow
from durable_agents.storage.tool_effects import SETTLED, EffectState
from durable_agents.vocabulary.item_kinds import ItemKind

log = logging.getLogger(__name__)

EFFECT_IN_DOUBT = "EffectInDoubt"
# The model's words for a call that may or may not have acted (ours, never a tool's).
_MAY_HAVE_ACTED = (
    "this call may or may not have taken effect: an attempt was interrupted after the call "
    "started and before its result was recorded"
)
_MAX_WHY_CHARS = 200


def in_doubt_text(why: str = "") -> str:
    """What the model reads while a person decides whether to run the call again."""
    reason = f" ({why[:_MAX_WHY_CHARS]})" if why else ""
    return (
        f"{_MAY_HAVE_ACTED}{reason}. It was not run again; a person is asked whether to "
        "run it again."
    )


def not_rerun_text(decision: str) -> str:
    """What the model reads when the person declined (or never answered) a re-run."""
    return f"{_MAY_HAVE_ACTED}. It was not run again: {decision}."


RERUN_NOTE = (
    "[An earlier attempt of this call was interrupted and may or may not have taken "
    "effect; a person approved running it again, and this is that run's result.]\n"
)


def awaits_decision(result: ItemRow) -> bool:
    """A result reported in doubt whose re-run nobody has decided yet."""
    return result.data.get("effect") == EffectState.IN_DOUBT and not result.data.get("declined")


async def latest_settlement(items: ItemRepository, result: ItemRow) -> ItemRow:
    """For a result in doubt, the call's newest result: a re-run decided since (a resumed
    run re-reads the step, and the decision stands). Any other result is final as it is."""
    if result.data.get("effect") != EffectState.IN_DOUBT or result.tool_call_id is None:
        return result
    rows = await items.for_tool_call(result.session_id, result.tool_call_id)
    newest = [r for r in rows if r.kind == ItemKind.TOOL_RESULT and r.ordinal >= result.ordinal]
    return newest[-1] if newest else result


@dataclass(frozen=True)
class EffectRun:
    """An effectful call's result and how its ledger row settles."""

    state: EffectState
    output: ToolOutput | None = None
    error_type: str | None = None
    error: str | None = None


class EffectLedger:
    """Runs effectful tools under their ledger row (one per tenant and idempotency key)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def run(
        self, tool: Tool, ctx: ToolContext, args: dict[str, Any], tool_call_id: str
    ) -> EffectRun:
        """Claim the call, then run it, reconcile it or report it in doubt."""
        key, session_id = ctx.idempotency_key, uuid.UUID(ctx.session_id)
        # A new key (the usual case) is one INSERT, committed by itself before the tool runs.
        async with agent_state(self._sessions, ctx.tenant_id, autocommit=True) as st:
            claim = await st.effects.claim_new(
                key, session_id=session_id, tool_call_id=tool_call_id, tool_name=tool.spec.name
            )
        if claim is None:
            async with agent_state(self._sessions, ctx.tenant_id, write=True) as st:
                claim = await st.effects.claim(
                    key, session_id=session_id, tool_call_id=tool_call_id, tool_name=tool.spec.name
                )
        if claim.found in SETTLED:
            # Another attempt settled the call after this one looked for its result: that
            # committed result stands (run_tool's commit finds it), nothing runs here.
            return EffectRun(EffectState.IN_DOUBT, None, EFFECT_IN_DOUBT, in_doubt_text())
        if not claim.fresh:
            log.warning(
                "effectful call %s found %s (attempt %d): reconciling",
                tool_call_id,
                claim.found,
                claim.attempt,
            )
            settled = await reconcile_interrupted(tool, ctx, args)
            if settled is not None:
                return settled
        try:
            if ctx.must_be_new:
                # After reconciling: a file an interrupted attempt wrote is not one that
                # appeared since the call was let through unasked.
                await asyncio.to_thread(refuse_if_named, ctx.workspace, args, ctx.must_be_new)
            return EffectRun(EffectState.COMPLETED, await tool.fn(ctx, args))
        except ToolError as err:
            # The tool's own verdict that the call failed: settled, not in doubt.
            return EffectRun(EffectState.FAILED, None, err.error_type, err.message)
        except TransientToolError:
            # The tool says retrying is safe (nothing happened): release the claim, so the
            # retry runs instead of being reported in doubt.
            async with agent_state(self._sessions, ctx.tenant_id, write=True) as st:
                await st.effects.release(ctx.idempotency_key)
            raise


async def reconcile_interrupted(
    tool: Tool, ctx: ToolContext, args: dict[str, Any]
) -> EffectRun | None:
    """The interrupted call's settlement, or None when it did not act (safe to run)."""
    if tool.reconcile is None:
        return EffectRun(EffectState.IN_DOUBT, None, EFFECT_IN_DOUBT, in_doubt_text())
    try:
        output = await tool.reconcile(ctx, args)
    except EffectInDoubt as doubt:
        return EffectRun(EffectState.IN_DOUBT, None, EFFECT_IN_DOUBT, in_doubt_text(str(doubt)))
    except ToolError as err:
        # Whatever made reconcile fail may not have stopped the interrupted attempt.
        return EffectRun(EffectState.IN_DOUBT, None, EFFECT_IN_DOUBT, in_doubt_text(err.message))
    if output is None:
        return None
    return EffectRun(EffectState.RECONCILED, output)
