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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client, WorkflowHandle

from durable_agents.activities.agents import DEFAULT_AGENT, Agent
from durable_agents.activities.policies.task_rules import BUDGET_FIGURES
from durable_agents.activities.policies.text_limits import (
    TextLimits,
    check_size,
    check_text,
    utf8_size,
)
from durable_agents.storage.api_keys import Principal
from durable_agents.storage.artifacts import ArtifactStore, check_user_tenant
from durable_agents.storage.quotas import Quotas, TenantControls
from durable_agents.workers.agent_loading import task_options_for
from durable_agents.workers.client import tasks
from durable_agents.workers.settings import Settings
from durable_agents.workers.task_options import TaskOptions

# One map from a scope to the start options it may set. "start" runs an agent as its
# definition says, asking for more approvals at most; "admin" may also loosen them;
# "operator" is whoever holds the deployment's own credentials (agentctl, the Python API,
# a trusted backend): it may set anything but the tenant, which is bound once.
START_OPTIONS = frozenset(
    {"max_steps", "approval_policies", "project"} | {f"budget_{n}" for n, _, _ in BUDGET_FIGURES}
)
OPERATOR = "operator"
_BOUND = frozenset({"tenant_id", "loosened_by"})
SCOPE_OPTIONS: Mapping[str, frozenset[str]] = {
    "start": START_OPTIONS,
    "admin": START_OPTIONS | {"loosened_approvals"},
    # The agent is the request's own field (StartRequest.agent), not an option.
    OPERATOR: frozenset(f.name for f in fields(TaskOptions)) - _BOUND - {"agent"},
}


class ScopeRefused(PermissionError):
    """The caller's scopes do not allow an option it set; nothing was committed."""


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

    async def start(
        self,
        client: Client,
        sessions: async_sessionmaker[AsyncSession],
        store: ArtifactStore | None,
    ) -> str:
        """Commit the session and its task, start its workflow; the session id."""

        async def within_quotas(db: AsyncSession) -> None:
            await TenantControls(db, self.options.tenant_id).check_start(self.quotas)

        handle: WorkflowHandle[Any, Any] = await tasks.start_task(
            client,
            sessions,
            self.text,
            self.options,
            store=store,
            limits=self.limits,
            check=within_quotas,
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
    check_scopes(caller, request.options)
    given = {**deployment_options(settings), **request.options, "tenant_id": caller.tenant_id}
    if given.get("loosened_approvals"):
        given["loosened_by"] = caller.user_id
    if isinstance(request.agent, Agent):
        options = TaskOptions.for_agent(request.agent, **given)
    else:
        options = task_options_for(request.agent, settings.agent.definitions, **given)
    options = _with_tenant_budget(options, request.options, settings, caller.tenant_id)
    quotas = settings.agent.tenant_quotas
    return StartCommand(
        request.text, options, limits, quotas.get(caller.tenant_id) or quotas.get("*")
    )


def _with_tenant_budget(
    options: TaskOptions, given: Mapping[str, Any], settings: Settings, tenant_id: str
) -> TaskOptions:
    """The tenant's default budget under what the agent's Limits set: the tighter figure of
    the two holds. A figure the request set itself stays as set (its scope allowed it)."""
    budgets = settings.agent.tenant_budgets
    defaults = budgets.get(tenant_id) or budgets.get("*")
    if defaults is None:
        return options
    changes: dict[str, Any] = {}
    for name, _, _ in BUDGET_FIGURES:
        option, tenant = f"budget_{name}", getattr(defaults, name)
        if option in given or tenant is None:
            continue
        agent = getattr(options, option)
        changes[option] = tenant if agent is None else min(agent, tenant)
    return replace(options, **changes) if changes else options
