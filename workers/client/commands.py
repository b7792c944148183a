"""The one door: every entrance turns (credential, request, settings) into a checked command.

agentctl, the gateway and the Python API build a StartRequest and call `start_command`; a
plain Temporal client's start is checked by the workflow with the same rules
(activities/policies/task_rules.py, workflows/start_checks.py). Here, once for all of them:
- the tenant comes from the credential (a request that names one is refused);
- one map says which options each scope may set (SCOPE_OPTIONS);
- the deployment's own settings (task queue, model outage handling, the model) are filled
  in the same way for every door;
- the text and every option pass the same size, count, character and range rules, and a
  refusal is the same error, in the same words, at every door.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client, WorkflowHandle

from durable_agents.activities.agents import DEFAULT_AGENT, Agent
from durable_agents.activities.policies.task_rules import (
    BUDGET_FIGURES,
    check_budget_figure,
    tighter,
)
from durable_agents.activities.policies.text_limits import (
    TextLimits,
    check_size,
    check_text,
    utf8_size,
)
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.api_keys import Principal
from durable_agents.storage.artifacts import ArtifactStore, check_user_tenant
from durable_agents.storage.quotas import Quotas, tenant_default
from durable_agents.workers.agent_loading import task_options_for
from durable_agents.workers.client import tasks
from durable_agents.workers.settings import Settings
from durable_agents.workers.task_options import TaskOptions

# One map from a scope to the start options it may set. "start" runs an agent as its
# definition says, asking for more approvals at most; "admin" may also loosen them;
# "operator" is whoever holds the deployment's own credentials (agentctl, the Python API,
# a trusted backend): it may set anything but the tenant, which is bound once.
OPERATOR = "operator"
START_OPTIONS = frozenset(
    {"max_steps", "approval_policies", "project", "check"}
    | {f"budget_{n}" for n, _, _ in BUDGET_FIGURES}
)
BUDGET_OPTIONS = tuple(f"budget_{n}" for n, _, _ in BUDGET_FIGURES)
_BOUND = frozenset({"tenant_id", "loosened_by"})
SCOPE_OPTIONS: Mapping[str, frozenset[str]] = {
    "start": START_OPTIONS,
    "admin": START_OPTIONS | {"loosened_approvals"},
    # The agent is the request's own field (StartRequest.agent), not an option.
    OPERATOR: frozenset(f.name for f in fields(TaskOptions)) - _BOUND - {"agent"},
}


# The scope each verb needs (workers/client/service.py). An API key's scopes come from its
# row (admin grants every one of them); the operator holds them all.
VERB_SCOPES: Mapping[str, str] = {
    "read": "read",
    "start": "start",
    "send": "start",
    "cancel": "start",
    "resume": "start",
    # A fork starts a task of its own from another's committed items.
    "fork": "start",
    # So does a replay (a fork at the first step, its replies served from the record).
    "replay": "start",
    "approve": "approve",
    "reject": "approve",
    "raise_budget": "approve",
    "freeze": "admin",
    "thaw": "admin",
    # A tenant's own keys read its quotas but never set them.
    "set_quotas": OPERATOR,
}


class ScopeRefused(PermissionError):
    """The caller's scopes do not allow a verb or an option it set; nothing was committed."""


@dataclass(frozen=True)
class Caller:
    """Who acts: the tenant (bound once, from the credential), the user, the scopes."""

    tenant_id: str
    user_id: str
    scopes: frozenset[str]

    @classmethod
    def of_key(cls, principal: Principal) -> Caller:
        """The caller an API key speaks for (its tenant, user and scopes)."""
        return cls(principal.tenant_id, principal.user_id, principal.scopes)

    @classmethod
    def operator(cls, tenant_id: str, user_id: str = OPERATOR) -> Caller:
        """A holder of the deployment's credentials acting as `tenant_id`."""
        return cls(check_user_tenant(tenant_id), user_id, frozenset({OPERATOR}))

    def require(self, verb: str) -> None:
        """ScopeRefused unless the caller's scopes allow `verb`."""
        scope = VERB_SCOPES[verb]
        granting = {scope, OPERATOR} if scope == OPERATOR else {scope, "admin", OPERATOR}
        if not self.scopes & granting:
            needs = f"the {scope} scope"
            if scope == OPERATOR:
                needs = "the deployment's own credentials"
            raise ScopeRefused(f"{verb} needs {needs}")

    def may_set(self) -> frozenset[str]:
        allowed: set[str] = set()
        for scope in self.scopes:
            allowed |= SCOPE_OPTIONS.get(scope, frozenset())
        return frozenset(allowed)


@dataclass
class StartRequest:
    """What a caller asks for: the text, the agent (a name, or a definition in hand) and the
    TaskOptions fields it sets; everything else comes from the agent and the settings."""

    text: str
    agent: Agent | str = DEFAULT_AGENT
    options: dict[str, Any] = field(default_factory=dict)
    # The new session's id, when the caller prepares something for it first (a workspace);
    # an id that any session holds already is refused. None: a new one.
    session_id: uuid.UUID | None = None


