"""AGENT_WORKSPACE_SEED: a new session's own workspace starts with the seed's files, copied
once, by content, symlinks left out; shared roots are not seeded; a seed the worker cannot
use stops it at start."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from durable_agents.storage.workspace_seed import SeedError, check_seed, seed_new_root
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.workers.settings import AgentSettings, workspace_layout

AGENTCTL = Path(sys.executable).parent / "agentctl"


@dataclass
class Session:
    id: uuid.UUID
    root_id: uuid.UUID | None = None
    project: str | None = None


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    (seed / "notes").mkdir(parents=True)
    (seed / "README.md").write_text("# demo\n")
    (seed / "notes" / "a.md").write_text("ship on Friday\n")
    (seed / "notes" / "a.md").chmod(0o644)
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the agent\n")
    (seed / "link.txt").symlink_to(outside)
    (seed / "linked_dir").symlink_to(tmp_path, target_is_directory=True)
    return seed


def files_below(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_a_new_session_root_gets_the_seed_files_and_no_symlink(seed: Path, tmp_path: Path) -> None:
    layout = WorkspaceLayout(tmp_path / "ws", seed=seed)
    session = Session(uuid.uuid4())
    root = layout.root_for("acme", session)
    assert layout.seed_for("acme", session) == seed
    assert seed_new_root(seed, root)
    assert files_below(root) == {"README.md": "# demo\n", "notes/a.md": "ship on Friday\n"}
    assert not any(p.is_symlink() for p in root.rglob("*"))
    # Only content: the workspace's own private modes, not the seed's.
    assert (root / "notes" / "a.md").stat().st_mode & 0o777 == 0o600
    assert root.stat().st_mode & 0o777 == 0o700
    assert (root.parent.stat().st_mode & 0o777) == 0o700  # the tenant directory
    assert [p.name for p in root.parent.iterdir()] == [root.name]  # no scratch left


def test_the_copy_happens_once_for_a_new_root_only(seed: Path, tmp_path: Path) -> None:
    root = tmp_path / "ws" / "acme" / str(uuid.uuid4())
    assert seed_new_root(seed, root)
    (root / "README.md").unlink()  # the agent's own change stays
    (seed / "later.md").write_text("added after\n")
    assert not seed_new_root(seed, root)
    assert files_below(root) == {"notes/a.md": "ship on Friday\n"}
    existing = tmp_path / "ws" / "acme" / str(uuid.uuid4())
    existing.mkdir()
    assert not seed_new_root(seed, existing)
    assert list(existing.iterdir()) == []


def test_shared_roots_are_not_seeded_but_a_sub_agent_shares_its_roots(
    seed: Path, tmp_path: Path
) -> None:
    task = Session(uuid.uuid4())
    child = Session(uuid.uuid4(), root_id=task.id)
    for scope in ("tenant", "project"):
        layout = WorkspaceLayout(tmp_path, scope, seed)  # type: ignore[arg-type]
        assert layout.seed_for("acme", Session(uuid.uuid4(), project="shared")) is None
    assert WorkspaceLayout(tmp_path, "tenant", seed).seed_for("acme", task) is None
    # A project-scope task naming no project has its own root: seeded.
    assert WorkspaceLayout(tmp_path, "project", seed).seed_for("acme", task) == seed
    layout = WorkspaceLayout(tmp_path, seed=seed)
    assert layout.seed_for("acme", child) == seed
    assert layout.root_for("acme", child) == layout.root_for("acme", task)
    assert WorkspaceLayout(tmp_path).seed_for("acme", task) is None


def test_the_setting_names_the_seed_and_empty_means_none(
    seed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_WORKSPACE_SEED", str(seed))
    assert workspace_layout(AgentSettings()).seed == seed.resolve()
    monkeypatch.setenv("AGENT_WORKSPACE_SEED", "")
    assert workspace_layout(AgentSettings()).seed is None


def test_a_missing_or_oversized_seed_is_refused(seed: Path, tmp_path: Path) -> None:
    assert check_seed(seed) == seed.resolve()
    with pytest.raises(SeedError, match="cannot be read"):
        check_seed(tmp_path / "missing")
    with pytest.raises(SeedError, match="not a directory"):
        check_seed(seed / "README.md")
    big = tmp_path / "big"
    big.mkdir()
    with (big / "huge.bin").open("wb") as f:
        f.truncate(65 * 1024 * 1024)
    with pytest.raises(SeedError, match="MiB"):
        check_seed(big)


def test_a_worker_with_a_missing_seed_stops_at_start_saying_why(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "MODEL_"))}
    env |= {"AGENT_WORKSPACE_SEED": str(tmp_path / "nope"), "MODEL_PROVIDER": "offline"}
    done = subprocess.run(
        [str(AGENTCTL), "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"AGENT_WORKSPACE_SEED={tmp_path / 'nope'} cannot be read" in done.stderr
