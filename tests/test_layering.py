"""Layers import downwards only: storage (AgentState, artifacts) knows nothing of workflows
and of activities but the tokenizer, and activities take their configuration as values,
never from the workers' settings."""

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


def test_storage_takes_only_the_tokenizer_from_activities() -> None:
    # Items store their token count, so the tool_result unit counts with the same tokenizer
    # as context assembly (activities/tokens.py imports nothing of ours).
    used = {line.split(": ")[1] for line in importers_of("storage", "activities")}
    assert used <= {"activities.tokens"}
