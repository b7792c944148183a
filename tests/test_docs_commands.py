"""The commands of docs/cli.md, docs/gateway.md, docs/temporal-clients.md and
docs/other-sdks.md, each block run as written against one real `agentctl dev up` (started
from docs/cli.md's own line, tests/support/dev_up.py), on real sessions of the offline
model's survey; each command exits 0 and does what its comment says.

What a block leaves to the reader is filled in here, by name: a key's secret (`K=da_...`), a
key id, an artifact id or sha256 prefix, all taken from the live stack; the fixed addresses
of dev up's defaults are the test stack's (tests/support/doc_runs.py `at_stack`)."""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.support.dev_up import (  # noqa: F401 (the `up` fixture)
    TASK_SECONDS,
    Up,
    agentctl,
    dev_up_stack,
    gateway_call,
    wait_status,
    with_venv,
)
from tests.support.doc_blocks import doc_block
from tests.support.doc_runs import (
    VENV_PATH,
    assigned,
    at_stack,
    in_background,
    interrupt,
    lines,
    python,
    sh,
)
from tests.support.mcp import free_port
from tests.support.sdk_agents import (
    OPENAI_AGENT,
    OPENAI_ANSWER,
    PYDANTIC_AGENT,
    PYDANTIC_ANSWER,
)
from tests.test_devup_stop import base_env, wait_for

ITEM_ROW = re.compile(r"^│\s+(\d+) │", re.MULTILINE)  # a row of `agentctl show`'s items
SHOWN_ARTIFACT = re.compile(r"│ ([0-9a-f]{12}) (\d+) B\s+│")  # its artifact column


def test_the_everyday_commands_run_as_written(up: Up, tmp_path: Path) -> None:
    """Two survey sessions: one approved, watched to its end, shown, its artifact fetched
    and archived; the other cancelled and resumed."""
    block = doc_block("docs/cli.md", "S=$(.venv/bin/agentctl start").text

    def run(start: str, session: str = "", cwd: Path | None = None) -> str:
        return sh(up, lines(block, start), cwd, S=session)

    done, other = (assigned(up, lines(block, "S=$(")) for _ in range(2))
    wait_status(up, done, "waiting_approval", "call_2_0")
    status = run(".venv/bin/agentctl status", done)
    assert f"session {done}  status=waiting_approval" in status
    assert "waiting for approval: call_2_0 write_file({'path': 'out/report.md'" in status
    assert run(".venv/bin/agentctl approve", done) == "approved call_2_0\n"
    watched = run(".venv/bin/agentctl watch", done)  # returns once the task ended
    assert "approval approved by" in watched
    assert watched.rstrip().endswith("task ended: completed (unchecked)"), watched

    assert run(".venv/bin/agentctl cancel", other) == f"cancelled {other}\n"
    wait_status(up, other, "cancelled")
    assert run(".venv/bin/agentctl resume", other) == f"resumed {other}\n"
    wait_status(up, other, "waiting_approval", "call_2_0")  # on from its last item
    before = run(".venv/bin/agentctl show $S  ", other)
    forked = run(".venv/bin/agentctl fork", other).strip()
    assert forked != other and str(uuid.UUID(forked)) == forked
    # The fork reads the items before step 2's reply as its own; the session it came from
    # is as it was.
    fork_items = [int(n) for n in ITEM_ROW.findall(agentctl(up, "show", forked))]
    assert fork_items[:9] == list(range(1, 10)), fork_items
    assert run(".venv/bin/agentctl show $S  ", other) == before

    shown = run(".venv/bin/agentctl show $S  ", done)  # the plain `show $S`
    assert "turns" in shown and "artifacts in this page" in shown
    assert [int(n) for n in ITEM_ROW.findall(shown)] == list(range(1, 19))
    page = run(".venv/bin/agentctl show $S --after 10 --limit 5", done)
    assert [int(n) for n in ITEM_ROW.findall(page)] == [11, 12, 13, 14, 15]
    listed = run(".venv/bin/agentctl sessions")
    assert done in listed and other in listed

    device_key = agentctl(up, "keys", "create", "--tenant", "default", "--device", "box")
    gateway_call(up.gateway, device_key.split()[0], "POST", "/v1/device", {"tools": ["read_file"]})
    assert re.search(r"│ box +│ read_file +│ [-0-9: ]+ │ yes +│", run(".venv/bin/agentctl devices"))
    swept = run(".venv/bin/agentctl gc --dry-run")
    assert "would delete 0 artifacts and 0 orphans, 0 bytes (dry run)" in swept
    assert "would delete 0 session workspaces" in swept

    sha, size = SHOWN_ARTIFACT.findall(shown)[0]  # in place of the docs' 2cbc9eea265f
    get = lines(block, ".venv/bin/agentctl artifacts get").replace("2cbc9eea265f", sha)
    there = with_venv(tmp_path / "cwd")
    assert sh(up, get, there) == f"wrote {size} bytes to result.json\n"
    assert hashlib.sha256((there / "result.json").read_bytes()).hexdigest().startswith(sha)

    archived = run(".venv/bin/agentctl archive session", done)
    assert archived.startswith("archived: 18 items in "), archived
    assert not (up.project / "workspace" / "default" / done).exists()  # packed with it
    wait_status(up, done, "completed (unchecked)")  # a read brings it back


