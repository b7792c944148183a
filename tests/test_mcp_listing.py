"""What an MCP server's listing becomes, and what we refuse of it: names a model API
accepts, bounded schemas, effects from annotations, approval policies by `server.tool`."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types

from durable_agents.activities.policies.approval_policy import policy_for
from durable_agents.activities.tools.mcp_servers import McpHttp, McpListingError, McpStdio
from durable_agents.activities.tools.mcp_tools import (
    MAX_SCHEMA_BYTES,
    MAX_TOOLS_PER_SERVER,
    MODEL_NAME_RE,
    model_name,
    tool_infos,
)

SERVER = McpStdio("srv", "mcp-server")
OBJECT: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "string"}}}


def _tool(name: str, schema: dict[str, Any] | None = None, **hints: bool) -> types.Tool:
    annotations = types.ToolAnnotations(**hints) if hints else None
    return types.Tool(name=name, inputSchema=schema or OBJECT, annotations=annotations)


@pytest.mark.parametrize("bad", ["", "a.b", "has space", "x" * 33, "ü"])
def test_server_names_are_short_identifiers(bad: str) -> None:
    with pytest.raises(ValueError, match="server name"):
        McpStdio(bad, "cmd")
    with pytest.raises(ValueError, match="server name"):
        McpHttp(bad, "http://127.0.0.1:1/mcp")


def test_declarations_refuse_bad_urls_effects_and_keep_secrets_out_of_repr() -> None:
    with pytest.raises(ValueError, match="http"):
        McpHttp("web", "file:///etc/passwd")
    with pytest.raises(ValueError, match="effect"):
        McpStdio("s", "cmd", effects={"t": "harmless"})  # type: ignore[dict-item]
    web = McpHttp("web", "https://mcp.example/mcp", headers={"Authorization": "Bearer sk-123"})
    stdio = McpStdio("s", "cmd", env={"API_KEY": "sk-456"})
    assert "sk-123" not in repr(web) and "sk-456" not in repr(stdio)


@pytest.mark.parametrize(
    "tool", ["search", "files.read", "a/b c", "ünïcode", "x" * 128, "srv__dup", "-"]
)
def test_model_facing_names_fit_every_model_api(tool: str) -> None:
    name = model_name("a-server-name-of-32-characters-x", tool)
    assert MODEL_NAME_RE.fullmatch(name), name
    assert name == model_name("a-server-name-of-32-characters-x", tool)  # stable


def test_names_are_server_double_underscore_tool_when_they_fit() -> None:
    assert model_name("gh", "create_issue") == "gh__create_issue"
    # Two tools that sanitise alike still get different names.
    assert model_name("gh", "a.b") != model_name("gh", "a_b")


def test_effects_come_from_annotations_and_the_declaration_overrides_them() -> None:
    server = McpStdio("srv", "cmd", effects={"send": "idempotent"})
    listed = [
        _tool("look", readOnlyHint=True),
        _tool("put", idempotentHint=True),
        _tool("drop", destructiveHint=True),
        _tool("bare"),
        _tool("send", readOnlyHint=False),
    ]
    effects = {i.mcp_name: i.effect for i in tool_infos(server, listed)}
    assert effects == {
        "look": "read_only",
        "put": "idempotent",
        "drop": "effectful",
        "bare": "effectful",
        "send": "idempotent",
    }


def test_absurd_listings_are_refused_naming_the_server() -> None:
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}}
    with pytest.raises(McpListingError, match=r"'srv'.*'big'.*more than " + str(MAX_SCHEMA_BYTES)):
        tool_infos(SERVER, [_tool("big", huge)])
    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(100):
        node["properties"] = {"n": {"type": "object"}}
        node = node["properties"]["n"]
    with pytest.raises(McpListingError, match=r"'srv'.*nests deeper"):
        tool_infos(SERVER, [_tool("deep", deep)])
    with pytest.raises(McpListingError, match=r"'srv'.*not a JSON object schema"):
        tool_infos(SERVER, [_tool("arr", {"type": "array"})])
    many = [_tool(f"t{i}") for i in range(MAX_TOOLS_PER_SERVER + 1)]
    with pytest.raises(McpListingError, match="'srv' lists"):
        tool_infos(SERVER, many)


def test_descriptions_are_bounded_and_a_declared_subset_is_offered() -> None:
    long = types.Tool(name="t", description="d" * 100_000, inputSchema=OBJECT)
    (info,) = tool_infos(McpStdio("srv", "cmd", tools=("t",)), [long, _tool("other")])
    assert info.spec.name == "srv__t" and len(info.spec.description) <= 2048
    with pytest.raises(McpListingError, match="no tool named 'gone'"):
        tool_infos(McpStdio("srv", "cmd", tools=("gone",)), [long])


def test_policies_match_the_model_name_then_server_dot_tool_then_server_star() -> None:
    (info,) = tool_infos(SERVER, [_tool("send")])
    aliases = info.policy_names
    assert aliases == ("srv.send", "srv.*")
    assert policy_for({"srv.*": "always"}, "srv__send", aliases) == "always"
    assert policy_for({"srv.*": "always", "srv.send": "never"}, "srv__send", aliases) == "never"
    assert (
        policy_for({"srv.send": "never", "srv__send": "always"}, "srv__send", aliases) == "always"
    )
    assert policy_for({"other.*": "always"}, "srv__send", aliases) == "never"
