"""Whether the turn a model step answers asks for a tool call: the reply after a failed
check (whose words say to do the task with the tools) or after a call whose arguments were
not JSON (whose error says to call again). A provider that can constrain the reply to a
call is asked to (ModelRequest.call_required): a small model told its answer failed the
check answers again from the same words, and one told its call was malformed answers from
nothing (Qwen2.5-Coder 1.5B made up the code word it was asked to read). A nudge and a
user's own message ask for nothing: the model may answer them."""

from __future__ import annotations

from collections.abc import Sequence

from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.item_marks import CHECK_FAILED, CHECK_KEY


def call_expected(rows: Sequence[ItemRow]) -> bool:
    """Whether the next reply to the conversation ``rows`` (in order) must call a tool."""
    for row in reversed(rows):
        if row.kind == ItemKind.USER_MESSAGE:
            return (row.data or {}).get(CHECK_KEY) == CHECK_FAILED
        if row.kind == ItemKind.TOOL_CALL:
            arguments = (row.data or {}).get("arguments")
            if isinstance(arguments, dict) and RAW_ARGUMENTS_KEY in arguments:
                return True
        elif row.kind == ItemKind.ASSISTANT_MESSAGE:
            return False
    return False
