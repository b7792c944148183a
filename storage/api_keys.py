"""API keys: who may call the gateway, as which tenant and user, with which scopes.

A key reads `da_<key_id>_<secret>`. The key id is the lookup handle (it may appear in
listings and logs); the secret is 32 random bytes and only its sha256 is stored. A plain
sha256 is enough here because the secret is high-entropy: there is nothing to brute-force
that a slow hash would protect. Repository methods never commit (the caller's unit of work
does).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.artifacts import check_user_tenant
from durable_agents.storage.devices import validate_device_id
from durable_agents.storage.models import ApiKeyRow

SCOPES = ("read", "start", "approve", "admin")
# What a device key holds instead of SCOPES: the device routes only, never a tenant route.
DEVICE_SCOPE = "device"
KEY_PREFIX = "da"
SECRET_BYTES = 32
MAX_USER_CHARS = (
    100  # durable_agents.workers.client.tasks.MAX_DECIDER_CHARS: the user is who decides
)
MAX_NAME_CHARS = 200
_KEY_ID_RE = re.compile(r"^[0-9a-f]{16}$")
_USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._+-]*$")
# Hashed when a key id is unknown, so an unknown id costs what a wrong secret costs.
_DUMMY_HASH = hashlib.sha256(b"no such key").hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who a valid key speaks for."""

    key_id: str
    tenant_id: str
    user_id: str
    scopes: frozenset[str]
    # A device key's device: such a key grants no tenant scope, whatever its row says.
    device_id: str | None = None

    def allows(self, scope: str) -> bool:
        """admin grants every tenant scope; a device key grants none."""
        if self.device_id is not None:
            return False
        return scope in self.scopes or "admin" in self.scopes


@dataclass(frozen=True)
class NewKey:
    """A created key: `key` is the only copy of the secret, shown once."""

    key: str
    row: ApiKeyRow


def check_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes, deduplicated in canonical order; ValueError naming an unknown one."""
    given = list(scopes)
    unknown = sorted(set(given) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scope {unknown[0]!r}; scopes are {', '.join(SCOPES)}")
    if not given:
        raise ValueError(f"a key needs at least one scope ({', '.join(SCOPES)})")
    return [s for s in SCOPES if s in given]


def check_user(user_id: str) -> str:
    if len(user_id) > MAX_USER_CHARS or not _USER_RE.fullmatch(user_id):
        raise ValueError(
            f"invalid user {user_id[:MAX_USER_CHARS]!r}: use 1-{MAX_USER_CHARS} letters, "
            "digits and @._+-"
        )
    return user_id


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(key: str) -> tuple[str, str] | None:
    """(key_id, secret) of a well-formed key, else None."""
    prefix, _, rest = key.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != KEY_PREFIX or not _KEY_ID_RE.fullmatch(key_id) or len(secret) < 43:
        return None
    return key_id, secret


class ApiKeyRepository:
    """All SQL on `api_keys`. Not tenant-scoped: a key is how a tenant is found."""

    def __init__(self, db: AsyncSession) -> None:
        self._db = db

    async def create(
        self,
        tenant_id: str,
        user_id: str,
        scopes: Sequence[str],
        *,
        name: str = "",
        expires_at: datetime | None = None,
    ) -> NewKey:
        """A new key for `user_id` in `tenant_id`; its secret exists only in the result."""
        check_user_tenant(tenant_id)
        check_user(user_id)
        return await self._insert(tenant_id, user_id, check_scopes(scopes), None, name, expires_at)

    async def create_device_key(
        self,
        tenant_id: str,
        device_id: str,
        *,
        name: str = "",
        expires_at: datetime | None = None,
    ) -> NewKey:
        """A new device key for (tenant, device): usable on the device routes only."""
        validate_device_id(device_id)
        return await self._insert(tenant_id, device_id, [DEVICE_SCOPE], device_id, name, expires_at)

    async def _insert(
        self,
        tenant_id: str,
        user_id: str,
        scopes: list[str],
        device_id: str | None,
        name: str,
        expires_at: datetime | None,
    ) -> NewKey:
        check_user_tenant(tenant_id)
        if len(name) > MAX_NAME_CHARS:
            raise ValueError(f"the key name is longer than {MAX_NAME_CHARS} characters")
        if expires_at is not None and expires_at.tzinfo is None:
            raise ValueError("expires_at must be timezone-aware")
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(SECRET_BYTES)
        row = ApiKeyRow(
            key_id=key_id,
            tenant_id=tenant_id,
            user_id=user_id,
            name=name,
            scopes=scopes,
            secret_sha256=_hash(secret),
            expires_at=expires_at,
            device_id=device_id,
        )
        self._db.add(row)
        await self._db.flush()
        await self._db.refresh(row)
        return NewKey(f"{KEY_PREFIX}_{key_id}_{secret}", row)

    async def list(self, tenant_id: str | None = None) -> list[ApiKeyRow]:
        """Keys, newest first (all tenants' when `tenant_id` is None)."""
        query = select(ApiKeyRow).order_by(ApiKeyRow.created_at.desc(), ApiKeyRow.key_id)
        if tenant_id is not None:
            query = query.where(ApiKeyRow.tenant_id == tenant_id)
        return list(await self._db.scalars(query))

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key now; False if there is no such key or it was revoked already."""
        result = await self._db.execute(
            update(ApiKeyRow)
            .where(ApiKeyRow.key_id == key_id, ApiKeyRow.revoked_at.is_(None))
            .values(revoked_at=datetime.now(UTC))
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def still_valid(self, key_ids: Collection[str]) -> set[str]:
        """Which of `key_ids` are neither revoked nor expired now (the database's clock):
        one primary-key read for all of them, so open streams can re-check cheaply."""
        if not key_ids:
            return set()
        rows = await self._db.scalars(
            select(ApiKeyRow.key_id).where(
                ApiKeyRow.key_id.in_(list(key_ids)),
                ApiKeyRow.revoked_at.is_(None),
                or_(ApiKeyRow.expires_at.is_(None), ApiKeyRow.expires_at > func.now()),
            )
        )
        return set(rows)

    async def authenticate(self, key: str, *, now: datetime | None = None) -> Principal | None:
        """The principal of a valid key; None for a malformed, unknown, wrong, revoked or
        expired one alike (callers must not tell them apart)."""
        parsed = parse_key(key)
        if parsed is None:
            return None
        key_id, secret = parsed
        row = await self._db.get(ApiKeyRow, key_id)
        matches = hmac.compare_digest(_hash(secret), row.secret_sha256 if row else _DUMMY_HASH)
        if row is None or not matches or row.revoked_at is not None:
            return None
        if row.expires_at is not None and row.expires_at <= (now or datetime.now(UTC)):
            return None
        return Principal(
            row.key_id, row.tenant_id, row.user_id, frozenset(row.scopes), row.device_id
        )
