"""Tool calls written as function tags: the shapes small models produce, and hostile ones."""

from __future__ import annotations

import pytest

from durable_agents.activities.providers.base import ProviderCall
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.function_tags import MAX_TAGS, function_tag_calls
from durable_agents.activities.providers.text_tool_calls import MAX_TEXT_CALLS, read_reply_text

OFFERED = ("read_file", "write_file", "list_dir")

# Qwen2.5-Coder 1.5B's first reply to "find the mascot in docs/" (native mode, llama-server
# --jinja), as the server sent it: the listing it needs, then a guessed read written over and
# over until the 1,024-token limit cut it inside a tag.
GUESSED = """<tools>
  <function name="read_file" arguments='{"path": "docs/mascot.png"}'/>
</tools>

"""
MEASURED = (
    """<tools>
  <function name="list_dir" arguments='{"path": "docs/", "recursive": true}'/>
</tools>

"""
    + GUESSED * 40
    + """<tools>
  <function name="read_file" arguments='{"path": "docs/m"""
)


def test_a_reply_of_repeated_tags_cut_at_its_limit_runs_each_distinct_call_once() -> None:
    found = read_reply_text(MEASURED, OFFERED, cut=True)
    assert found.calls == [
        ProviderCall(id="", name="list_dir", arguments={"path": "docs/", "recursive": True}),
        ProviderCall(id="", name="read_file", arguments={"path": "docs/mascot.png"}),
    ]
    # What is left is markup and an unfinished tag: no answer.
    assert found.text == ""


@pytest.mark.parametrize(
    "text",
    [
        '<function=read_file>{"path": "a"}</function>',
        '<function name="read_file">{"path": "a"}</function>',
        '<function name="read_file">\n```json\n{"path": "a"}\n```\n</function>',
        "<function name='read_file' arguments='{\"path\": \"a\"}'/>",
        '<function name="read_file" arguments="{&quot;path&quot;: &quot;a&quot;}"></function>',
        '<function name="read_file" parameters=\'{"path": "a"}\'>',
    ],
)
def test_shapes_of_one_tag(text: str) -> None:
    found = read_reply_text(text, OFFERED)
    assert found.calls == [ProviderCall(id="", name="read_file", arguments={"path": "a"})]
    assert found.text == ""


def test_the_prose_around_tags_stays_and_other_calls_in_it_count() -> None:
    text = (
        'Let me look. <function=list_dir>{"path": "."}</function> then '
        '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call> done'
    )
    found = read_reply_text(text, OFFERED)
    assert [c.name for c in found.calls] == ["list_dir", "read_file"]
    assert "Let me look." in found.text and "<function" not in found.text


def test_a_quote_of_the_other_kind_inside_the_arguments_is_kept() -> None:
    text = '<function name="write_file" arguments=\'{"path": "a", "content": "it\'s"}\'/>'
    [call] = read_reply_text(text, OFFERED).calls
    assert call.arguments == {"path": "a", "content": "it's"}


def test_a_tag_of_any_name_is_a_call_and_bad_arguments_are_kept_raw() -> None:
    # The tool layer answers both: an unknown tool with the real names, raw arguments with
    # what JSON it wanted.
    [unknown] = read_reply_text('<function=rm_rf>{"path": "/"}</function>', OFFERED).calls
    assert unknown.name == "rm_rf"
    [raw] = read_reply_text("<function name='read_file' arguments='{path: a}'/>", OFFERED).calls
    assert raw.arguments == {RAW_ARGUMENTS_KEY: "{path: a}"}


@pytest.mark.parametrize(
    "text",
    [
        "The <function> keyword declares one in JavaScript.",
        "Use <function name> to name it.",
        'I would call <function name="read_file" and then stop',
    ],
)
def test_prose_about_functions_holds_no_call(text: str) -> None:
    found = read_reply_text(text, OFFERED)
    assert found.calls == []
    assert found.text == text


def test_distinct_calls_past_the_limit_are_dropped() -> None:
    text = "".join(f'<function=read_file>{{"path": "{n}"}}</function>' for n in range(40))
    assert len(read_reply_text(text, OFFERED).calls) == MAX_TEXT_CALLS


@pytest.mark.parametrize(
    "text",
    [
        '<function name="a" arguments=\'' * 20_000,
        '<function name="a">' * 20_000,
        '<function=a>{"x": 1}</function>' * 50_000,
        "<function=" + "a" * 100_000,
    ],
)
def test_hostile_tags_never_crash_and_stay_bounded(text: str) -> None:
    found = function_tag_calls(text)
    assert len(found.calls) <= MAX_TAGS
    assert len(read_reply_text(text, OFFERED, cut=True).calls) <= 1
