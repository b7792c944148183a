"""Comparing two trajectories finds the first step where they part and names why, in our
words (tool names, argument keys, error types; never a value, a result or a reply); and a
model request's fingerprint changes with what the model is asked, and only with that."""

from __future__ import annotations

import uuid
from dataclasses import replace

from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelRequest,
    ProviderCall,
    ToolSpec,
)
from durable_agents.activities.providers.request_fingerprint import request_fingerprint
from durable_agents.storage.trajectories import Call, Result, Step, Trajectory
from durable_agents.workers.client.trajectories import first_divergence


def _call(name: str, sha: str | None = "a", error: str | None = None, **args: object) -> Call:
    return Call(f"call_{name}", name, dict(args), Result(sha, error))


RECORDED = Trajectory(
    uuid.uuid4(),
    "completed",
    (
        Step(0, "", (_call("read_file", path="a.txt"),)),
        Step(1, "", (_call("read_file", path="b.txt"), _call("list_dir", path="."))),
        Step(2, "All read."),
    ),
)


def _with_step(index: int, step: Step, status: str = "completed") -> Trajectory:
    steps = list(RECORDED.steps)
    steps[index] = step
    return replace(RECORDED, session_id=uuid.uuid4(), steps=tuple(steps), status=status)


def test_the_same_trajectory_has_no_divergence() -> None:
    assert first_divergence(RECORDED, replace(RECORDED, session_id=uuid.uuid4())) is None


def test_each_way_of_parting_is_named_at_its_step() -> None:
    calls = RECORDED.steps[1].calls
    cases = {
        "step 1: another call (called read_file where the first called read_file, list_dir)": (
            _with_step(1, Step(1, "", calls[:1]))
        ),
        "step 1: other arguments (list_dir: depth, path)": _with_step(
            1, Step(1, "", (calls[0], _call("list_dir", path="src", depth=2)))
        ),
        "step 0: another result (read_file: its content differs)": _with_step(
            0, Step(0, "", (_call("read_file", sha="b", path="a.txt"),))
        ),
        "step 0: another result (read_file: error NotRecorded where the first got a result)": (
            _with_step(0, Step(0, "", (_call("read_file", None, "NotRecorded", path="a.txt"),)))
        ),
        "step 2: another answer (the final text differs)": _with_step(2, Step(2, "Read none.")),
        "step 2: another call (called read_file where the first called no tool (an answer))": (
            _with_step(2, Step(2, "", calls[:1]))
        ),
        "step 2: another ending (failed where the first completed)": _with_step(
            2, RECORDED.steps[2], status="failed"
        ),
    }
    for words, replay in cases.items():
        assert str(first_divergence(RECORDED, replay)) == words


def test_a_shorter_or_longer_trajectory_ended_earlier_or_later_once_it_ended() -> None:
    shorter = replace(RECORDED, steps=RECORDED.steps[:2], status="failed")
    longer = replace(RECORDED, steps=(*RECORDED.steps, Step(3, "Again.")))
    assert str(first_divergence(RECORDED, shorter)) == (
        "step 2: ended earlier (failed after 2 steps where the first has 3)"
    )
    assert first_divergence(RECORDED, replace(shorter, status="running"), ended=False) is None
    assert str(first_divergence(RECORDED, longer, ended=False)) == (
        "step 3: ended later (4 steps where the first has 3)"
    )


def test_a_result_not_there_yet_is_no_divergence() -> None:
    running = _with_step(0, Step(0, "", (replace(RECORDED.steps[0].calls[0], result=None),)))
    assert first_divergence(RECORDED, running, ended=False) is None


def test_a_request_fingerprint_follows_what_the_model_is_asked_only() -> None:
    request = ModelRequest(
        model="m",
        messages=[
            ChatMessage("system", "Be brief."),
            ChatMessage("user", "Read a.txt"),
            ChatMessage("assistant", "", (ProviderCall("c1", "read_file", {"path": "a.txt"}),)),
            ChatMessage("tool", "hello", tool_call_id="c1", name="read_file"),
        ],
        tools=[ToolSpec("read_file", "Read a file.", {"type": "object"})],
        idempotency_key="agent-x:0:model",
    )
    same = request_fingerprint(request)
    assert len(same) == 22  # 128 bits, base64url
    # Another key, reply limit or purpose asks the model the same.
    assert request_fingerprint(replace(request, idempotency_key="k", max_output_tokens=9)) == same
    reordered = ProviderCall("c1", "read_file", dict(reversed({"path": "a.txt", "n": 1}.items())))
    ordered = ProviderCall("c1", "read_file", {"path": "a.txt", "n": 1})

    def with_call(call: ProviderCall) -> ModelRequest:
        messages = list(request.messages)
        messages[2] = ChatMessage("assistant", "", (call,))
        return replace(request, messages=messages)

    assert request_fingerprint(with_call(reordered)) == request_fingerprint(with_call(ordered))
    changed = [
        replace(request, model="n"),
        replace(request, tools=[]),
        replace(request, messages=[ChatMessage("system", "Be long."), *request.messages[1:]]),
        with_call(ProviderCall("c2", "read_file", {"path": "a.txt"})),
        with_call(ProviderCall("c1", "read_file", {"path": "b.txt"})),
    ]
    assert len({request_fingerprint(r) for r in changed} | {same}) == len(changed) + 1
