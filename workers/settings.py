"""Configuration from the environment, one cached get_settings().

Each group has its own env prefix so the names read like the services they point at
(DATABASE_URL, S3_BUCKET, MODEL_PROVIDER, ...). The Temporal connection is not here: it
comes from the SDK's own env config (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, profiles;
workers/temporal_client.py).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from durable_agents.activities.policies.pricing import Price, PriceTable
from durable_agents.activities.policies.text_limits import TextLimits
from durable_agents.activities.providers.tool_grammar import ToolMode
from durable_agents.activities.tools.fetch_policy import (
    DEFAULT_FETCH_MAX_BYTES,
    DEFAULT_FETCH_TIMEOUT_SECONDS,
    FetchAllowlist,
    FetchPolicy,
)
from durable_agents.storage.quotas import Quotas
from durable_agents.storage.workspaces import WorkspaceLayout, WorkspaceScope
from durable_agents.workers.dev_env import stack_defaults
from durable_agents.workflows.task_settings import TaskSettings

# Defaults match `agentctl dev up`'s; what a running one serves (its ports, the database
# passwords it generates) comes from its env files (workers/dev_env.py), below any
# variable actually set.
DEV_POSTGRES_PORT = 54329
DEV_S3_PORT = 8333
DEV_TEMPORAL_PORT = 7233
DEV_S3_ACCESS_KEY = "durable-agents-dev"
DEV_S3_SECRET_KEY = "durable-agents-dev-secret"

# The workflow sandbox a cloud worker runs AgentWorkflow in (workers/process/sandbox.py).
SandboxMode = Literal["off", "shared", "strict"]


class _DevStackServed(BaseSettings):
    """A group `agentctl dev up` serves: the running dev stack's variables its prefix names
    come below the environment and above the defaults."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        prefix = str(settings_cls.model_config.get("env_prefix", ""))
        stack = {
            name.removeprefix(prefix).lower(): value
            for name, value in stack_defaults().items()
            if name.startswith(prefix)
        }
        served = InitSettingsSource(settings_cls, init_kwargs=stack)
        return init_settings, env_settings, served, dotenv_settings, file_secret_settings


class DatabaseSettings(_DevStackServed):
    model_config = SettingsConfigDict(env_prefix="DATABASE_", extra="ignore")

    # Workers and the gateway: a role that may only read and write rows (storage/roles.sql).
    url: SecretStr = SecretStr(f"postgresql+asyncpg://agent@127.0.0.1:{DEV_POSTGRES_PORT}/agent")
    # `agentctl migrate` only: the role that owns the schema. Workers never need it.
    migration_url: SecretStr = SecretStr(
        f"postgresql+asyncpg://agent_owner@127.0.0.1:{DEV_POSTGRES_PORT}/agent"
    )
    # Connections each process keeps open (SQLAlchemy adds up to 10 more under load and
    # closes them again). A busy worker has up to 100 activities and local activities
    # in flight: at 5, the connections above the pool were opened and closed all the time,
    # a PostgreSQL backend started each time (~5 ms of PostgreSQL CPU per approval at
    # 2,000 parked sessions, `bench/parked_approvals.py --sessions 2000`).
    pool_size: int = Field(default=20, gt=0)
    echo: bool = False


class S3Settings(_DevStackServed):
    model_config = SettingsConfigDict(env_prefix="S3_", extra="ignore")

    endpoint_url: str | None = f"http://127.0.0.1:{DEV_S3_PORT}"
    region: str = "us-east-1"
    access_key_id: SecretStr = SecretStr(DEV_S3_ACCESS_KEY)
    secret_access_key: SecretStr = SecretStr(DEV_S3_SECRET_KEY)
    bucket: str = "agent-artifacts"
    prefix: str = "artifacts"
    # Above this size, uploads go multipart.
    multipart_threshold_bytes: int = 16 * 1024 * 1024


class ModelSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MODEL_", extra="ignore")

    # No default on purpose: the offline model is chosen explicitly, never as a fallback.
    provider: Literal["openai", "anthropic", "offline", "scripted"] | None = None
    name: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout_seconds: float = 120.0
    script_path: Path | None = None
    # Context window budget for one model call, counted with tiktoken. A server whose window is
    # smaller shrinks it (activities/context_windows.py): learned from GET /props or
    # /v1/models at the first call when discover_window, else from its overflow errors.
    context_tokens: int = 32_000
    discover_window: bool = True
    reply_tokens: int = 2_048
    tool_result_tokens: int = 6_000
    encoding: str = "cl100k_base"
    # Compact when an assembled input passes this share of context_tokens.
    compact_at_ratio: float = 0.75
    # OpenAI-compatible servers as they are (activities/providers/openai_compat.py says why):
    # which field carries the reply budget ("auto": max_completion_tokens for api.openai.com,
    # both fields elsewhere), and whether a tool-calling assistant turn gets content "".
    max_tokens_field: Literal["auto", "max_completion_tokens", "max_tokens", "both"] = "auto"
    assistant_tool_content: Literal["empty", "omit"] = "empty"
    # "auto": a tool whose schema fits strict mode is sent with strict: true, so a server
    # that honours it constrains the call to the schema; "off" for a server that refuses it.
    strict_tools: Literal["auto", "off"] = "auto"
    # How tools are offered to the openai provider (activities/providers/tool_grammar.py):
    # native in the request's `tools`; grammar in the prompt, the reply held by a JSON schema
    # to one call of an offered tool or a final answer (for servers that constrain native
    # calls late or not at all); auto: grammar on llama.cpp's server (known by GET /props),
    # native elsewhere. An agent's ModelChoice may choose its own.
    tool_mode: ToolMode = "auto"
    # Sampling temperature sent with every request (0-2); unset, the server's own default
    # (llama.cpp's is 0.8). Small local models call tools far more reliably near 0.
    temperature: float | None = Field(default=None, ge=0, le=2)
    # Stream replies, publishing their text as token deltas for live viewers (SSE); off for
    # servers that cannot stream (each reply then arrives whole, with no deltas).
    stream: bool = True
    # The offline model streams its reply in a few pieces, this far apart (a demo or a
    # browser test can watch tokens arrive).
    offline_piece_seconds: float = Field(default=0.0, ge=0, le=5)
    # USD per million tokens by "provider/model" ("provider/*": its other models), as JSON:
    # MODEL_PRICES='{"openai/gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached": 0.075}}'.
    # Default: none, so every reply is unpriced (cost null, never a guess).
    prices: dict[str, Price] = Field(default_factory=dict)

    def price_table(self) -> PriceTable:
        return PriceTable(prices=self.prices)


