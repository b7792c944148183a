"""The run_tool activity: execute, upload the full result, verify it, then commit the
tool_result item (ref + short preview). Upload-verify-commit is the order that makes a
crash at any point leave at most an orphan object, never a ref to a missing one."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.agent_catalog import unknown_agent
from durable_agents.activities.context.model_context import ConfigCache
from durable_agents.activities.errors import non_retryable, storage_errors_are_final
from durable_agents.activities.gatekeeper import Gatekeeper
from durable_agents.activities.heartbeat import heartbeating
from durable_agents.activities.policies.text_limits import (
    ARGUMENTS_TOO_LARGE,
    TextLimits,
    oversized_arguments,
)
from durable_agents.activities.repeated_calls import repeat_output, repeated, turn_calls
from durable_agents.activities.replays import replayed_by, serve_result
from durable_agents.activities.tool_call_refs import unasked_new_args
from durable_agents.activities.tools.args import check_allowed, check_args
from durable_agents.activities.tools.artifact_access import SqlArtifactAccess
from durable_agents.activities.tools.base import (
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
    TransientToolError,
)
from durable_agents.activities.tools.effects import EffectLedger, latest_settlement
from durable_agents.activities.tools.fetch_policy import PUBLIC_ONLY, FetchPolicy
from durable_agents.activities.tools.memory import SqlMemoryAccess
from durable_agents.activities.tools.outcomes import failure_words, outcome_of
from durable_agents.activities.tools.workspace_probe import refuse_if_named
from durable_agents.activities.trajectory import ToolCallEvent, TrajectoryRecorder
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.artifact_cache import ArtifactReadCache
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.call_reads import CallReads
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.replays import ReplayMark, replay_mark
from durable_agents.storage.tool_effects import EffectState
from durable_agents.storage.tool_results import ToolResult, VerifiedArtifact, commit_tool_result
from durable_agents.storage.workspace_lifecycle import restore_if_packed
from durable_agents.storage.workspace_seed import seed_if_new
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.vocabulary.item_marks import FAILED_CALL_KEY, REPEATS_KEY
from durable_agents.workflows.contracts import ArtifactRef, ToolOutcome, ToolRunInput

# An UnknownTool error lists the real tools, so a model that guessed a name can pick one;
# bounded so that the list fits in the error's preview.
_MAX_LISTED_TOOLS = 20


@dataclass(frozen=True)
class _Result:
    output: ToolOutput | None
    error_type: str | None = None
    error: str | None = None
    # An effectful call's ledger state, settled with the result (None: not ledgered).
    effect: EffectState | None = None
    # A failed call's fingerprint (failed_call()), kept with its result to count repeats.
    failed_call: str | None = None
    # The sha256 of the result a read-only call repeated (repeated_calls.py).
    repeats: str | None = None


class ToolActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore,
        registry: ToolRegistry,
        *,
        workspace: Path | WorkspaceLayout,
        fetch: FetchPolicy = PUBLIC_ONLY,
        recorder: TrajectoryRecorder | None = None,
        read_cache: ArtifactReadCache | None = None,
        max_tool_argument_bytes: int = TextLimits.max_tool_argument_bytes,
        agents: Mapping[str, ToolRegistry] | None = None,
        gate: Gatekeeper | None = None,
    ) -> None:
        """`registry`: the tools of the default agent; `agents`: the tools of every agent
        this worker serves, by agent name (a session runs the tools of its agent only).

        `workspace`: a WorkspaceLayout on the cloud (each session gets its own root, or
        its tenant's or project's as configured), or one fixed directory on a device, which
        serves the folder its user chose for every task of theirs.

        `fetch`: what fetch_url may reach (default: public addresses only).
        `read_cache`: the one call_model reads through, when both run in this process.
        `gate`: what admits each run (default: the kill switch and budgets, no quotas)."""
        self._max_argument_bytes = max_tool_argument_bytes
        self._sessions = sessions
        self._store = store
        self._registry = registry
        self._agents = agents
        self._workspace = workspace
        self._fetch = fetch
        self._recorder = recorder or TrajectoryRecorder.noop()
        self._read_cache = read_cache
        self._effects = EffectLedger(sessions)
        self._gate = gate or Gatekeeper(sessions)
        # The turns' recorded agent approvals, which `exists:` guards are read from.
        self._configs = ConfigCache()

    @activity.defn(name="run_tool")
    async def run_tool(self, inp: ToolRunInput) -> ToolOutcome:
        """Run one tool call once per idempotency key and commit its result."""
        session_id = uuid.UUID(inp.session_id)
        # Heartbeat through upload and commit too: a 200 MB upload must not look like a crash.
        async with storage_errors_are_final(), heartbeating():
            # Reads only.
            async with agent_state(self._sessions, inp.tenant_id, autocommit=True) as st:
                done = await st.items.by_key(inp.idempotency_key)
                if done is not None:
                    latest = await latest_settlement(st.items, done)
                    return await _counted(
                        st, latest, outcome_of(latest, inp.tenant_id, self._store.prefix)
                    )
                # Read first: the call's lineage (storage/lineage.py) is then the row's.
                session = await st.sessions.get(session_id)
                args, asked_for = await call_arguments(st.calls, session_id, inp.tool_call_id)
                agent_name, root = session.agent_name, self._root(inp.tenant_id, session)
                registry = self._registry_of(session)
                known = registry.get(asked_for) is not None
                earlier = await turn_calls(st, session_id, registry.get(inp.name), inp.tool_call_id)
                replayed = replayed_by(replay_mark(session), asked_for, known)
                # A re-run is a person's decision; any other call may have gone unasked.
                new_args = frozenset[str]()
                if not inp.rerun and replayed is None:
                    new_args = await unasked_new_args(
                        st,
                        session,
                        inp.tool_call_id,
                        inp.name,
                        registry.get(inp.name),
                        self._configs,
                    )
            # Every call passes the gate, one served from a replay's record too: a frozen
            # tenant's or an exhausted budget's replay stops where a live run would.
            closed = await self._gate.admit_tool(inp, session)
            if closed is not None:
                return ToolOutcome(inp.tool_call_id, item_id="", ordinal=0, closed=closed)
            if replayed is not None:
                return await self._replayed(inp, session_id, replayed, asked_for, args)
            await self._unpack(inp.tenant_id, session)
            await seed_if_new(self._workspace, inp.tenant_id, session, root)
            async with self._recorder.tool_call(_event(inp)) as trace:
                result = await self._execute(
                    inp, registry, args, agent_name, asked_for, root, new_args
                )
                trace.executed(result.error_type)
                if result.output is not None:
                    of = repeated(earlier, asked_for, result.output.content)
                    if of is not None:
                        output = repeat_output(result.output, of)
                        result = replace(result, output=output, repeats=of.sha256)
                ref: ArtifactRef | None = None
                if result.output is not None:
                    # Verified in the store before anything refers to it.
                    ref = await self._store.put(
                        inp.tenant_id, result.output.content, result.output.content_type
                    )
                if result.error_type is not None and ref is None:
                    result = replace(result, failed_call=failed_call(inp.name, args))
                async with agent_state(self._sessions, inp.tenant_id, write=True) as st:
                    row = await self._commit(st, inp, session_id, result, ref)
                    # Audit mode: the event commits with the tool_result item.
                    await trace.committed(st.db, ref, row.artifact_id)
                    outcome = await _counted(
                        st, row, outcome_of(row, inp.tenant_id, self._store.prefix)
                    )
                self._warm(inp.tenant_id, row, ref, result)
                return outcome

    async def _replayed(
        self,
        inp: ToolRunInput,
        session_id: uuid.UUID,
        mark: ReplayMark,
        name: str,
        args: dict[str, Any],
    ) -> ToolOutcome:
        """A replay's call not run live: its recorded result, or its refusal (replays.py)."""
        async with agent_state(self._sessions, inp.tenant_id, write=True) as st:
            row = await serve_result(
                st,
                mark,
                session_id=session_id,
                tool_call_id=inp.tool_call_id,
                name=name,
                arguments=args,
                step=inp.step,
                idempotency_key=inp.idempotency_key,
            )
            return await _counted(st, row, outcome_of(row, inp.tenant_id, self._store.prefix))

    def _registry_of(self, session: SessionRow) -> ToolRegistry:
        """The tools of the session's agent."""
        if self._agents is None:
            return self._registry
        registry = self._agents.get(session.agent_definition)
        if registry is None:
            raise unknown_agent(session.agent_definition, sorted(self._agents))
        return registry

    def _root(self, tenant_id: str, session: SessionRow) -> Path:
        """From AgentState, never from the payload: a caller cannot pick another root."""
        if isinstance(self._workspace, WorkspaceLayout):
            return self._workspace.root_for(tenant_id, session)
        return self._workspace

    async def _unpack(self, tenant_id: str, session: SessionRow) -> None:
        """A session rehydrated by a reader without a workspace disk left its workspace
        packed: put it back before a tool looks at it."""
        if not isinstance(self._workspace, WorkspaceLayout):
            return
        if session.workspace_sha256 is None and session.root_id in (None, session.id):
            return
        await restore_if_packed(self._sessions, self._store, self._workspace, tenant_id, session)

    def _warm(self, tenant_id: str, row: ItemRow, ref: ArtifactRef | None, result: _Result) -> None:
        """The next model step expands this result first: hand it the committed bytes."""
        committed = row.data.get("artifact", {}).get("sha256")
        if self._read_cache is None or row.artifact_id is None or result.output is None:
            return
        if ref is None or committed != ref.sha256:
            return  # an earlier attempt committed other bytes under this key
        self._read_cache.keep(
            tenant_id, row.artifact_id, result.output.content, ref.content_type, complete=True
        )

    async def _execute(
        self,
        inp: ToolRunInput,
        registry: ToolRegistry,
        args: dict[str, Any],
        agent_name: str,
        asked_for: str,
        root: Path,
        new_args: frozenset[str],
    ) -> _Result:
        tool = registry.get(inp.name)
        if tool is None:
            # The name the model used lives in AgentState; history carries "" for it.
            name = asked_for or inp.name
            shown = name if len(name) <= 100 else name[:100] + "..."
            return _Result(
                None,
                "UnknownTool",
                f"there is no tool named {shown!r}; the tools are: {_tool_names(registry)}",
            )
        # The model's oversized call (a marker since call_model) or edited arguments over it.
        too_large = oversized_arguments(args, self._max_argument_bytes)
        if too_large is not None:
            return _Result(None, ARGUMENTS_TOO_LARGE, too_large)
        ctx = ToolContext(
            idempotency_key=inp.idempotency_key,
            workspace=root,
            tenant_id=inp.tenant_id,
            session_id=inp.session_id,
            fetch=self._fetch,
            agent_name=agent_name,
            memory=SqlMemoryAccess(self._sessions, inp.tenant_id),
            artifacts=SqlArtifactAccess(
                self._sessions, self._store, inp.tenant_id, uuid.UUID(inp.session_id)
            ),
            must_be_new=new_args,
        )
        try:
            check_args(args, tool.spec.name, tool.spec.parameters)  # any tool, MCP ones too
            check_allowed(args, tool.spec.parameters)
            if tool.effect == "effectful":
                # The ledger looks (after settling an interrupted attempt, whose own file
                # must not count as one that appeared).
                run = await self._effects.run(tool, ctx, args, inp.tool_call_id)
                return _Result(run.output, run.error_type, run.error, run.state)
            if new_args:
                await asyncio.to_thread(refuse_if_named, root, args, new_args)
            return _Result(await tool.fn(ctx, args))
        except ToolError as err:
            activity.logger.info("tool %s failed: %s", inp.name, err.error_type)
            return _Result(None, err.error_type, err.message)
        except (ApplicationError, TransientToolError):
            raise  # ours, worded for history already (fixed words, no cause chain)
        except Exception as exc:
            # Retried by Temporal, and the failure's message and causes land in workflow
            # history: our words only (the exception type, an errno name), never a path,
            # URL or page text the model or a web server chose.
            activity.logger.warning("tool %s raised %s; retrying", inp.name, type(exc).__name__)
            raise ApplicationError(
                f"{inp.name} failed: {failure_words(exc)}", type="ToolRaised"
            ) from None

    async def _commit(
        self,
        st: AgentState,
        inp: ToolRunInput,
        session_id: uuid.UUID,
        result: _Result,
        ref: ArtifactRef | None,
    ) -> ItemRow:
        verified = None
        extra: dict[str, Any] = {}
        if result.effect is not None:
            # In this transaction: the result and the ledger's settlement commit together
            # (a no-op when another attempt settled it first; its result then stands).
            await st.effects.settle(inp.idempotency_key, result.effect)
            extra["effect"] = result.effect
        if result.output is not None and not result.output.changed:
            extra["unchanged"] = True  # nothing to change: not the change a check waits for
        if inp.rerun:
            extra["rerun"] = inp.rerun  # context.py tells the model why it ran again
        if result.failed_call is not None:
            extra[FAILED_CALL_KEY] = result.failed_call
        if result.repeats is not None:
            extra[REPEATS_KEY] = result.repeats
        if ref is not None and result.output is not None:
            verified = VerifiedArtifact(ref, result.output.content)
        return await commit_tool_result(
            st.db,
            st.tenant_id,
            ToolResult(
                session_id=session_id,
                tool_call_id=inp.tool_call_id,
                tool_name=inp.name,
                step=inp.step,
                idempotency_key=inp.idempotency_key,
                artifact=verified,
                error_type=None if verified else result.error_type,
                error=result.error or "",
                extra=extra,
            ),
            store=self._store,
        )


