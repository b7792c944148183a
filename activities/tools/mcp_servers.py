"""MCP server declarations: what an agent definition lists in its toolsets.

Small frozen values, checked when they are made, so a typo fails at import of the agent
module rather than at a model step. They hold no connection; McpToolsets (mcp_toolset.py)
connects to them on a worker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from durable_agents.activities.tools.base import EFFECTS, Effect

# A server name prefixes its tools' model-facing names (`server__tool`) and keys approval
# policies (`server.tool`): short, and no '.' so that the policy key splits one way only.
SERVER_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
# How long one tools/call may take before the attempt is given up as transient.
DEFAULT_CALL_TIMEOUT_SECONDS = 300.0
# Connecting (spawning, initialize, listing) must not hang a worker's start or a retry.
CONNECT_TIMEOUT_SECONDS = 30.0


class McpListingError(ValueError):
    """A server's tool listing we refuse to offer to a model (names the server). Here, not
    beside the listing checks in mcp_tools.py, so that catching it does not import the MCP
    SDK: a cloud worker whose tasks name no device never loads it."""


def _check_common(
    kind: str, name: str, effects: Mapping[str, Effect], timeout: float, only: tuple[str, ...]
) -> None:
    if not isinstance(name, str) or SERVER_NAME_RE.fullmatch(name) is None:
        raise ValueError(
            f"invalid {kind} server name {name!r}: use 1-32 letters, digits, '_' or '-'"
        )
    for tool, effect in effects.items():
        if effect not in EFFECTS:
            raise ValueError(
                f"MCP server {name!r}: effect {effect!r} for tool {tool!r} is not one of "
                f"{', '.join(EFFECTS)}"
            )
    if not timeout > 0:
        raise ValueError(f"MCP server {name!r}: call_timeout_seconds must be positive")
    if isinstance(only, str):
        raise ValueError(f"MCP server {name!r}: tools must be a tuple of names, not a string")


@dataclass(frozen=True)
class McpStdio:
    """A server the worker spawns and talks to over stdin/stdout.

    `env` is added to a minimal inherited environment (PATH, HOME, ...), not to the worker's
    whole environment: the worker's database and S3 credentials never reach the server.
    `device_local`: the device worker spawns it and its tools run on the device's queue.
    `effects` overrides the effect an MCP tool's annotations imply, by MCP tool name.
    `tools`: when set, only these MCP tools are offered to the model.
    `run_as`: the user it runs as when the worker is root, instead of the worker's tool
    user (AGENT_TOOL_USER, default `nobody`); see tool_identity.py for why and what a
    worker that is not root can and cannot keep from it.
    """

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    device_local: bool = False
    effects: Mapping[str, Effect] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    call_timeout_seconds: float = DEFAULT_CALL_TIMEOUT_SECONDS
    run_as: str | None = None

    def __post_init__(self) -> None:
        _check_common("stdio", self.name, self.effects, self.call_timeout_seconds, self.tools)
        if not isinstance(self.command, str) or not self.command:
            raise ValueError(f"MCP server {self.name!r}: command must be a non-empty string")
        if isinstance(self.args, str):
            raise ValueError(f"MCP server {self.name!r}: args must be a tuple, not a string")
        if self.run_as is not None and (not isinstance(self.run_as, str) or not self.run_as):
            raise ValueError(f"MCP server {self.name!r}: run_as must be a user name")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "tools", tuple(self.tools))


@dataclass(frozen=True)
class McpHttp:
    """A server reached over streamable HTTP at `url` (http or https).

    `headers` (e.g. Authorization) are sent with every request; they are kept out of repr
    so that a logged declaration never shows a token.
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    effects: Mapping[str, Effect] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    call_timeout_seconds: float = DEFAULT_CALL_TIMEOUT_SECONDS

    @property
    def device_local(self) -> bool:
        return False  # an HTTP server is reached from the cloud worker

    def __post_init__(self) -> None:
        _check_common("HTTP", self.name, self.effects, self.call_timeout_seconds, self.tools)
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"MCP server {self.name!r}: url must be an http(s) URL with a host")
        object.__setattr__(self, "tools", tuple(self.tools))


McpServer = McpStdio | McpHttp


def check_unique(servers: tuple[McpServer, ...] | list[McpServer]) -> None:
    """Two servers of one name would give their tools the same names: refuse."""
    seen: set[str] = set()
    for server in servers:
        if server.name in seen:
            raise ValueError(f"two MCP servers are named {server.name!r}")
        seen.add(server.name)


def identity_of(server: McpServer) -> dict[str, object]:
    """What tells two declarations apart for an agent's fingerprint, without secrets: the
    names of env variables and headers, never their values."""
    common = {
        "name": server.name,
        "effects": dict(sorted(server.effects.items())),
        "tools": list(server.tools),
    }
    if isinstance(server, McpStdio):
        return {
            **common,
            "transport": "stdio",
            "command": server.command,
            "args": list(server.args),
            "cwd": server.cwd,
            "env": sorted(server.env),
            "device_local": server.device_local,
            # Only when set, so that declarations without it keep their fingerprints.
            **({"run_as": server.run_as} if server.run_as is not None else {}),
        }
    # A URL may carry credentials in its user info or query: scheme, host and path only.
    parts = urlsplit(server.url)
    where = f"{parts.scheme}://{parts.hostname}:{parts.port or ''}{parts.path}"
    return {**common, "transport": "http", "url": where, "headers": sorted(server.headers)}
