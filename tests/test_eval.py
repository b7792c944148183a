"""`agentctl eval TASKS.yaml --agents a,b`: the same task runs on two agents (twice each),
each run started as `agentctl start` starts one, on an in-process worker whose scripted
model writes 42 for one agent and 41 for the other. The task's check wants 42: one agent's
runs complete checked, the other's end check_failed, and the report says so per task (where
the second agent first parts from the first: the content it wrote) and per agent (checked
successes, false completions, tokens, cost, median time). A bad tasks file, task or agent is
refused naming the task and the field, and starts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durable_agents.activities.agents import Agent
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.workers.client.eval_tasks import EvalTaskError, eval_tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.helpers import agentctl, session_count
from tests.support.replay_models import ByInstructions


def _writes(answer: str) -> list[dict[str, object]]:
    call = {"name": "write_file", "arguments": {"path": "answer.txt", "content": answer}}
    return [{"tool_calls": [call]}, {"text": f"The answer is {answer}."}]


AGENTS = [
    Agent(
        name=name,
        instructions=f"Write {answer} to answer.txt.",
        tools=builtin_tools("write_file"),
        approvals={"write_file": "never"},
    )
    for name, answer in (("careful", "42"), ("hasty", "41"))
]
TASKS = """
- name: the answer
  text: Put the answer in answer.txt.
  max_steps: 4
  check:
    contains: {answer.txt: ["42"]}
    attempts: 1
"""


@pytest.fixture
def definitions(cli_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_DEFINITIONS", "tests.test_eval:AGENTS")
    get_settings.cache_clear()


async def test_one_agent_passes_the_check_and_the_other_fails_it(
    migrated: StackEndpoints,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    definitions: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks_file = tmp_path / "tasks.yaml"
    tasks_file.write_text(TASKS)
    scripts = {
        "Write 42": ScriptedProvider.from_data(_writes("42")),
        "Write 41": ScriptedProvider.from_data(_writes("41")),
    }
    model = ByInstructions(ScriptedProvider.from_data([]), scripts)
    # Its runs go at once: each keeps its workflow cached. With none, sdk-core can evict a
    # run while its local activity's result is on the way; the run then waits out a 10 s
    # workflow-task timeout (66 s for this test, where it takes 7 s cached).
    worker = agent_worker(model, workspace, agents=tuple(AGENTS), max_cached_workflows=8)
    async with worker as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        get_settings.cache_clear()
        args = ("eval", str(tasks_file), "--agents", "careful,hasty", "--runs", "2")
        code, out, err = await agentctl(capsys, *args, "--wait", "60")
        assert code == 0, err
        assert err.count("started the answer x ") == 4
        assert "ended 4 of 4" in err
        assert "step 0: other arguments (write_file: content)" in out
        assert "check_failed" in out and "completed (checked)" in out
        code, out, err = await agentctl(capsys, *args, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["unfinished"] == 0
    (task,) = report["tasks"]
    assert [(r["agent"], r["run"]) for r in task["runs"]] == [
        ("careful", 1),
        ("careful", 2),
        ("hasty", 1),
        ("hasty", 2),
    ]
    sessions = task["comparison"]["sessions"]
    assert [(s["status"], s["check"]) for s in sessions] == [
        ("completed", "passed"),
        ("completed", "passed"),
        ("check_failed", "failed"),
        ("check_failed", "failed"),
    ]
    parted = [s["divergence"] for s in sessions]
    assert parted[:2] == [None, None]  # the same agent's runs do the same
    assert parted[2] == {
        "step": 0,
        "reason": "other arguments",
        "detail": "write_file: content",
    }
    scores = {a["agent"]: a for a in report["agents"]}
    assert [(a["runs"], a["checked"], a["false_completions"]) for a in scores.values()] == [
        (2, 2, 0),
        (2, 0, 0),
    ]
    assert all(a["tokens"] > 0 and a["cost_usd"] is None for a in scores.values())  # unpriced
    assert all(a["median_seconds"] > 0 for a in scores.values())
    assert await session_count(resources, tenant) == 8


async def test_a_bad_file_task_or_agent_is_refused_naming_it_and_starts_nothing(
    migrated: StackEndpoints,
    resources: Resources,
    tenant: str,
    definitions: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    refusals = {
        "- name: [unclosed": "the tasks file is not valid YAML (line 1, column 18)",
        "name: one": "the tasks file is a list of tasks, each {name, text, check?, ...}",
        "- text: no name": "task #1, name: a task's name is 1-64 printable characters",
        "- {name: a, text: x}\n- {name: a, text: y}": "task 'a', name: two tasks have this name",
        "- {name: a, text: x, budget: 3}": "task 'a', budget: not a field of a task "
        "(name, text, check, max_steps, project)",
        "- {name: a}": "task 'a', text: a task needs its text",
        "- {name: a, text: x, max_steps: '5'}": "task 'a', max_steps: max_steps must be a "
        "whole number, got str (agent careful)",
        "- {name: a, text: x, check: {command: [make, test]}}": "task 'a', check.command: a "
        "start's check names files and texts only; a command or a callable is declared on the "
        "agent (agent careful)",
        "- {name: a, text: x, check: {contains: {a.txt: '42'}}}": "task 'a', check.contains: "
        "check.contains must map a path to a list of texts (agent careful)",
    }
    tasks_file = tmp_path / "tasks.yaml"
    for source, words in refusals.items():
        tasks_file.write_text(source)
        code, out, err = await agentctl(
            capsys, "eval", str(tasks_file), "--agents", "careful,hasty"
        )
        assert (code, out, err) == (1, "", f"error: {words}\n"), source
    tasks_file.write_text(TASKS)
    agents = {
        "careful,nobody": "no agent named 'nobody'",
        "careful,careful": "agent 'careful' is named twice",
        "careful": "agents x runs is 2-8 (each task's runs are compared at once), got 1 x 1",
    }
    for names, words in agents.items():
        code, _, err = await agentctl(capsys, "eval", str(tasks_file), "--agents", names)
        assert code == 1 and words in err, err
    assert await session_count(resources, tenant) == 0


def test_a_tasks_file_names_each_problem_in_our_words() -> None:
    with pytest.raises(EvalTaskError, match="not UTF-8"):
        eval_tasks(b"\xff\xfe")
    with pytest.raises(EvalTaskError, match="at most 100 tasks"):
        eval_tasks("".join(f"- {{name: t{i}, text: x}}\n" for i in range(101)).encode())
    (task,) = eval_tasks(TASKS.encode())
    assert (task.name, task.text) == ("the answer", "Put the answer in answer.txt.")
    assert task.options == {
        "max_steps": 4,
        "check": {"contains": {"answer.txt": ["42"]}, "attempts": 1},
    }