class BudgetDefaults(BaseModel):
    """A tenant's default task budget (each figure optional; ranges: activities/task_rules)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: int | None = None
    seconds: float | None = None


# The heartbeat throttle of workers on a local stack (`agentctl dev up`, `agentctl demo`):
# a cancel reaches a model call within about this long.
DEV_HEARTBEAT_THROTTLE_SECONDS = 0.5


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENT_", extra="ignore")

    tenant_id: str = "default"
    # The cloud workers' workspace base (shared by every cloud worker and by whoever runs
    # `agentctl archive` / `agentctl gc`); a device worker serves its --workspace instead.
    workspace: Path = Path("workspace")
    # session: {workspace}/{tenant}/{session}; tenant or project: shared (storage.workspaces).
    workspace_scope: WorkspaceScope = "session"
    # A directory whose files each new session's own workspace starts with (copied once,
    # storage/workspace_seed.py); unset or empty: new workspaces start empty.
    workspace_seed: Path | None = None
    task_queue: str = "agent-cloud"
    # The agents a worker serves besides the default one, as module:ATTR
    # (e.g. myapp.agents:AGENTS); `agentctl start --agent` checks names against them too.
    definitions: str | None = None
    device_id: str | None = None
    # The user a tool's subprocess (a stdio MCP server) runs as when the worker is root
    # (unset: nobody); a worker that is not root runs them as itself, and naming another
    # user there is refused. activities/tools/tool_identity.py says what each keeps out.
    tool_user: str | None = None
    fetch_max_bytes: int = Field(default=DEFAULT_FETCH_MAX_BYTES, gt=0)
    # One whole fetch_url call, redirects included.
    fetch_timeout_seconds: float = Field(default=DEFAULT_FETCH_TIMEOUT_SECONDS, gt=0)
    # Internal networks and host names fetch_url may reach on purpose, comma-separated:
    # AGENT_FETCH_ALLOW="10.0.0.0/8,wiki.internal". Empty: public addresses only.
    fetch_allow: Annotated[FetchAllowlist, NoDecode] = FetchAllowlist()
    # Tool results a worker keeps in memory for context assembly (0: read S3 every step).
    read_cache_mb: int = Field(default=64, ge=0)
    # Workflow runs a cloud worker keeps in memory between their tasks (0: none). A cached
    # run holds ~0.1-0.15 MiB (shared sandbox), so 500 bound the worker near 250-300 MiB
    # however many sessions are parked; a run woken after eviction is replayed from its
    # history instead (~10-35 ms CPU), and a cache smaller than the runs in flight at once
    # thrashes (docs/BENCHMARKS.md, "The workflow cache and the workflow sandbox"). The runs in
    # flight at once are up to the activity slots plus the workflow-task slots (below): with
    # the SDK's 100 + 100, parking 1,000 sessions through a cache of 100 replayed 82% of
    # them on their way (`bench/parked_approvals.py --sessions 1000 --max-cached 100`).
    max_cached_workflows: int = Field(default=500, ge=0)
    # Activities and workflow tasks a cloud worker process runs at once (WorkerSlots in
    # workers/process/cloud.py), and whether the server may hand a workflow task's new
    # activities straight back to it. The defaults are the SDK's. Few slots and no eager
    # activities keep a flood's backlog on the Temporal server, which hands it out
    # round-robin across tenants: with 2, 4 and no eager activities, one tenant's 200
    # fanned-out tasks slow another tenant's steps 1.8-2.1x at p95, against 29-42x with
    # the defaults; the price is a step floor of ~200 ms instead of ~100-150 ms and 13.0
    # approvals a second instead of 17.1-17.9 at 2,000 parked (docs/BENCHMARKS.md, "One
    # tenant's flood against another's steps").
    activity_slots: int = Field(default=100, ge=1)
    workflow_task_slots: int = Field(default=100, ge=2)
    eager_activities: bool = True
    # The sandbox workflow runs get (workers/process/sandbox.py says what each checks and
    # costs): off (the default), shared, or strict, which re-imports and checks our
    # workflow modules in every run as the tests do (~0.4-0.6 MiB more per cached run,
    # ~50-100 ms more CPU per new run or wake after eviction).
    workflow_sandbox: SandboxMode = "off"
    # How often at most an activity's heartbeat reaches Temporal, which is also how late a
    # cancel may reach a running model call (and its HTTP request to the model): unset, the
    # SDK's 0.8 x the heartbeat timeout (16 s for a model call). Temporal Cloud bills each
    # heartbeat it receives; a dev stack bills nothing and uses DEV_HEARTBEAT_THROTTLE_SECONDS.
    heartbeat_throttle_seconds: float | None = Field(default=None, gt=0)
    # Replaced by AGENT_WORKFLOW_SANDBOX=strict; still set, it is refused, not ignored.
    strict_workflow_sandbox: bool | None = None
    # Worker Deployment Versioning (docs/DEPLOY.md), off unless both are set: the cloud
    # worker then polls as version DEPLOYMENT_NAME.BUILD_ID and gets tasks only once that
    # version is current (or ramping) on the server. auto_upgrade: a running agent moves
    # to the current version at its next workflow task, so its history must replay on the
    # new code (workflow.patched, checked by `agentctl deploy check`); pinned: it stays on
    # the version it started on, which then serves until its last run closes.
    deployment_name: str | None = Field(default=None, min_length=1, max_length=255)
    build_id: str | None = Field(default=None, min_length=1, max_length=255)
    versioning_behavior: Literal["auto_upgrade", "pinned"] = "auto_upgrade"
    # Touched every 10 s while the cloud worker polls, for an orchestrator's liveness probe
    # (workers/process/health_file.py); unset: none.
    health_file: Path | None = None
    # Limits on text put into a session (activities/policies/text_limits.py says why).
    # Default task budgets by tenant ("*": every tenant not named), as JSON:
    # AGENT_TENANT_BUDGETS='{"acme": {"tokens": 200000, "tool_calls": 50}}'. Where an
    # agent's Limits set the same figure, the tighter one holds; a start may set its own.
    tenant_budgets: dict[str, BudgetDefaults] = Field(default_factory=dict)
    # Default quotas by tenant ("*": every tenant not named), as JSON:
    # AGENT_TENANT_QUOTAS='{"*": {"tokens_per_day": 2000000, "running_tasks": 20}}'. A figure
    # `agentctl quota set` gave a tenant replaces its default; unset in both: unlimited.
    tenant_quotas: dict[str, Quotas] = Field(default_factory=dict)
    # The tool calls of one model reply that run (a reply may ask for any number: the rest
    # get a result saying so), and the sub-agents one task (its whole tree) may start.
    max_calls_per_reply: int = Field(default=16, ge=1, le=256)
    max_sub_agents: int = Field(default=8, ge=0, le=1000)
    max_task_bytes: int = Field(default=TextLimits.max_task_bytes, gt=0)
    max_message_bytes: int = Field(default=TextLimits.max_message_bytes, gt=0)
    max_edit_bytes: int = Field(default=TextLimits.max_edit_bytes, gt=0)
    max_tool_argument_bytes: int = Field(default=TextLimits.max_tool_argument_bytes, gt=0)
    inline_message_bytes: int = Field(default=TextLimits.inline_message_bytes, gt=0)
    # How long a task outwaits a model provider outage before it fails (per model call),
    # and the cap on the backoff between attempts meanwhile.
    model_outage_seconds: float = Field(default=TaskSettings.model_outage_seconds, gt=0)
    model_retry_max_interval_seconds: float = Field(
        default=TaskSettings.model_retry_max_interval_seconds, gt=0
    )
    # Written for small models too (Qwen2.5-Coder 1.5B, `bench/real_model.py`). Measured there:
    # without the last two sentences it narrated a tool result and stopped, or wrote files
    # a question never asked for and then gave no answer; it wrote reports of file names it
    # had never opened (`bench/real_model_tasks.py`).
    system_prompt: str = (
        "You are a careful agent. You complete the user's task by calling tools, one call at "
        "a time, and then answer. Use list_dir to see which files exist and read_file to "
        "read one; never describe a file you have not read. Change files only when the task "
        "asks: edit_file changes part of a file "
        "that exists, write_file creates a new one; put new files under out/. Paths are "
        "relative to the workspace root. After each "
        "tool result, either call the next tool the task needs or, once you have what you "
        "need, give the final answer: plain text, no tool call, stating the result itself "
        "(quote the facts you found)."
    )

    def text_limits(self) -> TextLimits:
        return TextLimits(
            max_task_bytes=self.max_task_bytes,
            max_message_bytes=self.max_message_bytes,
            max_edit_bytes=self.max_edit_bytes,
            max_tool_argument_bytes=self.max_tool_argument_bytes,
            inline_message_bytes=self.inline_message_bytes,
        )

    @field_validator("strict_workflow_sandbox")
    @classmethod
    def _renamed(cls, value: bool | None) -> None:
        if value is not None:
            raise ValueError(
                "AGENT_STRICT_WORKFLOW_SANDBOX was replaced by AGENT_WORKFLOW_SANDBOX "
                "(off, shared or strict): set AGENT_WORKFLOW_SANDBOX=strict for what true meant"
            )

    @field_validator("workspace_seed", mode="before")
    @classmethod
    def _no_seed(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("deployment_name")
    @classmethod
    def _deployment_name(cls, value: str | None) -> str | None:
        # The server spells a version DEPLOYMENT.BUILD_ID, split at the first dot.
        if value is not None and "." in value:
            raise ValueError("AGENT_DEPLOYMENT_NAME must not contain '.'")
        return value

    @model_validator(mode="after")
    def _versioning_pair(self) -> AgentSettings:
        if (self.deployment_name is None) != (self.build_id is None):
            raise ValueError(
                "set both AGENT_DEPLOYMENT_NAME and AGENT_BUILD_ID (worker versioning) or neither"
            )
        return self

    @field_validator("fetch_allow", mode="before")
    @classmethod
    def _parse_fetch_allow(cls, value: object) -> object:
        if isinstance(value, str | list | tuple):
            return FetchAllowlist.parse(value)
        return value

    def fetch_policy(self) -> FetchPolicy:
        """The fetch_url policy these settings describe (system resolver)."""
        return FetchPolicy(
            allow=self.fetch_allow,
            max_bytes=self.fetch_max_bytes,
            timeout_seconds=self.fetch_timeout_seconds,
        )


def workspace_layout(agent: AgentSettings) -> WorkspaceLayout:
    """The cloud workspace layout these settings describe (base made absolute)."""
    seed = agent.workspace_seed.resolve() if agent.workspace_seed else None
    return WorkspaceLayout(agent.workspace.resolve(), agent.workspace_scope, seed)


class TelemetrySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENT_TRACE_", extra="ignore")

    # Export spans over OTLP/HTTP here (e.g. http://127.0.0.1:4318); unset = no tracing.
    otlp_endpoint: str | None = None
    # Also write each trajectory event into the outbox with the item it describes.
    audit: bool = False
    retention_days: int = 30
    service_name: str = "durable-agents-worker"


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore")

    # Per API key, a token bucket shared by every gateway process (AgentState rate_limits):
    # sustained requests per second and burst size.
    rate_per_second: float = Field(default=10.0, gt=0)
    burst: int = Field(default=40, ge=1)
    # Lifetime of an artifact download link (a bearer credential: keep it short).
    presign_seconds: int = Field(default=60, ge=1, le=3600)
    # Far above any text a task takes inline (AGENT_MAX_*_BYTES apply after); a cap here
    # keeps one request from making the process buffer an unbounded body.
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    # Per client address, in-process: failed authentications allowed (burst, then per
    # second) before the address is answered 429 without its key being looked up.
    auth_failure_rate_per_second: float = Field(default=1.0, gt=0)
    auth_failure_burst: int = Field(default=30, ge=1)
    # Per key, in-process: open event streams and device long-polls at once (429 past them).
    max_streams_per_key: int = Field(default=16, ge=1)
    max_polls_per_key: int = Field(default=4, ge=1)
    # How often open streams and long-polls look again at their key: a revoked or expired
    # key ends them within this plus a second.
    key_recheck_seconds: float = Field(default=2.0, gt=0, le=4.0)
    # A device's lease on a call (renewed by its heartbeats); its upload URL ends with it.
    device_lease_seconds: int = Field(default=30, ge=2, le=300)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    s3: S3Settings = Field(default_factory=S3Settings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
