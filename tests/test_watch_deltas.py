"""Token deltas in `agentctl watch --gateway`, per the delta contract: shown as they arrive
on a terminal (a retried attempt's partial text dropped, the committed item replacing it),
never on a pipe; and the client's side of the stream across a reconnect. A scripted event
stream gives the cases (a retried attempt, a late delta, a reconnect mid-reply); the real
gateway and worker, with the offline model streaming, give the whole path."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.offline import OfflineProvider
from durable_agents.workers.client.gateway_client import Gateway, GatewayError, follow_session
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, make_key
from tests.support.sse_server import scripted_sse

AGENTCTL = Path(sys.executable).parent / "agentctl"
SESSION = "6f1e0bb4-53a4-4d2f-9d1a-6b7d8b3d7d11"


def event(kind: str, data: dict[str, Any], id_: int | None = None, eol: str = "\n") -> str:
    lines = ([f"id: {id_}"] if id_ is not None else []) + [f"event: {kind}"]
    # JSON over several data lines: they join with newlines, whitespace between its tokens.
    lines += [f"data: {part}" for part in json.dumps(data, indent=1).splitlines()]
    return eol.join(lines) + eol + eol


def item(ordinal: int, kind: str, text: str, **data: Any) -> dict[str, Any]:
    return {
        "id": f"00000000-0000-4000-8000-{ordinal:012d}",
        "ordinal": ordinal,
        "kind": kind,
        "role": "assistant" if kind == "assistant_message" else "user",
        "text": text,
        "tool_call_id": None,
        "tool_name": None,
        "data": data,
        "artifact_id": None,
        "created_at": "2026-01-01T00:00:00Z",
    }


def delta(attempt: int, seq: int, text: str) -> dict[str, Any]:
    return {"step": 1, "attempt": attempt, "send": 0, "seq": seq, "text": text}


# Connection 1: a user item, attempt 1 streams, attempt 2 (a retry) starts, the connection
# drops. Connection 2: attempt 2 goes on, its item commits, the end.
SCRIPTS = [
    [
        ": hello\r\n\r\n",
        event("status", {"status": "running", "detail": None}, eol="\r\n"),
        event("item", item(1, "user_message", "Greet the world."), 1, eol="\r\n"),
        event("delta", delta(1, 0, "Hello")),
        event("delta", delta(1, 1, " wor")),
        event("delta", delta(2, 0, "Bonjour")),
        event("delta", delta(1, 2, "ld LATE")),  # the retried attempt's late delta: ignored
        ": heartbeat\n\n",
    ],
    [
        event("status", {"status": "running", "detail": None}, eol="\r"),
        event("delta", delta(2, 1, " le")),
        event("item", item(2, "assistant_message", "Bonjour le monde", step=1), 2, eol="\r"),
        event("end", {"status": "completed"}, eol="\r"),
    ],
]
ENV = {"AGENT_API_KEY": "da_test_secret", "TERM": "xterm"}


async def _run_on_a_pipe(url: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(AGENTCTL),
        "watch",
        SESSION,
        "--gateway",
        url,
        env=ENV,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


def _run_on_a_terminal(url: str) -> tuple[int, str]:
    main, tty = pty.openpty()
    fcntl.ioctl(tty, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    pid = os.fork()
    if pid == 0:  # the child: stdout is the terminal
        os.dup2(tty, 1)
        os.execve(str(AGENTCTL), [str(AGENTCTL), "watch", SESSION, "--gateway", url], ENV)
    os.close(tty)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    os.close(main)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


async def test_deltas_stream_on_a_terminal_and_the_committed_item_replaces_them() -> None:
    async with scripted_sse([list(s) for s in SCRIPTS]) as (server, url):
        code, screen = await asyncio.to_thread(_run_on_a_terminal, url)
    assert code == 0, screen
    assert "Hello wor" in screen  # attempt 1's partial text, as it arrived
    assert "Bonjour" in screen and "Bonjour le" in screen  # attempt 2's, across the reconnect
    assert "worBonjour" not in screen and "LATE" not in screen  # attempt 1's text was dropped
    assert "#2   model    Bonjour le monde" in screen
    assert screen.rstrip().endswith("task ended: completed")
    assert server.requests[1]["last-event-id"] == "1"


async def test_on_a_pipe_only_committed_items_print_each_once() -> None:
    async with scripted_sse([list(s) for s in SCRIPTS]) as (server, url):
        code, out, err = await _run_on_a_pipe(url)
    assert code == 0, err
    assert out.splitlines() == [
        "#1   user     Greet the world.",
        "#2   model    Bonjour le monde",
        "task ended: completed",
    ]
    assert "reconnecting" in err
    assert server.requests[0]["authorization"] == "Bearer da_test_secret"
    assert "last-event-id" not in server.requests[0]
    assert server.requests[1]["last-event-id"] == "1"


def _watch_on_a_terminal_until(
    env: dict[str, str], marker: str, within: float, following: threading.Event
) -> str:
    """`agentctl watch` on a terminal until `marker` is on screen (then it is stopped);
    `following` is set once the session's first item is on screen."""
    main, tty = pty.openpty()
    fcntl.ioctl(tty, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    argv = [str(AGENTCTL), "watch", env.pop("SESSION")]
    pid = os.fork()
    if pid == 0:
        os.dup2(tty, 1)
        os.execve(argv[0], argv, env)
    os.close(tty)
    seen = b""
    deadline = time.monotonic() + within
    try:
        while marker.encode() not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(main, 65536)
                except OSError:
                    break
            if b"#1 " in seen:
                following.set()
    finally:
        os.kill(pid, signal.SIGTERM)  # the watch this test started
        os.waitpid(pid, 0)
        os.close(main)
    return seen.decode(errors="replace")


class _AnsweringOnceFollowed(OfflineProvider):
    """The offline model, which answers once the watch (a new process, slow to start on a
    loaded machine) shows the session's first item: its reply streams while it follows."""

    def __init__(self, piece_seconds: float) -> None:
        super().__init__(piece_seconds)
        self.following = threading.Event()

    async def complete(self, request: ModelRequest) -> ModelReply:
        await asyncio.to_thread(self.following.wait, 90)
        return await super().complete(request)


async def test_a_real_models_reply_streams_through_the_gateway_to_a_terminal_watch(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    key = await make_key(resources, tenant, "read", "start")
    model = _AnsweringOnceFollowed(piece_seconds=0.5)
    async with agent_worker(model, workspace) as queue:
        settings = migrated.settings(workspace=workspace, task_queue=queue, provider="offline")
        async with (
            serving(create_app(resources, client, settings)) as url,
            httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=30) as http,
        ):
            started = await http.post("/v1/sessions", json={"text": "Survey the workspace."})
            env = {
                "AGENT_GATEWAY_URL": url,
                "AGENT_API_KEY": key,
                "TERM": "xterm",
                "SESSION": started.json()["session_id"],
            }
            screen = await asyncio.to_thread(
                _watch_on_a_terminal_until, env, "#2   model", 90, model.following
            )
    committed = "#2   model    Let me look at the workspace first."
    assert committed in screen, screen
    before = screen[: screen.index(committed)]
    # The reply as it streamed, before its item committed, growing to the reply's end.
    reply = "Let me look at the workspace first."
    partials = re.findall(r"…    model    ([^\x1b\r\n]+)", before)
    assert partials and all(p in reply for p in partials), screen
    assert reply.endswith(partials[-1]), partials


async def test_a_redirect_is_not_followed_so_the_key_goes_nowhere_else() -> None:
    async with scripted_sse([SCRIPTS[1]]) as (elsewhere, target):
        moved = f"HTTP/1.1 307 Temporary Redirect\r\nlocation: {target}/steal\r\n"
        head = (moved + "content-length: 0\r\nconnection: close\r\n\r\n").encode()
        async with scripted_sse([[]], head=head) as (_, url):
            code, out, err = await _run_on_a_pipe(url)
    assert code == 1 and out == ""
    assert err == "error: the gateway answered HTTP 307: Temporary Redirect\n"
    assert elsewhere.requests == []  # the key was not carried to the redirect's target


async def test_reconnects_back_off_and_give_up_when_the_gateway_stays_away() -> None:
    first = [event("status", {"status": "running", "detail": None})]
    first.append(event("item", item(1, "user_message", "Hi."), 1))
    # Then every connection is answered and hung up at once, with no event.
    async with scripted_sse([first]) as (server, url):
        whys: list[str] = []
        got: list[str] = []
        events = follow_session(
            Gateway(url, "da_k_s"), SESSION, give_up_seconds=1.5, on_reconnect=whys.append
        )
        with pytest.raises(GatewayError, match="could not reconnect within 2 s"):
            async with asyncio.timeout(30):
                async for e in events:
                    got.append(e.event)
    assert got == ["status", "item"]
    # 0.2 + 0.4 + 0.8 + 1.6 s: a handful of tries, not one every 0.2 s.
    assert 3 <= len(server.requests) <= 6, len(server.requests)
    assert all(r["last-event-id"] == "1" for r in server.requests[1:])
    assert whys and all(w == "the gateway closed the stream" for w in whys)