def test_gateway_keys_are_created_listed_and_revoked_as_written(up: Up) -> None:
    block = doc_block("docs/gateway.md", ".venv/bin/agentctl keys create").text
    created = sh(up, lines(block, ".venv/bin/agentctl keys create")).splitlines()
    key, key_id = created[0], created[0].split("_")[1]
    assert re.fullmatch(r"da_[0-9a-f]{16}_\S+", key) and len(created) == 2, created
    assert created[1].startswith(f"key {key_id} for ann in tenant default (read, start, approve)")
    listed = sh(up, lines(block, ".venv/bin/agentctl keys list"))
    (row,) = [r for r in listed.splitlines() if key_id in r]
    assert " ann " in row and row.rstrip(" │").endswith("active"), listed
    assert key.split("_", 2)[2] not in listed  # never the secret
    gateway_call(up.gateway, key, "GET", "/v1/me")

    revoke = lines(block, ".venv/bin/agentctl keys revoke").replace("1f2e3d4c5b6a7980", key_id)
    assert sh(up, revoke) == f"revoked {key_id}\n"
    listed = sh(up, lines(block, ".venv/bin/agentctl keys list"))
    assert re.search(rf"{key_id} .* revoked +│", listed), listed
    with pytest.raises(urllib.error.HTTPError) as refused:
        gateway_call(up.gateway, key, "GET", "/v1/me")
    assert refused.value.code == 401


def no_redirect(url: str, key: str) -> tuple[int, str]:
    """The status and Location of a GET that is not followed."""

    class Stop(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        urllib.request.build_opener(Stop).open(request, timeout=30)
    except urllib.error.HTTPError as answer:
        return answer.code, answer.headers.get("Location", "")
    raise AssertionError(f"{url} was not redirected")


def events(stream: str) -> list[tuple[str, str]]:
    """An SSE stream's (event, id) pairs, in order; id "" where it has none."""
    found = []
    for message in stream.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in message.splitlines() if ": " in line)
        found.append((fields.get("event", ""), fields.get("id", "")))
    return found


