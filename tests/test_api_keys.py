"""API keys in AgentState: stored hashed, found by id then checked in constant time;
revoked, expired, malformed and wrong keys all look the same; `agentctl keys`."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from durable_agents.storage.api_keys import ApiKeyRepository, check_scopes
from durable_agents.storage.models import ApiKeyRow
from durable_agents.workers.resources import Resources
from tests.support.helpers import agentctl


async def _create(res: Resources, tenant: str, **kw: object) -> str:
    async with res.sessions() as db, db.begin():
        new = await ApiKeyRepository(db).create(tenant, "ann", ["read"], **kw)  # type: ignore[arg-type]
        return new.key


async def _auth(res: Resources, key: str) -> object:
    async with res.sessions() as db:
        return await ApiKeyRepository(db).authenticate(key)


async def test_only_the_hash_is_stored_and_the_key_authenticates(
    resources: Resources, tenant: str
) -> None:
    key = await _create(resources, tenant)
    prefix, key_id, secret = key.split("_", 2)
    assert prefix == "da" and len(secret) >= 43  # 32 random bytes, base64url
    async with resources.sessions() as db:
        row = await db.scalar(select(ApiKeyRow).where(ApiKeyRow.key_id == key_id))
    assert row is not None and secret not in str(vars(row))
    assert row.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    principal = await _auth(resources, key)
    assert principal is not None
    assert (principal.tenant_id, principal.user_id) == (tenant, "ann")  # type: ignore[attr-defined]


async def test_wrong_revoked_expired_and_malformed_keys_are_all_refused(
    resources: Resources, tenant: str
) -> None:
    key = await _create(resources, tenant)
    expired = await _create(resources, tenant, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    key_id = key.split("_")[1]
    for bad in (key[:-1] + ("A" if key[-1] != "A" else "B"), expired, "da_x_y", "", "Bearer"):
        assert await _auth(resources, bad) is None
    assert await _auth(resources, key) is not None
    async with resources.sessions() as db, db.begin():
        assert await ApiKeyRepository(db).revoke(key_id)
    assert await _auth(resources, key) is None


def test_scopes_are_checked() -> None:
    assert check_scopes(["start", "read", "read"]) == ["read", "start"]
    with pytest.raises(ValueError, match="unknown scope 'root'"):
        check_scopes(["read", "root"])
    with pytest.raises(ValueError, match="at least one scope"):
        check_scopes([])


async def test_keys_cli_prints_the_key_once_lists_without_secrets_and_revokes(
    cli_env: None, capsys: pytest.CaptureFixture[str], resources: Resources, tenant: str
) -> None:
    code, out, err = await agentctl(
        capsys, "keys", "create", "--tenant", tenant, "--user", "bob", "--scope", "read",
        "--scope", "approve", "--expires-in", "30d",
    )  # fmt: skip
    assert code == 0, err
    key = out.splitlines()[0]
    key_id, secret = key.split("_", 2)[1:]
    assert "not shown again" in out
    principal = await _auth(resources, key)
    assert principal is not None and principal.scopes == {"read", "approve"}  # type: ignore[attr-defined]

    code, out, _ = await agentctl(capsys, "keys", "list", "--tenant", tenant)
    assert code == 0 and key_id in out and "bob" in out and "active" in out
    assert secret not in out and secret[:8] not in out

    code, out, _ = await agentctl(capsys, "keys", "revoke", key_id)
    assert code == 0 and f"revoked {key_id}" in out
    assert await _auth(resources, key) is None
    code, out, _ = await agentctl(capsys, "keys", "list", "--tenant", tenant)
    assert "revoked" in out
    code, _, err = await agentctl(capsys, "keys", "revoke", key_id)
    assert code == 1 and "no active key" in err

    code, _, err = await agentctl(
        capsys, "keys", "create", "--tenant", tenant, "--user", "bob", "--scope", "sudo"
    )
    assert code == 1 and "unknown scope 'sudo'" in err
