"""Tool calls written as text: the shapes small models produce, and hostile ones."""

from __future__ import annotations

import json

import pytest

from durable_agents.activities.providers.base import ProviderCall
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.text_tool_calls import (
    MAX_TEXT_CALLS,
    parse_text_tool_calls,
    read_reply_text,
)

OFFERED = ("read_file", "write_file", "list_files")


def calls_of(text: str, offered: tuple[str, ...] = OFFERED) -> list[ProviderCall]:
    found = parse_text_tool_calls(text, offered)
    assert found is not None, text
    return found.calls


def read(path: str) -> ProviderCall:
    return ProviderCall(id="", name="read_file", arguments={"path": path})


READ_A = {"name": "read_file", "arguments": {"path": "a"}}
READ_B = {"name": "read_file", "arguments": {"path": "b"}}


def test_hermes_tag_is_a_call() -> None:
    text = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>'
    found = parse_text_tool_calls(text, OFFERED)
    assert found is not None
    assert found.calls == [read("a.txt")]
    assert found.text == ""


def test_several_tags_keep_order_and_the_prose_around_them() -> None:
    text = (
        "Let me look.\n"
        '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>\n'
        '<tool_call>{"name": "read_file", "arguments": {"path": "b"}}</tool_call>'
    )
    found = parse_text_tool_calls(text, OFFERED)
    assert found is not None
    assert found.calls == [read("a"), read("b")]
    assert found.text == "Let me look."


def test_unclosed_last_tag_still_counts() -> None:
    assert calls_of('<tool_call>{"name": "read_file", "arguments": {"path": "a"}}') == [read("a")]


def test_tag_counts_even_for_a_tool_not_offered() -> None:
    # The tool layer answers it with UnknownTool and the list of real tools.
    (call,) = calls_of('<tool_call>{"name": "grep", "arguments": {"q": "x"}}</tool_call>')
    assert (call.name, call.arguments) == ("grep", {"q": "x"})


def test_fenced_json_call_as_measured_from_qwen_coder_1_5b() -> None:
    text = '```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```'
    found = parse_text_tool_calls(text, OFFERED)
    assert found is not None
    assert found.calls == [read("README.md")]
    assert found.text == ""


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "read_file", "arguments": {"path": "a"}}',
        '  \n{"name": "read_file", "arguments": {"path": "a"}}\n  ',
        '```\n{"name": "read_file", "arguments": {"path": "a"}}\n```',
        '```json\n{"name": "read_file", "arguments": "{\\"path\\": \\"a\\"}"}```',
        '{"name": "read_file", "parameters": {"path": "a"}}',
        '{"type": "function", "name": "read_file", "arguments": {"path": "a"}}',
        '<tool_call>```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```</tool_call>',
    ],
)
def test_shapes_of_one_call(text: str) -> None:
    assert calls_of(text) == [read("a")]


def test_a_json_list_of_calls() -> None:
    text = json.dumps([{"name": "read_file", "arguments": {"path": p}} for p in "ab"])
    assert calls_of(text) == [read("a"), read("b")]


def test_call_without_arguments_has_none() -> None:
    (call,) = calls_of('{"name": "list_files"}')
    assert call.arguments == {}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "The answer is 42.",
        # An object naming a tool not offered, without arguments, is data, not a call.
        '{"name": "grep"}',
        '{"name": "Ada Lovelace", "arguments": {}}',
        # An example in prose, its arguments placeholders: not a call (nor an answer:
        # tests/test_non_answers.py).
        'Call it like {"name": "read_file", "arguments": {"path": "<path>"}} next time.',
        'Here:\n```json\n{"name": "read_file", "arguments": {"path": "path/to/file"}}\n```',
        # JSON, but not a call's shape.
        '{"name": "read_file", "arguments": {"path": "a"}, "extra": 1}',
        '{"name": "read_file", "age": 3}',
        '{"title": "read_file"}',
        '{"name": 7, "arguments": {}}',
        "[]",
        '[{"name": "read_file", "arguments": {}}, "and text"]',
        "```json\n[1, 2]\n```",
    ],
)
def test_not_a_call(text: str) -> None:
    assert parse_text_tool_calls(text, OFFERED) is None


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "read_file", "arguments": {"path": "a"',  # cut off
        "{'name': 'read_file'}",  # Python, not JSON
        "not json at all",
        "",
        '{"name": "read_file", "arguments": {"path": "a"}} trailing',
    ],
)
def test_malformed_tag_is_kept_as_a_malformed_call(body: str) -> None:
    (call,) = calls_of(f"<tool_call>{body}</tool_call>")
    assert call.arguments == {RAW_ARGUMENTS_KEY: body.strip()}
    if '"name": "read_file"' in body:
        assert call.name == "read_file"  # recovered, so the model hears which call failed


