"""Joining a model's split packages into one GGUF: checked, atomic, reused."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable_agents.workers.stack.local_model import (
    MODELS,
    LocalModel,
    LocalModelError,
    assemble,
    model_named,
)

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Path]:
    """Three part packages laid out as pip installs the real ones."""
    site = tmp_path / "site"
    for n, data in enumerate(PARTS, start=1):
        package = site / f"fakemodel_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(data)
    sys.path.insert(0, str(site))
    yield site
    sys.path.remove(str(site))
    for n in range(1, len(PARTS) + 1):
        sys.modules.pop(f"fakemodel_part{n}", None)


def _model(sha256: str | None = None) -> LocalModel:
    whole = b"".join(PARTS)
    return LocalModel(
        key="fake",
        served_name="fake-model",
        package_prefix="fakemodel_part",
        parts=len(PARTS),
        size_bytes=len(whole),
        sha256=sha256 or hashlib.sha256(whole).hexdigest(),
    )


def test_the_parts_are_joined_in_order_and_reused(installed: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = assemble(_model(), cache)
    assert path.read_bytes() == b"".join(PARTS)
    assert path.stat().st_mode & 0o222 == 0  # read-only once verified
    stamp = path.stat().st_mtime_ns
    assert assemble(_model(), cache) == path
    assert path.stat().st_mtime_ns == stamp  # not rebuilt
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no staging left over


def test_parts_that_do_not_hash_right_leave_no_model(installed: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(LocalModelError, match=r"hash to .* expected 0000"):
        assemble(_model(sha256="0" * 64), cache)
    assert list((cache / "models").iterdir()) == []


def test_a_missing_part_is_named_with_the_install_command(installed: Path, tmp_path: Path) -> None:
    (installed / "fakemodel_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(LocalModelError, match=r"part02\.bin is missing; install it with `make"):
        assemble(_model(), tmp_path / "cache")


def test_an_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(LocalModelError, match=r"known: qwen2\.5-coder-0\.5b, qwen2\.5-coder-1\.5b"):
        model_named("gpt-9")
    assert {m.parts for m in MODELS.values()} == {22, 6}
