"""The offline model on a device's tools: while a device call has no result it says it waits,
and once the results are in it goes on with the survey from the calls it made."""

from __future__ import annotations

import json

from durable_agents.activities.context.assembly import pending_note
from durable_agents.activities.providers.base import ChatMessage, ModelRequest, ProviderCall
from durable_agents.activities.providers.offline import WAITING, OfflineProvider

TASK = ChatMessage("user", "Survey the files in this workspace and write a short report.")
LIST = ProviderCall("call_0_0", "list_dir", {"path": ".", "recursive": True})
LISTING = json.dumps({"entries": [{"path": "notes.txt", "size": 28, "type": "file"}]})


async def reply_to(*messages: ChatMessage) -> tuple[str, list[str]]:
    request = ModelRequest("offline", [TASK, *messages], [], idempotency_key="k")
    reply = await OfflineProvider().complete(request)
    return reply.text, [c.name for c in reply.tool_calls]


async def test_a_pending_device_result_is_waited_for_then_the_survey_goes_on() -> None:
    asked = ChatMessage("assistant", "Let me look.", tool_calls=(LIST,))
    pending = ChatMessage("tool", pending_note("laptop", 1), tool_call_id="call_0_0")
    assert await reply_to(asked, pending) == (WAITING, [])
    # The late result takes the note's place; the waiting reply is not a new turn of calls.
    done = ChatMessage("tool", LISTING, tool_call_id="call_0_0")
    waited = ChatMessage("assistant", WAITING)
    text, calls = await reply_to(asked, done, waited)
    assert calls == ["read_file"], text
