"""Context configurations, content-addressed: what a turn ran with, stored once.

A prompt or tool schema set is kept once per tenant under its sha256; a config row names
them by hash, with the model, provider, budget and the agent definition it came from (name,
fingerprint, approval policies). Turns point at a config, so a resumed
or audited turn uses what it used then, not whatever the defaults are today.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.errors import StorageError
from durable_agents.storage.models import ContextBlobRow, ContextConfigRow


class ContextConfigNotFound(StorageError):
    error_type = "ContextConfigNotFound"


@dataclass(frozen=True)
class ContextConfig:
    provider: str
    model: str
    system_prompt: str
    tool_schemas: list[dict[str, Any]]
    budget: dict[str, Any]
    # {"name", "sha256", "approvals"} of the agent definition; {} for configs recorded
    # before agent definitions existed.
    agent: dict[str, Any] = field(default_factory=dict)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class ContextConfigRepository:
    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def _put_blob(self, kind: str, body: str) -> str:
        sha = _sha(body)
        await self._db.execute(
            insert(ContextBlobRow)
            .values(tenant_id=self._tenant, sha256=sha, kind=kind, body=body)
            .on_conflict_do_nothing()
        )
        return sha

    async def record(self, config: ContextConfig) -> uuid.UUID:
        """Store `config` (once per distinct content) and return its id."""
        prompt_sha = await self._put_blob("system_prompt", config.system_prompt)
        tools_sha = await self._put_blob("tool_schemas", _canonical(config.tool_schemas))
        identity = {
            "provider": config.provider,
            "model": config.model,
            "system_prompt_sha256": prompt_sha,
            "tool_schemas_sha256": tools_sha,
            "budget": config.budget,
        }
        if config.agent:  # left out when empty: configs recorded before agents keep their hash
            identity["agent"] = config.agent
        sha = _sha(_canonical(identity))
        await self._db.execute(
            insert(ContextConfigRow)
            .values(id=uuid.uuid4(), tenant_id=self._tenant, sha256=sha, **identity)
            .on_conflict_do_nothing(index_elements=["tenant_id", "sha256"])
        )
        config_id = await self._db.scalar(
            select(ContextConfigRow.id).where(
                ContextConfigRow.tenant_id == self._tenant, ContextConfigRow.sha256 == sha
            )
        )
        if config_id is None:
            raise ContextConfigNotFound(f"context config {sha} vanished while recording it")
        return config_id

    async def load(self, config_id: uuid.UUID) -> ContextConfig:
        row = await self._db.scalar(
            select(ContextConfigRow).where(
                ContextConfigRow.id == config_id, ContextConfigRow.tenant_id == self._tenant
            )
        )
        if row is None:
            raise ContextConfigNotFound(f"context config {config_id} not found")
        blobs = {
            b.sha256: b.body
            for b in await self._db.scalars(
                select(ContextBlobRow).where(
                    ContextBlobRow.tenant_id == self._tenant,
                    ContextBlobRow.sha256.in_([row.system_prompt_sha256, row.tool_schemas_sha256]),
                )
            )
        }
        return ContextConfig(
            provider=row.provider,
            model=row.model,
            system_prompt=blobs[row.system_prompt_sha256],
            tool_schemas=json.loads(blobs[row.tool_schemas_sha256]),
            budget=dict(row.budget),
            agent=dict(row.agent or {}),
        )