def test_arguments_that_are_not_an_object_are_kept_raw() -> None:
    (call,) = calls_of('<tool_call>{"name": "read_file", "arguments": "path=a"}</tool_call>')
    assert call.arguments == {RAW_ARGUMENTS_KEY: "path=a"}
    (call,) = calls_of('{"name": "read_file", "arguments": [1, 2]}')
    assert RAW_ARGUMENTS_KEY in call.arguments


def test_deeply_nested_json_never_crashes() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_text_tool_calls(deep, OFFERED) is None
    (call,) = calls_of(f"<tool_call>{deep}</tool_call>")
    assert call.arguments == {RAW_ARGUMENTS_KEY: deep}
    nested = '{"name": "read_file", "arguments": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    (call,) = calls_of(f"<tool_call>{nested}</tool_call>")
    assert call.name == "read_file" and RAW_ARGUMENTS_KEY in call.arguments


def test_huge_reply_is_parsed_without_crashing() -> None:
    path = "x" * 5_000_000
    (call,) = calls_of(json.dumps({"name": "read_file", "arguments": {"path": path}}))
    assert call.arguments == {"path": path}
    assert parse_text_tool_calls("<tool_call>" * 100_000, OFFERED) is not None


def test_huge_names_are_cut_short() -> None:
    (call,) = calls_of("<tool_call>" + json.dumps({"name": "n" * 100_000, "arguments": {}}))
    assert len(call.name) <= 200


def test_calls_past_the_limit_stay_text() -> None:
    tags = [
        f'<tool_call>{{"name": "read_file", "arguments": {{"path": "{n}"}}}}</tool_call>'
        for n in range(MAX_TEXT_CALLS + 3)
    ]
    found = parse_text_tool_calls("".join(tags), OFFERED)
    assert found is not None
    assert found.calls == [read(str(n)) for n in range(MAX_TEXT_CALLS)]
    assert found.text == "".join(tags[MAX_TEXT_CALLS:])


def test_a_call_written_twice_in_one_reply_runs_once() -> None:
    one = '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>'
    assert calls_of(one * 5) == [read("a")]
    assert calls_of(json.dumps([READ_A, READ_A, READ_B])) == [read("a"), read("b")]


def test_a_call_in_doubled_braces_as_measured_from_qwen_coder_1_5b() -> None:
    text = '{{"name": "list_files", "arguments": {"path": ".", "recursive": true}}}'
    [call] = calls_of(text)
    assert (call.name, call.arguments) == ("list_files", {"path": ".", "recursive": True})
    assert parse_text_tool_calls("{{not a call}}", OFFERED) is None


def test_several_calls_side_by_side_in_doubled_braces() -> None:
    # The reply that ended the survey as "completed" in the real-model tier.
    text = (
        '{{"name": "list_files", "arguments": {"path": ".", "recursive": true}}}}\n'
        '{{"name": "write_file", "arguments": {"path": "out/r.md", "content": "# R"}}}}'
    )
    assert [c.name for c in calls_of(text)] == ["list_files", "write_file"]
    # Prose after them: calls in prose, of which the first runs; the prose is kept without
    # their braces.
    found = read_reply_text(text + " and then I am done", OFFERED)
    assert [c.name for c in found.calls] == ["list_files"]
    assert found.text == "and then I am done"


def test_a_call_in_tools_tags_as_measured_from_qwen_coder_1_5b() -> None:
    for text in (
        '<tools> {"name": "read_file", "arguments": {"path": "facts/launch.md"}} </tools> ```',
        "<tools></tools>  ```json\n"
        '{"name": "read_file", "arguments": {"path": "facts/launch.md"}}\n```',
    ):
        [call] = calls_of(text)
        assert (call.name, call.arguments) == ("read_file", {"path": "facts/launch.md"})
    # A guessed tool inside them is a call too: the tool layer answers it with UnknownTool.
    [call] = calls_of('<tools>{"name": "rm_rf", "arguments": {}}</tools>')
    assert call.name == "rm_rf"


def test_an_echoed_tool_response_is_not_an_answer() -> None:
    # The final "answer" of the malformed-first-call task in the real-model tier.
    shown = ["error (InvalidArguments): not valid JSON"]
    echo = "<tool_response>\nerror (InvalidArguments): not valid JSON\n</tool_response>"
    assert read_reply_text(echo, OFFERED, shown).text == ""
    found = read_reply_text(f"{echo}\nThe code word is X.", OFFERED, shown)
    assert found.text == "The code word is X."
    assert read_reply_text("A plain answer.", OFFERED, shown).text == "A plain answer."


# A reply cut at its token limit ------------------------------------------------------------

REPEATED = '{"name": "read_file", "arguments": {"path": "a"}}\n'


