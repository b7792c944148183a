"""What a model reply was when it was no answer: a closed set of codes, spelled once. The
loop nudges the model once for any of them (in words chosen by code, activities/nudges.py)
and ends the task as `no_answer` when the reply to that nudge is one again. A code travels
in workflow history (ModelCallResult.non_answer, NudgeInput.reason): never anything the
model wrote. No I/O here, so workflow code may import it inside the sandbox."""

from __future__ import annotations

from enum import StrEnum


class NonAnswer(StrEnum):
    # No text and no tool call: empty, only markup, or only a copy of a tool result.
    EMPTY = "empty"
    # Only a JSON object of one offered tool's arguments, with no tool named.
    BARE_ARGUMENTS = "bare_arguments"
    # Prose that shows tool calls (placeholders for arguments, "you can use the
    # following") instead of making them.
    EXAMPLE_CALLS = "example_calls"
    # The reply ran into its output token limit.
    CUT_AT_LIMIT = "cut_at_limit"
    # Prose that says which call it makes next ("I will read notes/todo.txt") and makes none.
    PROMISED_CALL = "promised_call"


# Finish reasons that say a reply was cut at its output limit: ours follow Chat Completions
# ("length"; the Anthropic provider maps its "max_tokens" to it), and a compatible server
# that passes its own through may say "max_tokens".
CUT_FINISH_REASONS = frozenset({"length", "max_tokens"})

# In the data of an assistant item that called no tool and is no answer: its NonAnswer code,
# and for bare arguments the offered tools they look like (names from the registry).
NON_ANSWER_KEY = "non_answer"
LOOKS_LIKE_KEY = "looks_like"
