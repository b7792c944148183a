"""A fake model for replays: the script it plays is picked by the agent's instructions (the
system prompt), so a changed agent definition makes the model do something else, as a
real model would."""

from __future__ import annotations

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider


class ByInstructions:
    """Plays `scripts[key]` for a request whose system prompt contains `key`, else
    `default`; every request it is asked is kept in `requests`."""

    name = "scripted"

    def __init__(self, default: ScriptedProvider, scripts: dict[str, ScriptedProvider]) -> None:
        self.default = default
        self.scripts = scripts
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        system = " ".join(m.content for m in request.messages if m.role == "system")
        for key, script in self.scripts.items():
            if key in system:
                return await script.complete(request)
        return await self.default.complete(request)

    async def aclose(self) -> None:
        return None
