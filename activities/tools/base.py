"""What a tool is: a spec the model sees, a policy, and an async function."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.tools.fetch_policy import PUBLIC_ONLY, FetchPolicy

# The effects contract (DESIGN: tools): what running a call twice under one key would do.
# read_only: nothing outside the result; idempotent: the second run under the same
# idempotency key changes nothing more; effectful: it may act twice, so the call is
# ledgered before it runs and an interrupted attempt is reconciled or asked about, never
# silently re-run. Unknown tools are treated as effectful.
Effect = Literal["read_only", "idempotent", "effectful"]
EFFECTS: tuple[Effect, ...] = ("read_only", "idempotent", "effectful")


class ToolError(Exception):
    """A deterministic failure the model should be told about (bad path, too large, ...).

    Retrying cannot help, so the activity reports it as an error result instead of failing.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


class TransientToolError(Exception):
    """A failure worth retrying (5xx, connection trouble, a name server timing out).

    Deliberately not a ToolError: the activity layer lets it propagate so Temporal retries.
    Its message becomes the activity failure in workflow history, so it holds only a fixed
    vocabulary (status codes, exception type names), never a URL or anything the model chose;
    raise it `from None`: Temporal records an exception's cause chain in history too.
    """


class EffectInDoubt(Exception):
    """A reconcile's third answer: it cannot tell whether the interrupted call acted.

    Raised by a `ReconcileFn` (beside returning the output, or None for "it did not
    happen"): the call is then reported in doubt and a person is asked whether to run it
    again, exactly as for a tool without `reconcile`. The message, in the tool's own words
    and free of secrets, tells the model why (it never enters workflow history).
    """


class MemoryAccess(Protocol):
    """The agent's scoped memory, as the remember/recall tools see it (tenant already bound)."""

    async def remember(
        self,
        *,
        scope_type: str,
        scope_id: str,
        content: str,
        source: dict[str, Any],
        idempotency_key: str,
        supersedes: str | None = None,
    ) -> dict[str, Any]: ...

    async def recall(
        self, *, scope_type: str, scope_id: str, query: str | None, limit: int
    ) -> list[dict[str, Any]]: ...

    async def forget(self, *, memory_id: str) -> bool: ...


@dataclass(frozen=True)
class ArtifactInfo:
    """A stored artifact as a tool sees it."""

    artifact_id: str
    sha256: str
    size_bytes: int
    content_type: str


class ArtifactAccess(Protocol):
    """Stored artifacts of the call's tenant and session tree (the session, its root and
    every session under that root), named by artifact id or a sha256 prefix of >= 8 hex
    characters. Anything else, another tenant's or another tree's included, is
    ToolError("ArtifactNotFound"), worded the same whether or not it exists."""

    async def find(self, artifact: str) -> ArtifactInfo:
        """The artifact's metadata; ToolError("AmbiguousArtifact") for a prefix naming several."""
        ...

    async def read(self, artifact: str, offset: int = 0, length: int | None = None) -> bytes:
        """`length` bytes (default: to the end, bounded) from `offset`, by a ranged read."""
        ...

    def chunks(self, artifact: str) -> AsyncGenerator[bytes, None]:
        """The whole artifact streamed in pieces, its sha256 checked after the last."""
        ...


@dataclass(frozen=True)
class ToolContext:
    """Per-call context. The idempotency key is stable across retries of the same call."""

    idempotency_key: str
    workspace: Path
    tenant_id: str
    session_id: str
    fetch: FetchPolicy = PUBLIC_ONLY
    agent_name: str = "agent"
    memory: MemoryAccess | None = None
    artifacts: ArtifactAccess | None = None
    # Arguments naming workspace paths that must still name nothing: the call runs without
    # a person's approval because an `exists:ARG` policy found nothing there when it was
    # decided. A tool that creates the path must not replace what appeared meanwhile.
    must_be_new: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ToolOutput:
    content: bytes
    content_type: str = "text/plain; charset=utf-8"
    # False: an effectful tool found nothing to change (the file already held it). Its
    # result is marked so (`unchanged`), and a check waiting for a change keeps waiting.
    changed: bool = True


ToolFn = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolOutput]]
# For an effectful tool: given the interrupted call's context (its idempotency key) and
# arguments, the output if the effect did happen, or None if it did not (safe to run);
# raise EffectInDoubt when it cannot tell (the call is then reported in doubt).
ReconcileFn = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolOutput | None]]


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    fn: ToolFn
    needs_approval: bool = False
    effect: Effect = "effectful"
    reconcile: ReconcileFn | None = None
    # Other keys an approval policy may name this tool by, most specific first (an MCP
    # tool's `server.tool` and `server.*`); its model-facing name always applies first.
    policy_names: tuple[str, ...] = ()
    # The tool's own approval policy (e.g. `exists:path`), when it asks only sometimes.
    approval: str | None = None

    @property
    def default_policy(self) -> str:
        """The policy its calls run under when neither their agent nor their task names
        one: its own, else `always` when it needs approval, else `never`."""
        return self.approval or ("always" if self.needs_approval else "never")


@dataclass
class ToolRegistry:
    tools: dict[str, Tool] = field(default_factory=dict)

    @classmethod
    def of(cls, tools: Iterable[Tool]) -> ToolRegistry:
        return cls({t.spec.name: t for t in tools})

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self.tools.values()]
