"""Device keys are issued and revoked like API keys (`agentctl keys create --device`), work
on the device routes only, and a device's registration is checked like any untrusted
input."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.storage.devices import DeviceRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer, gateway_http
from tests.support.helpers import agentctl


async def test_keys_create_device_issues_a_device_key_that_revoke_switches_off(
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    tenant: str,
) -> None:
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    code, out, err = await agentctl(
        capsys, "keys", "create", "--tenant", tenant, "--device", device_id, "--name", "lid"
    )
    assert code == 0, err
    key = out.splitlines()[0]
    key_id = key.split("_")[1]
    assert f"device {device_id}" in out and "(device)" in out
    code, out, _ = await agentctl(capsys, "keys", "list", "--tenant", tenant)
    assert code == 0 and device_id in out

    # A device key takes neither a user nor scopes; a user key still needs its scopes.
    code, _, err = await agentctl(
        capsys, "keys", "create", "--tenant", tenant, "--device", device_id, "--scope", "admin"
    )
    assert code == 1 and "no --user or --scope" in err
    code, _, err = await agentctl(capsys, "keys", "create", "--tenant", tenant, "--device", "a:b")
    assert code == 1 and "invalid device id" in err
    code, _, err = await agentctl(capsys, "keys", "create", "--tenant", tenant, "--user", "bob")
    assert code == 1 and "at least one scope" in err

    async with gateway_http(migrated, resources, client, workspace=Path("unused")) as http:
        me = await http.get("/v1/device", headers=bearer(key))
        assert me.status_code == 200
        assert me.json() == {"key_id": key_id, "tenant_id": tenant, "device_id": device_id}
        code, _, _ = await agentctl(capsys, "keys", "revoke", key_id)
        assert code == 0
        revoked = await http.get("/v1/device", headers=bearer(key))
        assert revoked.status_code == 401
        polled = await http.post("/v1/device/calls/next", params={"wait": 0}, headers=bearer(key))
        assert polled.status_code == 401


async def test_a_device_s_registration_is_checked_before_it_is_stored(
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    tenant: str,
) -> None:
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    code, out, err = await agentctl(
        capsys, "keys", "create", "--tenant", tenant, "--device", device_id
    )
    assert code == 0, err
    auth = bearer(out.splitlines()[0])
    bad_specs = [{"server": "dev", "mcp_name": "x"}]  # no schema, no effect
    async with gateway_http(migrated, resources, client, workspace=Path("unused")) as http:
        # Not registered yet: a poll is told so, not handed anything.
        unregistered = await http.post("/v1/device/calls/next", params={"wait": 0}, headers=auth)
        assert unregistered.status_code == 409
        for body in (
            {"tools": ["read file; rm -rf"]},
            {"tools": ["x" * 129]},
            {"tools": ["ok"], "tool_specs": bad_specs},
            {"tools": ["ok"], "tenant_id": "someone-else"},
            {"tools": [f"t{i}" for i in range(501)]},
        ):
            refused = await http.post("/v1/device", json=body, headers=auth)
            assert refused.status_code == 422, (body, refused.text)
        async with resources.sessions() as db:
            assert await DeviceRepository(db, tenant).get(device_id) is None
        # Malformed call ids and bodies of the call routes: refused alike.
        bad_id = await http.post("/v1/device/calls/not-a-uuid/heartbeat", headers=auth)
        assert bad_id.status_code == 404
        unknown = await http.post(
            f"/v1/device/calls/{uuid.uuid4()}/complete", headers=auth, json={"error": {"type": "X"}}
        )
        assert unknown.status_code == 404
        both = await http.post(
            f"/v1/device/calls/{uuid.uuid4()}/complete",
            headers=auth,
            json={"error": {"type": "X"}, "result": {"size_bytes": 1, "sha256": "0" * 64}},
        )
        assert both.status_code == 422
        bad_sha = await http.post(
            f"/v1/device/calls/{uuid.uuid4()}/upload", headers=auth, json={"sha256": "zz"}
        )
        assert bad_sha.status_code == 422
        registered = await http.post("/v1/device", json={"tools": ["read_file"]}, headers=auth)
        assert registered.status_code == 200
    async with resources.sessions() as db:
        row = await DeviceRepository(db, tenant).get(device_id)
    assert row is not None and row.tools == ["read_file"]