def failed_call(name: str, args: dict[str, Any]) -> str:
    """One fingerprint for every call of `name` with these arguments (their JSON, keys sorted)."""
    canonical = json.dumps([name, args], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


async def _counted(st: AgentState, row: ItemRow, outcome: ToolOutcome) -> ToolOutcome:
    """`outcome` with how many failed results of the same call the session holds."""
    mark = row.data.get(FAILED_CALL_KEY)
    if isinstance(mark, str):
        outcome.repeats = await st.items.count_marked(row.session_id, FAILED_CALL_KEY, mark)
    return outcome


async def call_arguments(
    calls: CallReads, session_id: uuid.UUID, tool_call_id: str
) -> tuple[dict[str, Any], str]:
    """The call's arguments (an approver's edit wins) and the tool name the model used; a
    call AgentState does not hold fails the activity, typed and final."""
    call = await calls.effective(session_id, tool_call_id)
    if call is None:
        raise non_retryable("ToolCallNotFound", f"no tool call {tool_call_id} in session")
    return call.arguments, call.tool_name


def _tool_names(registry: ToolRegistry) -> str:
    names = sorted(registry.tools)
    if not names:
        return "none"
    more = len(names) - _MAX_LISTED_TOOLS
    return ", ".join(names[:_MAX_LISTED_TOOLS]) + (f" and {more} more" if more > 0 else "")


def _event(inp: ToolRunInput) -> ToolCallEvent:
    return ToolCallEvent(
        tenant_id=inp.tenant_id,
        session_id=inp.session_id,
        step=inp.step,
        tool=inp.name,
        tool_call_id=inp.tool_call_id,
        idempotency_key=inp.idempotency_key,
    )
