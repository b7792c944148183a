"""What an item of a session's conversation is. The database stores the values (a check
constraint, ck_items_kind, holds the same strings); no I/O here, so workflow code may
import it inside the sandbox."""

from __future__ import annotations

from enum import StrEnum


class ItemKind(StrEnum):
    USER_MESSAGE = "user_message"
    ASSISTANT_MESSAGE = "assistant_message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    APPROVAL = "approval"
    ERROR = "error"
