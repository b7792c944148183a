"""What the model is told after a reply that was no answer: our words, one text for each
NonAnswer code (vocabulary/non_answers.py). A nudge is a user turn, so it is worded for a
small model that may take it as the user's message: what its reply was, that nothing ran,
and what a good next reply is. It never quotes the reply; the only names it holds are of
offered tools."""

from __future__ import annotations

from collections.abc import Sequence

from durable_agents.activities.providers.prose_calls import TOOL_NAME
from durable_agents.vocabulary.non_answers import NonAnswer

# Said of a reply that was empty, only markup, or only a copy of a tool result shown in the
# prompt. Told "your reply was empty" after a copy, Qwen2.5-Coder 1.5B apologised and asked
# for the task again (issue 30, `make test-real-model`); named for what it was and told what
# a good next reply is, it answers.
EMPTY_REPLY_NUDGE = (
    "Your last reply held no answer and no tool call: it was empty, or only repeated a tool "
    "result. If the tool results above give what the task asks for, reply now with the final "
    "answer in plain text, stating the result itself; otherwise call the next tool."
)
EXAMPLE_CALLS_NUDGE = (
    "Your last reply showed example tool calls instead of making them, so nothing ran and it "
    "is not an answer. Do not describe steps for someone else to run: make the next call "
    "yourself now, as a tool call with real arguments (no placeholders such as <path> or "
    "...). If the tool results above already give what the task asks for, reply with the "
    "final answer in plain text instead."
)
CUT_AT_LIMIT_NUDGE = (
    "Your last reply was cut off at its length limit, so it is not an answer. Reply again, "
    "shorter: give the final answer in fewer words, or call the next tool (write long "
    "content to a file with a tool rather than into your reply)."
)

PROMISED_CALL_NUDGE = (
    "Your last reply said what you would do next but made no tool call, so nothing ran and "
    "it is not an answer. Do it now: reply with that one tool call. If the task is already "
    "done, reply with the final answer in plain text instead."
)


def bare_arguments_nudge(tools: Sequence[str]) -> str:
    """For a reply that was only a tool's arguments: the tools they look like, by name."""
    names = [t for t in tools if TOOL_NAME.fullmatch(t)][:3]
    if not names:
        which, tool = "one of your tools", "that tool"
    elif len(names) == 1:
        which = tool = names[0]
    else:
        which = " or ".join(names)
        tool = "the one you mean"
    return (
        f"Your last reply held only JSON arguments, which look like the arguments of "
        f"{which}, and named no tool: nothing ran, and it is not an answer. To run it, call "
        f"{tool} by name, as a tool call with those arguments. If the task is already done, "
        f"reply with the final answer in plain text instead."
    )


def non_answer_code(reason: str) -> NonAnswer:
    """``reason`` as a NonAnswer code; one this worker does not know (a newer worker's) is
    said as EMPTY, the general words."""
    return NonAnswer(reason) if reason in set(NonAnswer) else NonAnswer.EMPTY


def nudge_text(reason: str, tools: Sequence[str] = ()) -> str:
    """The nudge for a NonAnswer code (see ``non_answer_code``)."""
    reason = non_answer_code(reason)
    if reason == NonAnswer.BARE_ARGUMENTS:
        return bare_arguments_nudge(tools)
    if reason == NonAnswer.EXAMPLE_CALLS:
        return EXAMPLE_CALLS_NUDGE
    if reason == NonAnswer.CUT_AT_LIMIT:
        return CUT_AT_LIMIT_NUDGE
    if reason == NonAnswer.PROMISED_CALL:
        return PROMISED_CALL_NUDGE
    return EMPTY_REPLY_NUDGE
