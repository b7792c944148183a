"""A reply's text as the loop takes it (issue 30): calls wherever a Qwen2.5-Coder-family model
puts them, echoes only where a block repeats a result the model was shown, and markup with
nothing in it as no answer. Service-free."""

from __future__ import annotations

import json

import pytest

from durable_agents.activities.providers.base import ProviderCall
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.text_tool_calls import read_reply_text

OFFERED = ("list_files", "read_file", "write_file")
# What the survey run had been shown before its second reply (real-model tier, issue 30).
SHOWN = [
    '["README.md", "data/readings.csv", "notes/2026-11-24-standup.md", "src/summary.py"]',
]
REPORT = (
    "# Workspace survey\n\n- README.md: what the project is\n- data/readings.csv: readings\n"
    "- notes/2026-11-24-standup.md: a stand-up\n- src/summary.py: summarises the readings\n"
)
ARGUMENTS = {"path": "out/report.md", "content": REPORT}
WRITE = {"name": "write_file", "arguments": ARGUMENTS}


def test_the_captured_write_file_call_inside_tool_response_is_that_call() -> None:
    # The survey's second reply in both captured runs: right call, echo-looking tags.
    text = f"<tool_response>\n{json.dumps(WRITE)}\n</tool_response>"
    found = read_reply_text(text, OFFERED, SHOWN)
    assert found.calls == [ProviderCall("", "write_file", ARGUMENTS)]
    assert found.text == ""


@pytest.mark.parametrize(
    "text",
    [
        # Prose around it, the block fenced, a tool_call tag inside it, closed with the other.
        f"I'll write the report now.\n<tool_response>\n{json.dumps(WRITE)}\n</tool_response>",
        f"<tool_response>\n```json\n{json.dumps(WRITE)}\n```\n</tool_response>",
        f"<tool_response><tool_call>{json.dumps(WRITE)}</tool_call></tool_response>",
        f"<tool_call>\n{json.dumps(WRITE)}\n</tool_response>",
        f"<tool_response>{json.dumps(WRITE)}",  # cut off before its closing tag
        # An echo first, then the call in a block of its own.
        f"<tool_response>\n{SHOWN[0]}\n</tool_response>\n<tool_response>{json.dumps(WRITE)}"
        "</tool_response>",
        # An echo, then the call fenced after it.
        f"<tool_response>{SHOWN[0]}</tool_response>\n```json\n{json.dumps(WRITE)}\n```",
    ],
)
def test_a_call_in_echo_looking_tags_is_a_call(text: str) -> None:
    found = read_reply_text(text, OFFERED, SHOWN)
    assert [c.name for c in found.calls] == ["write_file"]
    assert found.calls[0].arguments["path"] == "out/report.md"
    assert "<tool_response>" not in found.text and SHOWN[0] not in found.text


def test_only_a_block_repeating_a_result_is_an_echo() -> None:
    echo = f"<tool_response>\n{SHOWN[0]}\n</tool_response>"
    assert read_reply_text(echo, OFFERED, SHOWN).text == ""
    # Part of a result, spaced differently, is still a repeat.
    part = '<tool_response> "README.md",\n  "data/readings.csv" </tool_response>'
    assert read_reply_text(part, OFFERED, SHOWN).text == ""
    # Text nobody showed the model is its own words: the answer, without the tags.
    own = "<tool_response>The report lists four files.</tool_response>"
    found = read_reply_text(own, OFFERED, SHOWN)
    assert (found.calls, found.text) == ([], "The report lists four files.")
    # Nothing shown yet: no block can be an echo.
    assert read_reply_text(echo, OFFERED, []).text == SHOWN[0]


def test_a_cut_off_call_in_tool_response_is_a_malformed_call_not_an_answer() -> None:
    body = '{"name": "write_file", "arguments": {"path": "out/report.md", "content": "# S'
    found = read_reply_text(f"<tool_response>{body}</tool_response>", OFFERED, SHOWN)
    [call] = found.calls
    assert call.name == "write_file" and call.arguments == {RAW_ARGUMENTS_KEY: body}


@pytest.mark.parametrize(
    "text",
    [
        "<tools></tools>",
        "<tools>\n</tools>\n```\n```",
        "<tool_call></tool_call>",
        "<|im_end|>",
        "<tool_response></tool_response>",
        "```json\n```",
    ],
)
def test_markup_with_nothing_in_it_is_no_answer(text: str) -> None:
    found = read_reply_text(text, OFFERED, SHOWN)
    # An empty <tool_call> stays what it was: a malformed call the model hears about.
    assert found.text == "" and all(c.name == "" for c in found.calls)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ('```json\n{"name": "read_files", "arguments": {"paths": ["a", "b"]}}\n```', "read_files"),
        ('{"name": "survey_files", "arguments": {}}', "survey_files"),
        ('<tools>{"name": "survey_files", "parameters": {"dir": "."}}</tools>', "survey_files"),
    ],
)
def test_a_call_to_a_tool_that_does_not_exist_is_a_call_not_an_answer(text: str, name: str) -> None:
    # As the 0.5B model wrote them; the tool layer answers with UnknownTool and the real tools.
    found = read_reply_text(text, OFFERED, SHOWN)
    assert [c.name for c in found.calls] == [name] and found.text == ""


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",
        '{"name": "Ada", "role": "engineer"}',
        '{"name": "Ada Lovelace", "arguments": {}}',
        'Use it like ```json\n{"name": "read_files", "arguments": {}}\n``` next time.',
        "a <b>bold</b> claim",
    ],
)
def test_answers_stay_answers(text: str) -> None:
    found = read_reply_text(text, OFFERED, SHOWN)
    assert (found.calls, found.text) == ([], text)


def test_many_echo_blocks_are_bounded() -> None:
    echo = f"<tool_response>{SHOWN[0]}</tool_response>"
    found = read_reply_text(echo * 10_000, OFFERED, SHOWN * 50)
    assert found.calls == []
    assert found.text.count("<tool_response>") < 10_000


def test_with_no_tools_offered_a_guessed_call_stays_the_answer() -> None:
    # A summary request offers no tools: its reply is the summary, whatever it looks like.
    text = '{"name": "survey_files", "arguments": {}}'
    assert read_reply_text(text, (), SHOWN).calls == []
