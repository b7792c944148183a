"""agentctl's bad invocations, each run as a process of its own against the real stack
(tests/support/agentctl_fork.py): one line on stderr (`error: ...`) and exit code 1, or
click's own usage message and exit code 2 — never a Python traceback."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import get_args

import pytest

from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.cli.dev import ProviderName
from durable_agents.workers.cli.errors import DEBUG_ENV, report
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import ModelSettings
from durable_agents.workers.stack import StackEndpoints
from tests.support.agentctl_fork import run_agentctl

UNKNOWN = str(uuid.uuid4())
NOT_JSON, NOT_AN_OBJECT = "{not json", "[1, 2]"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CLOSED = _closed_port()
# A password in a URL must never reach the output.
SECRET = "hunter2-secret"
DB_DOWN = {"DATABASE_URL": f"postgresql+asyncpg://agent:{SECRET}@127.0.0.1:{CLOSED}/agent"}
S3_DOWN = {"S3_ENDPOINT_URL": f"http://127.0.0.1:{CLOSED}"}
TEMPORAL_DOWN = {"TEMPORAL_ADDRESS": f"127.0.0.1:{CLOSED}"}
WHAT_TO_DO = "`agentctl env` shows the dev stack this shell uses, `agentctl dev up` starts one"


@dataclass(frozen=True)
class Case:
    args: list[str]
    code: int
    says: str  # in the error output, case-insensitive
    env: dict[str, str] = field(default_factory=dict)


def _session_commands(session: str) -> dict[str, list[str]]:
    return {
        "show": ["show", session],
        "status": ["status", session],
        "watch": ["watch", session],
        "send": ["send", session, "hello"],
        "approve": ["approve", session, "call_1"],
        "reject": ["reject", session, "call_1"],
        "archive-session": ["archive", "session", session],
        "archive-restore": ["archive", "restore", session],
    }


CASES: dict[str, Case] = {
    # Ranges: usage errors from the CLI library, before anything is reached.
    "sessions-limit-negative": Case(["sessions", "--limit", "-1"], 2, "--limit"),
    "sessions-limit-huge": Case(["sessions", "--limit", "100000000000000000000"], 2, "--limit"),
    # Ranges are the command layer's, in the words every door uses (tests/test_one_door.py).
    "start-max-steps-0": Case(["start", "x", "--max-steps", "0"], 1, "max_steps must be >= 1"),
    "start-max-steps-negative": Case(
        ["start", "x", "--max-steps", "-1"], 1, "max_steps must be >= 1"
    ),
    "start-max-steps-huge": Case(
        ["start", "x", "--max-steps", "10" * 12], 1, "max_steps must be >= 1 and <= 10000"
    ),
    "show-limit-0": Case(["show", UNKNOWN, "--limit", "0"], 2, "--limit"),
    "show-after-negative": Case(["show", UNKNOWN, "--after", "-1"], 2, "--after"),
    "watch-after-negative": Case(["watch", UNKNOWN, "--after", "-1"], 2, "--after"),
    "archive-idle-limit-0": Case(["archive", "idle", "--limit", "0"], 2, "--limit"),
    "dev-up-port-out-of-range": Case(["dev", "up", "--temporal-port", "70000"], 2, "port"),
    "dev-up-unknown-provider": Case(["dev", "up", "--model-provider", "gpt"], 2, "provider"),
    "device-workspace-missing": Case(
        ["device", "--device-id", "d1", "--workspace", "/nonexistent/ws"], 2, "workspace"
    ),
    "artifacts-get-output-is-a-directory": Case(
        ["artifacts", "get", "{artifact}", "-o", "{dir}"], 2, "output"
    ),
    # Session ids: malformed, and well formed but nobody's.
    **{
        f"{name}-not-a-uuid": Case(args, 1, "not a session id")
        for name, args in _session_commands("not-a-uuid").items()
    },
    **{
        f"{name}-unknown-session": Case(args, 1, "not found")
        for name, args in _session_commands(UNKNOWN).items()
    },
    # Tenants and devices.
    "sessions-bad-tenant": Case(["sessions", "--tenant", "a b"], 1, "invalid tenant"),
    "start-reserved-tenant": Case(["start", "x", "--tenant", "_system"], 1, "reserved"),
    "bad-default-tenant": Case(["devices"], 1, "invalid tenant", {"AGENT_TENANT_ID": "a/b"}),
    "start-bad-device": Case(["start", "x", "--device", "a b"], 1, "device_id must be"),
    "start-device-tool-without-device": Case(
        ["start", "x", "--device-tool", "read_file"], 1, "--device"
    ),
    "approve-bad-device": Case(["approve", UNKNOWN, "c", "--device", "a/b"], 1, "device id"),
    "reject-bad-device": Case(["reject", UNKNOWN, "c", "--device", ""], 1, "device id"),
    "gc-bad-tenant": Case(["gc", "--dry-run", "--tenant", "a b"], 1, "invalid tenant"),
    "device-bad-id": Case(["device", "--device-id", "a b", "--workspace", "{dir}"], 1, "device"),
    # JSON options and policies.
    "approve-edit-not-json": Case(["approve", UNKNOWN, "c", "--edit", NOT_JSON], 1, "json"),
    "approve-edit-not-an-object": Case(
        ["approve", UNKNOWN, "c", "--edit", NOT_AN_OBJECT], 1, "json object"
    ),
    "start-policy-without-tool": Case(["start", "x", "--policy", "always"], 1, "tool=policy"),
    "start-policy-unknown": Case(["start", "x", "--policy", "w=sometimes"], 1, "policy"),
    "start-policy-bad-regex": Case(["start", "x", "--policy", "w=match:a:("], 1, "regex"),
    "start-empty-task": Case(["start", "   "], 1, "empty"),
    # Durations and paths.
    "gc-window-not-a-duration": Case(["gc", "--window", "soon"], 1, "not a duration"),
    "gc-window-overflows": Case(["gc", "--window", "9" * 20 + "d"], 1, "duration"),
    "gc-schedule-every-0": Case(["gc", "schedule", "--every", "0s"], 1, "--every"),
    "archive-idle-for-not-a-duration": Case(["archive", "idle", "--for", "x"], 1, "duration"),
    "artifacts-get-bad-id": Case(["artifacts", "get", "zz"], 1, "not an artifact id"),
    "artifacts-get-output-dir-missing": Case(
        ["artifacts", "get", "{artifact}", "-o", "/nonexistent/dir/out"], 1, "/nonexistent/dir"
    ),
    # Settings from the environment.
    "bad-setting": Case(["sessions"], 1, "read_cache_mb", {"AGENT_READ_CACHE_MB": "-1"}),
    "database-url-not-a-url": Case(["sessions"], 1, "database_url", {"DATABASE_URL": "nope"}),
    "database-url-bad-port": Case(
        ["sessions"], 1, "database_url", {"DATABASE_URL": f"postgresql+asyncpg://a:{SECRET}@h:x/db"}
    ),
    "database-url-wrong-driver": Case(
        ["migrate"], 1, "postgresql+asyncpg", {"DATABASE_URL": f"mysql://a:{SECRET}@h/db"}
    ),
    "s3-endpoint-not-a-url": Case(
        ["artifacts", "get", "{artifact}"], 1, "endpoint", {"S3_ENDPOINT_URL": "not a url"}
    ),
    # Services that are down.
    "sessions-postgres-down": Case(["sessions"], 1, "postgresql", DB_DOWN),
    "devices-postgres-down": Case(["devices"], 1, "postgresql", DB_DOWN),
    "migrate-postgres-down": Case(["migrate"], 1, "postgresql", DB_DOWN),
    "artifacts-get-s3-down": Case(["artifacts", "get", "{artifact}"], 1, "s3", S3_DOWN),
    "artifacts-get-s3-refuses": Case(
        ["artifacts", "get", "{artifact}"], 1, "s3", {"S3_SECRET_ACCESS_KEY": "wrong"}
    ),
    "gc-s3-down": Case(["gc", "--dry-run", "--tenant", "{tenant}"], 1, "s3", S3_DOWN),
    "status-temporal-down": Case(["status", UNKNOWN], 1, "temporal", TEMPORAL_DOWN),
    "send-temporal-down": Case(["send", UNKNOWN, "hi"], 1, "temporal", TEMPORAL_DOWN),
    "start-temporal-down": Case(["start", "x"], 1, "temporal", TEMPORAL_DOWN),
    # Where a service is not reached, what to do.
    "sessions-postgres-down-what-to-do": Case(["sessions"], 1, WHAT_TO_DO, DB_DOWN),
    "artifacts-get-s3-down-what-to-do": Case(
        ["artifacts", "get", "{artifact}"], 1, WHAT_TO_DO, S3_DOWN
    ),
    "status-temporal-down-what-to-do": Case(["status", UNKNOWN], 1, WHAT_TO_DO, TEMPORAL_DOWN),
    "gc-schedule-temporal-address-malformed": Case(
        ["gc", "schedule"], 1, "temporal", {"TEMPORAL_ADDRESS": "no such host"}
    ),
    # Checked before any service is asked: the bad input is named, not the outage.
    "sessions-bad-tenant-postgres-down": Case(
        ["sessions", "--tenant", "a b"], 1, "invalid tenant", DB_DOWN
    ),
}


@dataclass(frozen=True)
class Outcome:
    code: int | None
    out: str
    err: str


def _filled(text: str, fill: dict[str, str]) -> str:
    for name, value in fill.items():
        text = text.replace(f"{{{name}}}", value)
    return text


async def _run(case: Case, env: dict[str, str], fill: dict[str, str]) -> Outcome:
    done = await asyncio.to_thread(
        run_agentctl,
        [_filled(a, fill) for a in case.args],
        env={**env, **{k: _filled(v, fill) for k, v in case.env.items()}},
        timeout=60,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def selected(request: pytest.FixtureRequest) -> list[str]:
    """The cases this pytest run collected, so `-k one-case` starts one process, not all."""
    return [
        item.callspec.params["name"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    ]


@dataclass(frozen=True)
class Run:
    tenant: str
    outcomes: dict[str, Outcome]


@pytest.fixture(scope="module")
async def run(
    migrated: StackEndpoints,
    resources: Resources,
    selected: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Run:
    """Every selected case run at once (a few processes at a time), all against the stack,
    each with its own environment changes, in a tenant of their own."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    scratch = tmp_path_factory.mktemp("cli-errors")
    ref = await resources.store.put(tenant, b"an artifact for the CLI error tests")
    async with resources.sessions() as db, db.begin():
        artifact = await ArtifactRepository(db, tenant).register(ref, uri=resources.store.uri(ref))
    env = {k: v for k, v in os.environ.items() if k != "AGENT_DEBUG"}
    env.update(migrated.env(), AGENT_TENANT_ID=tenant)
    fill = {"artifact": str(artifact), "dir": str(scratch), "tenant": tenant}
    gate = asyncio.Semaphore(4)

    async def one(name: str) -> tuple[str, Outcome]:
        async with gate:
            return name, await _run(CASES[name], env, fill)

    return Run(tenant, dict(await asyncio.gather(*(one(n) for n in selected))))


