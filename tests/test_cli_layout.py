"""agentctl's output on a terminal's width: at 120 columns `sessions` shows every id and
status whole (the task text gives way); at 120 and 80, help names values by what they hold
(TEXT, TOOL=POLICY), never by a Python type, and cuts no help text."""

from __future__ import annotations

import re
import uuid

import pytest
import typer.main
from typer import _click as click

from durable_agents.storage.agent_state import agent_state
from durable_agents.workers.cli.main import app
from durable_agents.workers.resources import Resources
from tests.support.helpers import agentctl

LONG_TITLE = "summarise every file of the workspace into one report " * 3


async def test_sessions_shows_whole_ids_and_statuses_at_120_columns(
    resources: Resources,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tenant: str,
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    parent = uuid.uuid4()
    shown = {
        uuid.uuid4(): ("completed", False, "completed (unchecked)"),
        uuid.uuid4(): ("waiting_device", None, "waiting_device"),
        uuid.uuid4(): ("check_failed", None, "check_failed"),
    }
    async with agent_state(resources.sessions, tenant, write=True) as st:
        await st.sessions.create(parent, title=LONG_TITLE, model_config={})
        for sid, (status, checked, _) in shown.items():
            await st.sessions.create(sid, title=LONG_TITLE, model_config={}, parent_id=parent)
            await st.sessions.set_status(sid, status, checked=checked)
    code, out, _ = await agentctl(capsys, "sessions")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 120
    for sid, (_, _, words) in shown.items():
        (row,) = [line for line in lines if str(sid) in line]
        assert f"│ {words} " in row, row


def _commands() -> dict[str, click.Command]:
    """Every command and group of agentctl, by how it is typed."""
    found: dict[str, click.Command] = {}

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        found[" ".join(path)] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = _commands()
# How typer names a value by its Python type: `<str>`, `<bool>`, `<list[str]>`, `<int range>`.
PYTHON_TYPE = re.compile(r"<[a-z][a-z_\[\]| ]*>")


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda p: p or "agentctl")
@pytest.mark.parametrize("columns", ["120", "80"])
async def test_help_names_values_by_what_they_hold_and_cuts_no_help_text(
    path: str, columns: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = await agentctl(capsys, *path.split(), "--help")
    assert code == 0
    assert "<str>" not in out and "<bool>" not in out
    assert not PYTHON_TYPE.search(out), PYTHON_TYPE.findall(out)
    assert "…" not in out, out
    if columns == "120":  # a row whose left columns wrap interleaves them with its help
        shown = " ".join(out.replace("│", " ").split())
        for param in COMMANDS[path].params:
            declared = " ".join((getattr(param, "help", None) or "").split())
            assert declared in shown, f"{param.name}: {declared!r} not whole in:\n{out}"
