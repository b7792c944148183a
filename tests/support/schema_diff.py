"""The models against the database's schema, as Alembic's autogenerate compares them."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from durable_agents.storage import (  # noqa: F401
    decision_requests,
    device_models,
    outbox_models,
    rate_limits,
    usage_models,
)
from durable_agents.storage.models import Base
from durable_agents.storage.partitioning import PARTITION_SCHEMA_PREFIX


def _partition_clone(diff: Any) -> bool:
    """A foreign key PostgreSQL cloned onto one partition of the table it references (on a
    hash-partitioned schema): part of the parent's key, which the reflection lists apart."""
    if not (isinstance(diff, tuple) and diff[0] == "remove_fk"):
        return False
    schemas = {str(fk.column.table.schema) for fk in diff[1].elements}
    return any(s.startswith(PARTITION_SCHEMA_PREFIX) for s in schemas)


def model_differences(sync_conn: Any) -> list[Any]:
    found = compare_metadata(MigrationContext.configure(sync_conn), Base.metadata)
    return [d for d in found if not _partition_clone(d)]
