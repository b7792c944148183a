"""A deterministic provider that replays a script of turns: the fake LLM for tests.

The turn played is the number of assistant messages already in the conversation (plus
those a compaction summary stands for), so a retried or resumed call gets the same answer.
Tool call ids are derived from the turn (`call_{turn}_{i}`) unless the script gives one
(`"id"` on a call, "" included): a fake model can then misbehave with its ids as real ones do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_agents.activities.providers.base import ModelReply, ModelRequest, ProviderCall, Usage


@dataclass(frozen=True)
class ScriptedTurn:
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # The id each call is sent with, by index; None (or no entry) means `call_{turn}_{i}`.
    call_ids: list[str | None] = field(default_factory=list)


_SUMMARISED = re.compile(r"\[scripted turns summarised: (\d+)\]")


def _turns_so_far(request: ModelRequest) -> int:
    """Assistant turns in the conversation, counting those a compaction summary replaced."""
    summarised = [
        int(n)
        for m in request.messages
        if m.role == "system"
        for n in _SUMMARISED.findall(m.content)
    ]
    return max(summarised, default=0) + sum(1 for m in request.messages if m.role == "assistant")


def _turns(data: list[dict[str, Any]]) -> list[ScriptedTurn]:
    turns = []
    for i, turn in enumerate(data):
        if not isinstance(turn, dict):
            raise ValueError(f"script turn {i} must be an object")
        given = turn.get("tool_calls", [])
        calls = [(str(c["name"]), dict(c.get("arguments", {}))) for c in given]
        ids = [str(c["id"]) if "id" in c else None for c in given]
        turns.append(ScriptedTurn(text=str(turn.get("text", "")), tool_calls=calls, call_ids=ids))
    return turns


def _call_id(turn: ScriptedTurn, turn_no: int, index: int) -> str:
    given = turn.call_ids[index] if index < len(turn.call_ids) else None
    return f"call_{turn_no}_{index}" if given is None else given


class ScriptedProvider:
    name = "scripted"

    def __init__(
        self,
        turns: list[ScriptedTurn],
        *,
        final_text: str = "Done.",
        by_task: dict[str, list[ScriptedTurn]] | None = None,
    ) -> None:
        self.turns = turns
        self.final_text = final_text
        # Other scripts for conversations whose first user message starts with the key:
        # one fake model can then play a parent agent and its sub-agents.
        self.by_task = by_task or {}
        self.requests: list[ModelRequest] = []
        self.compaction_requests: list[ModelRequest] = []

    @classmethod
    def from_data(
        cls, data: list[dict[str, Any]], by_task: dict[str, list[dict[str, Any]]] | None = None
    ) -> ScriptedProvider:
        scripts = {prefix: _turns(script) for prefix, script in (by_task or {}).items()}
        return cls(_turns(data), by_task=scripts)

    @classmethod
    def from_file(cls, path: Path | str) -> ScriptedProvider:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"cannot read model script {path}: {err}") from err
        if not isinstance(data, list):
            raise ValueError(f"model script {path} must be a JSON list of turns")
        return cls.from_data(data)

    def _script_for(self, request: ModelRequest) -> list[ScriptedTurn]:
        task = next((m.content for m in request.messages if m.role == "user"), "")
        for prefix, turns in self.by_task.items():
            if task.startswith(prefix):
                return turns
        return self.turns

    async def complete(self, request: ModelRequest) -> ModelReply:
        turn_no = _turns_so_far(request)
        if request.purpose == "compaction":
            self.compaction_requests.append(request)
            users = [m.content[:60] for m in request.messages if m.role == "user"][:-1]
            return ModelReply(
                text=f"Earlier: {len(users)} user messages ({'; '.join(users)}). "
                f"[scripted turns summarised: {turn_no}]",
                model="scripted",
            )
        self.requests.append(request)
        script = self._script_for(request)
        if turn_no >= len(script):
            return ModelReply(text=self.final_text, finish_reason="stop", model="scripted")
        turn = script[turn_no]
        calls = [
            ProviderCall(id=_call_id(turn, turn_no, i), name=name, arguments=args)
            for i, (name, args) in enumerate(turn.tool_calls)
        ]
        return ModelReply(
            text=turn.text,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
            usage=Usage(input_tokens=sum(len(m.content) for m in request.messages) // 4),
            model="scripted",
        )

    async def aclose(self) -> None:
        return None
