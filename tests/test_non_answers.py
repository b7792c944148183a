"""Which replies are no answer (issue 41): the judgement of a reply that called no tool, made
on the text the provider leaves once the calls written in it are read, against the real
tools' schemas. The failing texts are those small local models (Qwen2.5-Coder 1.5B/0.5B on
llama-server) sent, each of which once ended a task as `completed`. Service-free."""

from __future__ import annotations

import json

import pytest

from durable_agents.activities.nudges import bare_arguments_nudge, nudge_text
from durable_agents.activities.providers.non_answers import Judged, non_answer_of
from durable_agents.activities.providers.prose_calls import holds_placeholder
from durable_agents.activities.providers.text_tool_calls import read_reply_text
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.vocabulary.non_answers import NonAnswer

TOOLS = default_registry().specs()
OFFERED = [t.name for t in TOOLS]

# "You can use the following steps", over calls whose arguments are placeholders.
EXAMPLE_STEPS = (
    "To write a description of the project, you can use the following steps:\n\n"
    "1. Read the README with the `read_file` tool:\n"
    '```json\n{"name": "read_file", "arguments": {"path": "<path>"}}\n```\n'
    "2. Write the description with `write_file`:\n"
    '```json\n{"name": "write_file", "arguments": {"path": "<path>", "content": "..."}}\n```\n'
    "Replace `<path>` with the path of your file."
)
DESCRIPTION = "# Durable agents\n\nA loop that keeps going when the laptop closes.\n"
# It read the file, then sent write_file's arguments with no tool named.
BARE_WRITE = "```json\n" + json.dumps({"path": "out/desc.md", "content": DESCRIPTION}) + "\n```"
# Prose, the right read_file call written twice, then file contents it made up.
READ_TWICE = (
    "Let me read the file.\n"
    '{"name": "read_file", "arguments": {"path": "README.md"}}\n'
    '```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```\n'
    "The file contains:\n# Project\nThis project does many things.\n"
)


def judged(text: str, finish: str = "stop") -> Judged | None:
    """As the loop judges a reply from an OpenAI-compatible server: the calls written in its
    text are read first; only a reply left with none is judged."""
    read = read_reply_text(text, OFFERED, cut=finish == "length")
    assert read.calls == [], read.calls
    return non_answer_of(read.text, finish, TOOLS)


def test_example_steps_with_placeholder_calls_are_example_calls_not_an_answer() -> None:
    assert judged(EXAMPLE_STEPS) == Judged(NonAnswer.EXAMPLE_CALLS)


@pytest.mark.parametrize(
    "text",
    [
        # A single example call, as the whole reply: not run, not an answer.
        '{"name": "write_file", "arguments": {"path": "your_file.txt", "content": "Hello"}}',
        'Use {"name": "read_file", "arguments": {"path": "{path}"}} to read it.',
        'Run ```json\n{"name": "read_file", "arguments": {"path": "/path/to/file.md"}}\n```',
        '<tools></tools>{"name": "write_file", "arguments": {"path": "out.md", "content": "…"}}',
        # Framed as an example, of a tool that is not offered: shown, not made.
        'You can use the following: {"name": "open_file", "arguments": {"file": "a.md"}}',
    ],
)
def test_calls_shown_as_examples_are_no_answer(text: str) -> None:
    assert judged(text) == Judged(NonAnswer.EXAMPLE_CALLS)


@pytest.mark.parametrize(
    "text",
    [
        BARE_WRITE,
        json.dumps({"path": "out/desc.md", "content": DESCRIPTION}),
        "Here is the description:\n" + BARE_WRITE + "\nI hope this helps.",
        "<tools></tools>\n" + BARE_WRITE,
    ],
)
def test_bare_write_file_arguments_are_no_answer_and_name_the_tools_they_fit(text: str) -> None:
    # append_file takes the same path and content: the model is told of both.
    assert judged(text) == Judged(NonAnswer.BARE_ARGUMENTS, ("write_file", "append_file"))


@pytest.mark.parametrize(
    ("arguments", "tools"),
    [
        # read_file requires path; list_dir requires nothing: the closer fit is named.
        ({"path": "README.md"}, ("read_file",)),
        ({"path": ".", "recursive": True}, ("list_dir",)),
        ({"url": "https://example.com/"}, ("fetch_url",)),
        ({"task": "Summarise the notes."}, ("delegate",)),
    ],
)
def test_bare_arguments_name_the_tool_they_fit_best(
    arguments: dict[str, object], tools: tuple[str, ...]
) -> None:
    assert judged(json.dumps(arguments)) == Judged(NonAnswer.BARE_ARGUMENTS, tools)


@pytest.mark.parametrize(
    "text",
    [
        "The file says: contents of A.",
        # JSON that is no tool's arguments: an unknown key, or a required one missing.
        '{"total": 3, "files": ["a", "b"]}',
        '{"path": "out/desc.md", "size": 12}',
        '{"content": "x", "path": "a", "mode": "w"}',
        # Arguments inside an answer that says something of its own.
        "The config I found, in full:\n" + json.dumps({"path": "a.txt"}) + "\n" + "Notes. " * 60,
        # Two objects: data, not one tool's arguments.
        '{"path": "a"}\n{"path": "b"}',
        # A call of a tool not offered, shown plainly (no placeholder, not framed).
        'Use it like ```json\n{"name": "read_files", "arguments": {}}\n``` next time.',
        # An example framing with no call in it is prose.
        "For example, the notes mention three releases; you can use the following summary.",
        "a <b>bold</b> claim",
    ],
)
def test_answers_stay_answers(text: str) -> None:
    assert judged(text) is None


