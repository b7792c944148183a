"""The gateway's front door: who may call, as which tenant, how often.

No key, a malformed, unknown, revoked or expired key: one and the same 401. A key without
the route's scope: 403. Another tenant's session or artifact: the same 404 as a missing
one. A body naming a tenant is refused. Past its rate a key gets 429 with Retry-After.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.workers.gateway.rate_limit import RateLimiter
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key, poll
from tests.support.helpers import items_of, tenant_root


async def test_missing_bad_revoked_and_expired_keys_get_one_401(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read")
    revoked = await make_key(resources, tenant, "read")
    expired = await make_key(
        resources, tenant, "read", expires_at=datetime.now(UTC) - timedelta(seconds=1)
    )
    async with resources.sessions() as db, db.begin():
        assert await ApiKeyRepository(db).revoke(revoked.split("_")[1])
    wrong_secret = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    unknown_id = f"da_{'0' * 16}_{key.split('_', 2)[2]}"
    async with gateway_http(migrated, resources, client) as http:
        assert (await http.get("/v1/sessions", headers=bearer(key))).status_code == 200
        answers = [await http.get("/v1/sessions")]
        answers.append(await http.get("/v1/sessions", headers={"Authorization": f"Basic {key}"}))
        for bad in (revoked, expired, wrong_secret, unknown_id, "da_nonsense"):
            answers.append(await http.get("/v1/sessions", headers=bearer(bad)))
    assert {r.status_code for r in answers} == {401}
    assert len({r.text for r in answers}) == 1  # no oracle: every refusal reads the same
    assert answers[0].json()["error"]["type"] == "unauthorized"
    assert answers[0].headers["WWW-Authenticate"] == "Bearer"


async def test_a_key_without_the_scope_is_forbidden(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    reader = await make_key(resources, tenant, "read")
    starter = await make_key(resources, tenant, "start")
    admin = await make_key(resources, tenant, "admin")
    some = str(uuid.uuid4())
    async with gateway_http(migrated, resources, client) as http:
        start = await http.post("/v1/sessions", json={"text": "hi"}, headers=bearer(reader))
        decide = await http.post(
            f"/v1/sessions/{some}/calls/c1/approve", json={}, headers=bearer(starter)
        )
        read = await http.get("/v1/sessions", headers=bearer(starter))
        compare = await http.get(f"/v1/compare?sessions={some},{some}", headers=bearer(starter))
        as_admin = await http.get("/v1/sessions", headers=bearer(admin))
    refusals = ((start, "start"), (decide, "approve"), (read, "read"), (compare, "read"))
    for refused, scope in refusals:
        assert refused.status_code == 403
        assert refused.json() == {
            "error": {"type": "forbidden", "message": f"this key lacks the {scope!r} scope"}
        }
    assert as_admin.status_code == 200  # admin grants every scope


async def test_another_tenants_session_and_artifact_are_a_404_like_missing_ones(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    (tenant_root(workspace, tenant) / "a.txt").write_text("secret of tenant one")
    owner = await make_key(resources, tenant, "admin")
    other_tenant = f"{tenant}-x"
    intruder = await make_key(resources, other_tenant, "admin")
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}]
    )
    async with (
        agent_worker(provider, workspace, workspace_scope="tenant") as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        started = await http.post("/v1/sessions", json={"text": "read a"}, headers=bearer(owner))
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        await poll(
            lambda: http.get(f"/v1/sessions/{sid}", headers=bearer(owner)),
            lambda r: r.json()["session"]["status"] == "completed",
        )
        result = next(i for i in await items_of(resources, tenant, sid) if i.artifact_id)
        mine = await http.get(f"/v1/artifacts/{result.artifact_id}", headers=bearer(owner))
        assert mine.status_code == 307

        missing_sid, missing_art = str(uuid.uuid4()), str(uuid.uuid4())
        pairs = [
            (f"/v1/sessions/{sid}", f"/v1/sessions/{missing_sid}", "GET", None),
            (f"/v1/artifacts/{result.artifact_id}", f"/v1/artifacts/{missing_art}", "GET", None),
            (f"/v1/sessions/{sid}/messages", f"/v1/sessions/{missing_sid}/messages", "POST",
             {"text": "hello"}),
            (f"/v1/sessions/{sid}/calls/c/approve", f"/v1/sessions/{missing_sid}/calls/c/approve",
             "POST", {}),
            (f"/v1/sessions/{sid}/cancel", f"/v1/sessions/{missing_sid}/cancel", "POST", None),
            (f"/v1/sessions/{sid}/resume", f"/v1/sessions/{missing_sid}/resume", "POST", None),
            (f"/v1/sessions/{sid}/fork", f"/v1/sessions/{missing_sid}/fork", "POST", {"at": 0}),
            (f"/v1/sessions/{sid}/replay", f"/v1/sessions/{missing_sid}/replay", "POST", {}),
            (f"/v1/sessions/{sid}/replay-report", f"/v1/sessions/{missing_sid}/replay-report",
             "GET", None),
            (f"/v1/compare?sessions={sid},{missing_sid}",
             f"/v1/compare?sessions={missing_sid},{sid}", "GET", None),
        ]  # fmt: skip
        for theirs, missing, method, body in pairs:
            a = await http.request(method, theirs, json=body, headers=bearer(intruder))
            b = await http.request(method, missing, json=body, headers=bearer(intruder))
            assert (a.status_code, b.status_code) == (404, 404), (theirs, a.text)
            real_id, missing_id = (sid, missing_sid) if "sessions" in theirs else (
                str(result.artifact_id), missing_art)  # fmt: skip
            assert a.text.replace(real_id, "ID") == b.text.replace(missing_id, "ID")
        listed = await http.get("/v1/sessions", headers=bearer(intruder))
        inbox = await http.get("/v1/approvals", headers=bearer(intruder))
    assert listed.json()["sessions"] == [] and inbox.json()["entries"] == []
    # Nothing the intruder sent reached the owner's session.
    texts = [i.text for i in await items_of(resources, tenant, sid)]
    assert "hello" not in texts


async def test_the_tenant_comes_from_the_key_never_from_the_body(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    key = await make_key(resources, tenant, "start")
    async with gateway_http(migrated, resources, client) as http:
        answer = await http.post(
            "/v1/sessions", json={"text": "hi", "tenant_id": "victim"}, headers=bearer(key)
        )
    assert answer.status_code == 422
    assert answer.json()["error"]["type"] == "invalid_request"
    assert "tenant_id" in answer.json()["error"]["message"]


async def test_bad_task_options_are_refused_with_the_reason_before_anything_commits(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    key = await make_key(resources, tenant, "start", "read")
    async with gateway_http(migrated, resources, client) as http:
        bad_policy = await http.post(
            "/v1/sessions",
            json={"text": "hi", "approval_policies": {"write_file": "sometimes"}},
            headers=bearer(key),
        )
        bad_steps = await http.post(
            "/v1/sessions", json={"text": "hi", "max_steps": 0}, headers=bearer(key)
        )
        empty = await http.post("/v1/sessions", json={"text": "   "}, headers=bearer(key))
        listed = await http.get("/v1/sessions", headers=bearer(key))
    assert bad_policy.status_code == 400 and "sometimes" in bad_policy.json()["error"]["message"]
    assert bad_steps.status_code == 400 and "max_steps" in bad_steps.json()["error"]["message"]
    assert empty.status_code == 400 and "empty" in empty.json()["error"]["message"]
    assert listed.json()["sessions"] == []


async def test_a_key_over_its_rate_gets_429_with_retry_after(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read")
    other = await make_key(resources, tenant, "read")
    limits = GatewaySettings(rate_per_second=0.2, burst=3)
    async with gateway_http(migrated, resources, client, gateway=limits) as http:
        codes = [(await http.get("/v1/me", headers=bearer(key))).status_code for _ in range(4)]
        limited = await http.get("/v1/me", headers=bearer(key))
        fresh = await http.get("/v1/me", headers=bearer(other))
    assert codes == [200, 200, 200, 429]
    assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 5
    assert fresh.status_code == 200  # the limit is per key


async def test_bodies_over_the_cap_are_refused_whether_announced_or_streamed(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    key = await make_key(resources, tenant, "start", "read")
    limits = GatewaySettings(rate_per_second=1000, burst=1000, max_body_bytes=4096)
    big = b'{"text": "' + b"x" * 8000 + b'"}'

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 1000):
            yield big[start : start + 1000]

    async with gateway_http(migrated, resources, client, gateway=limits) as http:
        announced = await http.post("/v1/sessions", content=big, headers=bearer(key))
        streamed = await http.post("/v1/sessions", content=chunks(), headers=bearer(key))
        listed = await http.get("/v1/sessions", headers=bearer(key))
    assert "content-length" not in streamed.request.headers  # it really was chunked
    for answer in (announced, streamed):
        assert answer.status_code == 413, answer.text
        assert answer.json()["error"] == {
            "type": "too_large",
            "message": "request bodies are limited to 4096 bytes",
        }
    assert listed.json()["sessions"] == []


def test_the_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    now = [100.0]
    limiter = RateLimiter(rate_per_second=2, burst=2, clock=lambda: now[0])
    assert [limiter.take("k") for _ in range(2)] == [0.0, 0.0]
    assert limiter.take("k") == 0.5  # one token takes half a second at 2/s
    now[0] += 0.5
    assert limiter.take("k") == 0.0
    now[0] += 60  # idle time refills only up to the burst
    assert [limiter.take("k") for _ in range(3)] == [0.0, 0.0, 0.5]
    assert limiter.take("other") == 0.0