@dataclass(frozen=True)
class StartCommand:
    """A start that passed every rule: commit and start it with workers.client.tasks.start_task.
    Its tenant's kill switch and quotas are checked in the commit's own transaction
    (TenantFrozen, QuotaRefused): a refusal commits nothing."""

    text: str
    options: TaskOptions
    limits: TextLimits
    # The deployment's default quotas for the tenant (None: only the table's figures).
    quotas: Quotas | None = None
    session_id: uuid.UUID | None = None

    async def start(
        self,
        client: Client,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore | None,
    ) -> str:
        """Commit the session and its task, start its workflow; the session id."""

        async def within_quotas(st: AgentState) -> None:
            await st.controls.check_start(self.quotas)

        handle: WorkflowHandle[Any, Any] = await tasks.start_task(
            client,
            sessions,
            self.text,
            self.options,
            store=store,
            limits=self.limits,
            check=within_quotas,
            session_id=self.session_id,
        )
        return handle.id.removeprefix("agent-")


def check_scopes(caller: Caller, names: Iterable[str]) -> None:
    """ScopeRefused naming the first option `caller` may not set."""
    given = set(names)
    bound = sorted(given & _BOUND)
    if bound:
        raise ScopeRefused(f"{bound[0]} comes from the credential, never from a request")
    refused = sorted(given - caller.may_set())
    if refused:
        need = [s for s, opts in SCOPE_OPTIONS.items() if refused[0] in opts and s != OPERATOR]
        needs = f"the {need[0]} scope" if need else "the deployment's own credentials"
        raise ScopeRefused(f"setting {refused[0]} needs {needs}")


def deployment_options(settings: Settings) -> dict[str, Any]:
    """What the deployment decides for every task, whichever door started it."""
    agent = settings.agent
    return {
        "task_queue": agent.task_queue,
        "model_outage_seconds": agent.model_outage_seconds,
        "model_retry_max_interval_seconds": agent.model_retry_max_interval_seconds,
        "model_config": {"provider": settings.model.provider, "model": settings.model.name},
    }


def start_command(caller: Caller, request: StartRequest, settings: Settings) -> StartCommand:
    """The checked command for `request` by `caller`: InvalidText, TextTooLarge,
    InvalidTaskInput (ValueErrors naming the field) or ScopeRefused, before anything
    commits; the tenant's quotas are checked as the command commits (StartCommand)."""
    limits = settings.agent.text_limits()
    check_text("text", request.text)
    check_size(
        "the task text", utf8_size(request.text), limits.max_task_bytes, "AGENT_MAX_TASK_BYTES"
    )
    if not request.text.strip():
        raise ValueError("text: the task text is empty")
    options = task_options(caller, request.agent, request.options, settings)
    quotas = tenant_default(settings.agent.tenant_quotas, caller.tenant_id)
    return StartCommand(request.text, options, limits, quotas, request.session_id)


def task_options(
    caller: Caller,
    agent: Agent | str,
    requested: Mapping[str, Any],
    settings: Settings,
    *,
    inherited: Mapping[str, Any] | None = None,
) -> TaskOptions:
    """The options a task of `agent` runs with: the deployment's, then `inherited` (what a
    fork keeps of its parent), then what the caller `requested`, each checked as every door
    checks them (ScopeRefused, InvalidTaskInput); the tenant is the caller's."""
    check_scopes(caller, requested)
    given = {
        **deployment_options(settings),
        **(inherited or {}),
        **requested,
        "tenant_id": caller.tenant_id,
    }
    if given.get("loosened_approvals"):
        given["loosened_by"] = caller.user_id
    own = {k: given.pop(k) for k in BUDGET_OPTIONS if k in given}
    if isinstance(agent, Agent):
        options = TaskOptions.for_agent(agent, **given)
    else:
        options = task_options_for(agent, settings.agent.definitions, **given)
    options = _with_tenant_budget(options, settings, caller.tenant_id)
    if own:
        _check_budget_ceiling(caller, options, own)
        options = replace(options, **own)
    return options


def _with_tenant_budget(options: TaskOptions, settings: Settings, tenant_id: str) -> TaskOptions:
    """The tenant's default budget under what the agent's Limits set: the tighter figure of
    the two holds."""
    defaults = tenant_default(settings.agent.tenant_budgets, tenant_id)
    if defaults is None:
        return options
    changes: dict[str, Any] = {
        f"budget_{name}": tighter(getattr(options, f"budget_{name}"), getattr(defaults, name))
        for name, _, _ in BUDGET_FIGURES
    }
    return replace(options, **changes)


def _check_budget_ceiling(caller: Caller, defaults: TaskOptions, own: Mapping[str, Any]) -> None:
    """A task may tighten its agent's and tenant's budget, never loosen it without a scope
    made for it (admin, or the deployment's own credentials): ScopeRefused naming the first
    figure set above its default."""
    if caller.scopes & {"admin", OPERATOR}:
        return
    for name, high, integer in BUDGET_FIGURES:
        option = f"budget_{name}"
        if option not in own:
            continue
        check_budget_figure(option, own[option], high, integer)  # a number before comparing
        ceiling = getattr(defaults, option)
        if ceiling is not None and (own[option] is None or own[option] > ceiling):
            raise ScopeRefused(
                f"setting {option} above {ceiling:g} (the agent's or the tenant's default) "
                "needs the admin scope"
            )