def test_the_gateways_own_process_serves_the_curl_calls_and_the_stream(
    up: Up, tmp_path: Path
) -> None:
    """docs/gateway.md's `agentctl gateway`, then its curl calls through it: a session
    started, the approvals inbox, an approval with edited arguments, an artifact download;
    its event stream read whole and resumed; a read-only key watching from elsewhere."""
    block = doc_block("docs/gateway.md", ".venv/bin/agentctl keys create").text
    key = sh(up, lines(block, ".venv/bin/agentctl keys create")).split()[0]
    port = free_port()  # in place of the docs' 8000
    served = f"http://127.0.0.1:{port}"
    line = lines(block, ".venv/bin/agentctl gateway").replace("--port 8000", f"--port {port}")
    gateway = in_background(at_stack(line, up, served), up.env, up.project, tmp_path / "gw.log")
    try:
        wait_for("the gateway", lambda: _schema(served), TASK_SECONDS, gateway)

        def curl(start: str, cwd: Path | None = None, **variables: str) -> str:
            script = lines(block, "K=da_...", start).replace("K=da_...", f"K={key}")
            return sh(up, at_stack(script, up, served), cwd, **variables)

        started = json.loads(curl('curl -sH "$H" -d'))
        session = started["session_id"]
        wait_status(up, session, "waiting_approval", "call_2_0")
        inbox = json.loads(curl('curl -sH "$H" localhost:8000/v1/approvals'))
        waiting = {
            (e["session"]["id"], p["tool_call_id"]) for e in inbox["entries"] for p in e["pending"]
        }
        assert (session, "call_2_0") in waiting, inbox
        assert json.loads(curl('curl -sH "$H" -H', S=session))["approved"] is True
        wait_status(up, session, "completed")
        root = up.project / "workspace" / "default" / session
        assert (root / "out" / "x.md").read_text() == "..."  # the edited arguments ran

        items = gateway_call(served, key, "GET", f"/v1/sessions/{session}")["items"]
        read = next(
            i for i in items if i["tool_name"] == "read_file" and i["kind"] == "tool_result"
        )
        there = with_venv(tmp_path / "cwd")
        curl('curl -sLH "$H"', there, ARTIFACT_ID=read["artifact_id"])
        fetched = hashlib.sha256((there / "result.json").read_bytes()).hexdigest()
        assert fetched == read["data"]["artifact"]["sha256"]
        code, location = no_redirect(f"{served}/v1/artifacts/{read['artifact_id']}", key)
        assert code == 307 and location.startswith(up.env["S3_ENDPOINT_URL"]), location
        assert "X-Amz-Expires=60&" in location, location  # presigned for 60 s

        stream = doc_block("docs/gateway.md", 'curl -NsH "$H" localhost:8000').text
        script = lines(block, "K=da_...").replace("K=da_...", f"K={key}") + "\n" + stream
        whole, resumed = sh(up, at_stack(script, up, served), S=session).split("event: end", 1)
        ids = [int(i) for e, i in events(whole) if e == "item"]
        assert ids == list(range(1, len(items) + 1))
        assert [int(i) for e, i in events(resumed) if e == "item"] == ids[12:]
        assert resumed.strip().endswith('{"status":"completed","checked":false}')

        _watch_with_a_read_key(up, served, session, tmp_path)
    finally:
        interrupt(gateway)