@pytest.mark.parametrize("name", list(CASES))
def test_bad_invocation_is_one_clear_line_never_a_traceback(name: str, run: Run) -> None:
    case, got = CASES[name], run.outcomes[name]
    shown = f"exit {got.code}\nstdout: {got.out!r}\nstderr: {got.err!r}"
    assert "Traceback" not in got.out + got.err, shown
    assert SECRET not in got.out + got.err, shown
    assert got.code == case.code, shown
    if case.code == 1:
        lines = got.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), shown
        assert got.out == "", shown
    assert case.says.lower() in " ".join(got.err.lower().split()), shown


async def test_a_refused_start_commits_nothing(run: Run, resources: Resources) -> None:
    async with resources.sessions() as db:
        assert await SessionRepository(db, run.tenant).recent(limit=10) == []


def test_an_unexpected_error_is_one_line_naming_its_type(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert report(LookupError("first line\nsecond line")) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        err == f"error: unexpected LookupError: first line ({DEBUG_ENV}=1 prints the traceback)\n"
    )


def test_agent_debug_prints_the_traceback_before_the_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEBUG_ENV, "1")
    try:
        raise ExceptionGroup("task group", [ValueError("bad\n  input")])
    except ExceptionGroup as err:
        assert report(err) == 1
    err_text = capsys.readouterr().err
    assert "Traceback" in err_text
    # The group's one error, as one line, last.
    assert err_text.splitlines()[-1] == "error: bad input"


def test_dev_up_offers_exactly_the_model_providers_the_settings_accept() -> None:
    accepted = set(get_args(ModelSettings.model_fields["provider"].annotation)) - {type(None)}
    literal = next(iter(accepted))
    assert {p.value for p in ProviderName} == set(get_args(literal))