@pytest.mark.parametrize(
    "text",
    [
        REPEATED * 30 + '{"name": "read_fi',
        "```json\n" + REPEATED * 3 + '{"name": "read_file", "argu',
        REPEATED * 2 + '{"name": "write_file", "arguments": {"path": "b", "content": "x"}}\n{',
    ],
)
def test_a_reply_cut_inside_its_calls_runs_each_distinct_complete_call_once(text: str) -> None:
    found = read_reply_text(text, OFFERED, cut=True)
    assert found.text == ""
    assert found.calls[0] == read("a")
    assert len(found.calls) == len({json.dumps([c.name, c.arguments]) for c in found.calls})
    # Not cut (the server said it stopped), its complete calls are calls written in prose:
    # the first of them runs.
    assert read_reply_text(text, OFFERED).calls == found.calls[:1]


def test_a_cut_answer_stays_an_answer() -> None:
    text = 'The report says {"a": 1} and then'
    assert read_reply_text(text, OFFERED, cut=True).text == text
    assert read_reply_text('{"total": 3, "files": ["a"', OFFERED, cut=True).calls == []


# Calls written inside prose, at every step ----------------------------------------------

# Measured from Qwen2.5-Coder 1.5B after an InvalidArguments result (the real-model tier).
RETRY = (
    "To read the file facts/launch.md, you need to provide the path as a string. Here's the "
    'correct command:\n\n```json\n{"name": "read_file", "arguments": {"path": '
    '"facts/launch.md", "max_bytes": 10000}}\n```\n\nThis will read the first 10,000 bytes.'
)
# Issue 41: prose, the right call written twice, then file contents the model made up.
TWICE = (
    "I will read the file first.\n\n"
    '{"name": "read_file", "arguments": {"path": "notes/standup.md"}}\n\n'
    "```json\n"
    '{"name": "read_file", "arguments": {"path": "notes/standup.md"}}\n'
    "```\n\n"
    "The file says:\n# Stand-up\n- Ada: shipped the parser\n- Bob: on leave\n"
)


def test_a_fenced_call_in_prose_is_a_call_at_every_step() -> None:
    found = read_reply_text(RETRY, OFFERED)
    assert found.calls == [
        ProviderCall(
            id="", name="read_file", arguments={"path": "facts/launch.md", "max_bytes": 10000}
        )
    ]
    assert found.text.startswith("To read the file") and "```" not in found.text


@pytest.mark.parametrize(
    "text",
    [
        'Call it like {"name": "read_file", "arguments": {"path": "a"}} next time.',
        'Here:\n```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```',
        'Reading it now <tools></tools> {"name": "read_file", "parameters": {"path": "a"}}.',
    ],
)
def test_a_call_of_an_offered_tool_inside_prose_is_a_call(text: str) -> None:
    found = read_reply_text(text, OFFERED)
    assert found.calls == [read("a")]
    assert '"name"' not in found.text and found.text


def test_the_same_call_written_twice_in_prose_runs_once_and_the_prose_stays() -> None:
    found = read_reply_text(TWICE, OFFERED)
    assert found.calls == [read("notes/standup.md")]
    assert found.text.startswith("I will read the file first.")
    assert "Bob: on leave" in found.text and '"name"' not in found.text


def test_of_several_calls_in_prose_the_first_runs() -> None:
    # Qwen2.5-Coder 1.5B after a failed check (native mode): a numbered plan of three calls,
    # the last a write of lines made up before the read's result was seen.
    text = (
        "First " + json.dumps(READ_A) + ", then\n```json\n" + json.dumps(READ_B) + "\n```\n"
        "and " + json.dumps({"name": "write_file", "arguments": {}}) + "."
    )
    found = read_reply_text(text, OFFERED)
    assert found.calls == [read("a")]
    assert found.text.startswith("First") and '"name"' not in found.text


@pytest.mark.parametrize(
    "text",
    [
        # A tool that is not offered, in prose, is not read as a call.
        'Try this:\n```json\n{"name": "read_files", "arguments": {"path": "a"}}\n```',
        # A fence of data.
        'The file says:\n```json\n{"path": "facts/launch.md"}\n```',
        # Calls inside a JSON array in prose are data in it.
        'The log holds [{"name": "read_file", "arguments": {"path": "a"}}] and no more.',
        # One placeholder call makes the reply an example: none of its calls run.
        RETRY + '\nThen: {"name": "write_file", "arguments": {"path": "<path>", "content": "x"}}',
    ],
)
def test_other_prose_holds_no_call(text: str) -> None:
    assert read_reply_text(text, OFFERED).calls == []


def test_with_no_tools_offered_a_call_in_prose_is_no_call() -> None:
    assert read_reply_text(RETRY, ()).calls == []