def _schema(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/openapi.json", timeout=5) as answer:
            return "openapi" in json.loads(answer.read())
    except OSError:
        return False


def _watch_with_a_read_key(up: Up, served: str, session: str, tmp_path: Path) -> None:
    """docs/gateway.md's read-only key, and `agentctl watch` on another machine with only
    the gateway's URL and that key: what the database-reading watch prints."""
    key = assigned(up, doc_block("docs/gateway.md", "K=$(.venv/bin/agentctl keys create").text)
    with pytest.raises(urllib.error.HTTPError) as refused:
        gateway_call(served, key, "POST", f"/v1/sessions/{session}/cancel", {})
    assert refused.value.code == 403  # it may only read
    elsewhere = with_venv(tmp_path / "elsewhere")
    env = base_env(elsewhere) | {"XDG_STATE_HOME": str(elsewhere)}  # no stack, no record
    remote = doc_block("docs/gateway.md", "export AGENT_GATEWAY_URL=").text
    watched = sh(up, at_stack(remote, up, served), elsewhere, env, K=key, S=session)
    assert watched == agentctl(up, "watch", session)


# The fairness key a started task's workflow carries (workers/client/fairness.py).
FAIRNESS_KEY = """import os
from temporalio.client import Client
client = await Client.connect(os.environ["TEMPORAL_ADDRESS"])
described = await client.get_workflow_handle("agent-" + os.environ["SID"]).describe()
print(described.raw_description.workflow_execution_info.priority.fairness_key)
"""


def test_a_plain_temporal_client_starts_queries_and_approves_as_written(up: Up) -> None:
    block = doc_block("docs/temporal-clients.md", "import asyncio").text
    sid = python(up, at_stack(block, up) + "print(sid)\n").strip()
    wait_status(up, sid, "completed", tenant="acme")
    assert python(up, FAIRNESS_KEY, SID=sid).strip() == "acme"
    shown = agentctl(up, "show", sid, "--tenant", "acme")
    assert "approved by ops" in shown
    assert (up.project / "workspace" / "acme" / sid / "out" / "report.md").is_file()


def test_the_temporal_cli_starts_queries_and_approves_as_written(up: Up) -> None:
    block = doc_block("docs/temporal-clients.md", "SID=$(python -c").text
    sid = assigned(up, lines(block, "SID=$(", "temporal workflow start"), PATH=VENV_PATH)
    query = lines(block, "temporal workflow query")
    wait_for(
        "call_2_0 in the status query",
        lambda: "call_2_0" in sh(up, query, SID=sid, PATH=VENV_PATH),
        TASK_SECONDS,
        up.proc,
    )
    approved = sh(up, lines(block, "temporal workflow update execute"), SID=sid, PATH=VENV_PATH)
    assert "approved:true" in approved
    wait_status(up, sid, "completed", tenant="acme")
    assert python(up, FAIRNESS_KEY, SID=sid).strip() == "acme"
    assert "approved by ops" in agentctl(up, "show", sid, "--tenant", "acme")


# After each client the block connects: the plugins it was given (and so it connected).
PLUGINS = 'print(*sorted(type(p).__name__ for p in client.config()["plugins"]))\n'


def test_clients_connect_with_each_sdks_plugin_and_ours_as_written(up: Up) -> None:
    pytest.importorskip("pydantic_ai.durable_exec.temporal")  # the `peers` extra
    pytest.importorskip("temporalio.openai_agents")
    block = doc_block("docs/other-sdks.md", "from temporalio.client import Client").text
    openai, pydantic = at_stack(block, up).split("\n# pydantic-ai", 1)
    printed = python(up, openai + "\n" + PLUGINS + "# pydantic-ai" + pydantic + PLUGINS)
    assert printed.splitlines() == [
        "ClaimCheckPlugin OpenAIAgentsPlugin",
        "ClaimCheckPlugin PydanticAIPlugin",
    ]


def test_each_sdks_conversation_is_kept_in_agentstate_as_written(up: Up) -> None:
    """The block's two halves, each with a real agent of its SDK bound as `agent`: the
    conversations show in `agentctl sessions` and `agentctl show`, tool results included."""
    pytest.importorskip("agents")  # the `peers` extra
    pytest.importorskip("pydantic_ai")
    block = doc_block("docs/other-sdks.md", "from durable_agents import AgentStateSession").text
    openai, pydantic = block.split("\nfrom durable_agents import AgentStateHistory", 1)
    printed = python(
        up,
        OPENAI_AGENT + openai + "\nprint(session.agentstate_id, result.final_output)\n"
        + PYDANTIC_AGENT + "from durable_agents import AgentStateHistory" + pydantic
        + "\nprint(history.agentstate_id, result.output)\n",
    )  # fmt: skip
    (openai_id, openai_answer), (pydantic_id, pydantic_answer) = (
        line.split(" ", 1) for line in printed.splitlines()
    )
    assert (openai_answer, pydantic_answer) == (OPENAI_ANSWER, PYDANTIC_ANSWER)
    listed = agentctl(up, "sessions", "--tenant", "acme")
    for sid, sdk in ((openai_id, "openai-agents"), (pydantic_id, "pydantic-ai")):
        assert sid in listed, listed
        shown = agentctl(up, "show", sid, "--tenant", "acme")
        assert f"tenant acme · agent external:{sdk}" in shown, shown
        assert "What did I ask before?" in shown, shown
        # The tool's 21,630-byte build log, an artifact in S3.
        assert re.search(r"│ 21630 +│ text/plain", shown), shown
