"""Storage errors. Each maps to a non-retryable activity error of the same type name."""

from __future__ import annotations


class StorageError(Exception):
    error_type = "StorageError"


class SessionNotFound(StorageError):
    """No such session for this tenant (another tenant's session looks exactly like this)."""

    error_type = "SessionNotFound"


class ArtifactNotFound(StorageError):
    error_type = "ArtifactNotFound"


class ArtifactIntegrityError(StorageError):
    """Stored bytes do not match the sha256 that names them."""

    error_type = "ArtifactIntegrityError"


class InvalidTenant(StorageError):
    error_type = "InvalidTenant"


class TenantNotFound(StorageError):
    """Nothing names the tenant: no session, API key, device or row of its controls."""

    error_type = "TenantNotFound"

    def __init__(self, tenant_id: str) -> None:
        super().__init__(
            f"no tenant {tenant_id!r}: it has no session, API key, device or quota yet"
        )


class MemoryNotFound(StorageError):
    """No such live memory in this tenant and scope (another tenant's looks exactly like this)."""

    error_type = "MemoryNotFound"


class SessionArchived(StorageError):
    """The session is in the cold tier: rehydrate it before reading or appending."""

    error_type = "SessionArchived"


class ArtifactRecordMismatch(StorageError):
    """A reference names an artifact by a size our own record of that artifact does not
    have: it is refused before the object is read."""

    error_type = "ArtifactRecordMismatch"


class SchemaNotMigrated(StorageError):
    """The database lacks migrations this code needs: the migration has not run yet."""

    error_type = "SchemaNotMigrated"

    def __init__(self, current: tuple[str, ...], pending: tuple[str, ...]) -> None:
        at = ", ".join(current) or "no migration"
        super().__init__(
            f"AgentState schema at {at} lacks {', '.join(pending)}: "
            "run the migration (`agentctl migrate`, the migrate Job)"
        )


class SessionShared(StorageError):
    """A fork shares the session's items (storage/forks.py): they cannot be removed while it
    does."""

    error_type = "SessionShared"