@pytest.mark.parametrize("text", ["", "  \n", "<tools></tools>", "<|im_end|>", "```json\n```"])
def test_markup_alone_is_empty(text: str) -> None:
    assert judged(text) == Judged(NonAnswer.EMPTY)


@pytest.mark.parametrize("finish", ["length", "max_tokens"])
@pytest.mark.parametrize(
    "text", ["The report covers three areas. First, the", "", '{"path": "a", "cont']
)
def test_a_reply_cut_at_its_limit_is_no_answer(finish: str, text: str) -> None:
    assert non_answer_of(text, finish, TOOLS) == Judged(NonAnswer.CUT_AT_LIMIT)
    assert non_answer_of("The report covers three areas.", "stop", TOOLS) is None


def test_a_call_written_twice_in_prose_is_a_call_not_a_reply_to_judge() -> None:
    read = read_reply_text(READ_TWICE, OFFERED)
    assert [(c.name, c.arguments) for c in read.calls] == [("read_file", {"path": "README.md"})]


def test_a_well_formed_call_framed_as_an_example_still_runs() -> None:
    text = (
        "To read the file, you can use the following command:\n"
        '```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```'
    )
    read = read_reply_text(text, OFFERED)
    assert [c.name for c in read.calls] == ["read_file"]


def test_with_no_tools_offered_only_empty_and_cut_replies_are_judged() -> None:
    assert non_answer_of(BARE_WRITE, "stop", []) is None
    assert non_answer_of(EXAMPLE_STEPS, "stop", []) is None
    assert non_answer_of("", "stop", []) == Judged(NonAnswer.EMPTY)


@pytest.mark.parametrize(
    "value",
    [
        "<path>",
        "<file name>",
        "...",
        " … ",
        "{path}",
        "{{file_name}}",
        "[PATH]",
        "${FILE}",
        "your_file.txt",
        "yourfile.md",
        "path/to/file.txt",
        "/path/to/your/notes.md",
        "Your content here",
        {"nested": ["ok", "<content>"]},
    ],
)
def test_placeholders(value: object) -> None:
    assert holds_placeholder(value)


@pytest.mark.parametrize(
    "value",
    [
        "out/desc.md",
        "README.md",
        "",
        "def stub():\n    ...\n",
        "Loading...",
        "a <b>bold</b> claim",
        DESCRIPTION,
        "Thank you for your order. " * 10,
        {"path": "notes/a.md", "max_bytes": 100},
        ["x", 3, None],
    ],
)
def test_real_values_are_not_placeholders(value: object) -> None:
    assert not holds_placeholder(value)


@pytest.mark.parametrize(
    "text",
    [
        # Qwen2.5-Coder 1.5B after a failed check (native mode, llama-server --jinja): the
        # plan, no call; taken as its answer it spent one of the check's tries.
        'To ensure that the lines in "out/todo.txt" are in upper case, I will read the lines '
        'from "notes/todo.txt", convert them to uppercase, and then write them back to '
        '"out/todo.txt".',
        "I apologize for the confusion. I will re-run the `list_dir` tool to get the list of "
        "files and then add the topic for each file.",
        "Let me now open config/app.ini.",
    ],
)
def test_a_reply_that_promises_its_next_call_is_no_answer(text: str) -> None:
    assert judged(text) == Judged(NonAnswer.PROMISED_CALL)


@pytest.mark.parametrize(
    "text",
    [
        "The mascot is Rosa, as docs/beta.md says.",
        "I cannot read ../../../etc/passwd: it is outside the workspace.",
        "I will not write to config/app.ini: the task did not ask for it.",
        "The port in config/app.ini is now 9090. Let me know if you need anything else.",
        "I have written out/report.md; I'll use this layout for the next report too.",
        "You should read README.md first.",
        # A promise early in a long answer is not what the reply ends with.
        "I will read notes/a.md later. " + "The report covers the budget. " * 40,
    ],
)
def test_answers_that_speak_of_files_stay_answers(text: str) -> None:
    assert judged(text) is None


def test_hostile_text_is_judged_within_bounds() -> None:
    # Many unclosed objects: each costs a decode to the end, so only the first few are tried.
    text = '{"a": "' * 20_000
    assert judged(text) is None
    deep = "[" * 100_000 + "]" * 100_000
    assert judged(deep) is None


def test_each_code_has_its_own_words_and_none_quote_the_reply() -> None:
    words = {code: nudge_text(code, ["write_file"]) for code in NonAnswer}
    assert len(set(words.values())) == len(NonAnswer)
    assert "write_file" in words[NonAnswer.BARE_ARGUMENTS]
    # A name that is not a tool's shape is never said.
    assert "rm -rf" not in bare_arguments_nudge(["rm -rf /", "write_file"])
    assert "one of your tools" in bare_arguments_nudge([])
    assert nudge_text("a code of a newer worker") == nudge_text(NonAnswer.EMPTY)
