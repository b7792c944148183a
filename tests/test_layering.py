"""Layers import downwards only: storage (AgentState, artifacts) knows nothing of workflows,
and activities take their configuration as values, never from the workers' settings."""

from __future__ import annotations

from tests.support.imports import ROOT, imports, modules


def importers_of(package: str, of: str) -> list[str]:
    """Modules of `package` that import `of` or anything under it."""
    return sorted(
        f"{path.relative_to(ROOT)}: {module}"
        for name, path in modules().items()
        if name == package or name.startswith(f"{package}.")
        for module, _ in imports(path)
        if module == of or module.startswith(f"{of}.")
    )


def test_storage_imports_nothing_from_workflows() -> None:
    assert importers_of("storage", "workflows") == []


def test_activities_import_nothing_from_workers() -> None:
    assert importers_of("activities", "workers") == []
