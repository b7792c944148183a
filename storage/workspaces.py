"""Where each session's workspace lives on the cloud workers' disk.

``{base}/{tenant}/{root_session_id}`` by default: a session's tools see only their own
root, never another tenant's or another task's files. ``tenant`` scope shares one root per
tenant (``{base}/{tenant}/_tenant``), ``project`` scope one per project a task names
(``{base}/{tenant}/_projects/{project}``). The root is derived from AgentState (the
session row), never from a workflow payload field a caller controls. Sub-agents share the
workspace of the task that started them (their root session), as a delegated sub-task
works on the same files.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, get_args

from durable_agents.storage.artifacts import check_tenant

WorkspaceScope = Literal["session", "tenant", "project"]
SCOPES: tuple[str, ...] = get_args(WorkspaceScope)
TENANT_DIR = "_tenant"
PROJECTS_DIR = "_projects"

# How deep (in components) and how long (UTF-8 bytes, relative to the root) a workspace
# path may be. The file tools refuse paths beyond them, and the packer leaves out (and
# lists) whatever another writer put beyond them, so a pack always restores: it stays
# far from PATH_MAX wherever the root sits, and nothing has to recurse 1,000 levels.
MAX_PATH_DEPTH = 64
MAX_PATH_BYTES = 2048

# New workspace roots, and the directories above them, are private to the worker's user.
ROOT_MODE = 0o700

_PROJECT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def validate_project(name: str) -> str:
    """A project name: 1-64 lower-case letters, digits, '.', '_' or '-' (it names a dir)."""
    if not _PROJECT_RE.fullmatch(name) or ".." in name:
        raise ValueError(
            f"invalid project name {name[:80]!r}: use 1-64 lower-case letters, digits, '.', "
            "'_' or '-', starting with a letter or digit"
        )
    return name


class SessionLike(Protocol):
    id: uuid.UUID
    root_id: uuid.UUID | None
    project: str | None


def session_dir_name(session: SessionLike) -> str:
    """The session-scope directory: the root session's id (sub-agents share it)."""
    return str(session.root_id or session.id)


@dataclass(frozen=True)
class WorkspaceLayout:
    """Maps a session to its workspace root below ``base`` according to ``scope``."""

    base: Path
    scope: WorkspaceScope = "session"
    # Files a new session's own root starts with (AGENT_WORKSPACE_SEED; storage.workspace_seed).
    seed: Path | None = None

    def root_for(self, tenant_id: str, session: SessionLike) -> Path:
        """The workspace root of ``session`` (not created here: tools create it 0700)."""
        tenant_dir = self.base / check_tenant(tenant_id)
        if self.scope == "tenant":
            return tenant_dir / TENANT_DIR
        if self.scope == "project" and session.project:
            return tenant_dir / PROJECTS_DIR / validate_project(session.project)
        # Session scope, and a session that names no project under project scope.
        return tenant_dir / session_dir_name(session)

    def session_root(self, tenant_id: str, root_session_id: uuid.UUID) -> Path:
        """The session-scope root of a root session, which archive and GC look after."""
        return self.base / check_tenant(tenant_id) / str(root_session_id)

    def seed_for(self, tenant_id: str, session: SessionLike) -> Path | None:
        """The seed a new root of ``session`` starts with: only a session's own root, never
        a tenant's or project's shared one, which holds that tenant's own files."""
        if self.seed is None:
            return None
        own = self.session_root(tenant_id, session.root_id or session.id)
        return self.seed if self.root_for(tenant_id, session) == own else None

    def readable_root(self, tenant_id: str, session: SessionLike) -> Path:
        """Where ``session``'s files are read without making its root: the root, or while a
        seeded root is still to be made (before its first tool call), the seed it will hold."""
        root = self.root_for(tenant_id, session)
        seed = self.seed_for(tenant_id, session)
        return seed if seed is not None and not os.path.lexists(root) else root

    @property
    def per_session(self) -> bool:
        """Whether roots follow the session lifecycle (archived, restored, collected)."""
        return self.scope in ("session", "project")


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and any missing parent 0700 (a concurrent maker is fine)."""
    # os.makedirs gives only the leaf its mode; the tenant directory above a session's
    # root would list that tenant's session ids to every local user.
    missing: list[Path] = []
    here = directory
    while not here.exists():
        missing.append(here)
        here = here.parent
    for made in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(made, ROOT_MODE)
