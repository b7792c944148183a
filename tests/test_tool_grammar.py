"""Grammar tool mode, pure parts: the reply schema and prompt built from untrusted tool
definitions (bounded; a tool that cannot be held is left out with the reason), the
conversation as the model sees it, and the constrained reply read back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durable_agents.activities.providers.base import ChatMessage, ProviderCall, ToolSpec
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.grammar_schema import (
    MAX_NODES,
    MAX_REPEAT,
    MAX_SCHEMA_CHARS,
    Inexpressible,
    constrainable,
)
from durable_agents.activities.providers.openai_grammar import grammar_messages
from durable_agents.activities.providers.tool_grammar import (
    MAX_PROMPT_CHARS,
    MAX_TOOLS,
    AnswerPreview,
    grammar_tools,
    read_constrained,
)

PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
READ = ToolSpec("read_file", "Read a workspace file.", PATH)
WRITE = ToolSpec(
    "write_file",
    "Write a file.",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
)


def tool(name: str, parameters: Any, description: str = "A tool.") -> ToolSpec:
    return ToolSpec(name, description, parameters)


# The reply schema -------------------------------------------------------------------------


def test_the_schema_allows_one_call_of_each_offered_tool_or_an_answer() -> None:
    built = grammar_tools([READ, WRITE])
    assert built.offered == ("read_file", "write_file")
    assert built.left_out == ()
    assert built.schema is not None
    alternatives = built.schema["anyOf"]
    assert [a["properties"].get("tool") for a in alternatives] == [
        {"const": "read_file"},
        {"const": "write_file"},
        None,
    ]
    # Each call's arguments are its own tool's schema; every object is closed.
    assert alternatives[0]["properties"]["arguments"] == PATH
    assert alternatives[1]["properties"]["arguments"]["required"] == ["path", "content"]
    assert alternatives[2] == {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    assert all(a["additionalProperties"] is False for a in alternatives)
    # "tool" comes first: the model names the tool before it writes the arguments.
    assert list(alternatives[0]["properties"]) == ["tool", "arguments"]


def test_the_prompt_lists_each_tool_and_the_two_reply_shapes() -> None:
    prompt = grammar_tools([READ]).prompt
    line = next(ln for ln in prompt.splitlines() if ln.startswith("{"))
    assert json.loads(line) == {
        "name": "read_file",
        "description": "Read a workspace file.",
        "parameters": PATH,
    }
    assert '{"tool": "<tool name>", "arguments": {<its arguments>}}' in prompt
    assert '{"answer": "<your answer>"}' in prompt


def test_no_tools_offer_no_schema() -> None:
    built = grammar_tools([])
    assert (built.prompt, built.schema, built.offered) == ("", None, ())


@pytest.mark.parametrize(
    ("parameters", "reason"),
    [
        ({"type": "object", "properties": {"x": {"$ref": "http://evil/x.json"}}}, "outside"),
        (
            {
                "type": "object",
                "properties": {"node": {"$ref": "#/$defs/node"}},
                "$defs": {
                    "node": {"type": "object", "properties": {"n": {"$ref": "#/$defs/node"}}}
                },
            },
            "recursive",
        ),
        ({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}, "does not resolve"),
        ({"type": "object", "properties": {"x": {"$ref": {"not": "a string"}}}}, "outside"),
        ({"type": "object", "properties": {"x": {"$ref": "#"}}}, "recursive"),
        (
            {"type": "object", "required": ["x"], "properties": {"x": {"$ref": "#/required"}}},
            "not an object",
        ),
        ({"type": "object", "properties": {"x": {"type": "decimal"}}}, "not a JSON Schema type"),
        ({"type": "object", "properties": {"x": {"enum": []}}}, "enum"),
        ({"type": "object", "properties": {"x": {"anyOf": []}}}, "anyOf"),
        ({"type": "object", "properties": {"x": {"enum": list(range(500))}}}, "enum"),
        ({"type": "string"}, "not an object schema"),
        ("not a schema", "not a JSON object"),
        ({"type": "object", "properties": ["path"]}, "properties are not an object"),
    ],
)
def test_a_schema_the_grammar_cannot_hold_leaves_its_tool_out_with_the_reason(
    parameters: Any, reason: str
) -> None:
    built = grammar_tools([READ, tool("odd", parameters)])
    assert built.offered == ("read_file",)
    [left] = built.left_out
    assert left.name == "odd"
    assert reason in left.reason
    assert built.schema is not None
    assert "odd" not in json.dumps(built.schema)
    assert '"odd"' not in built.prompt


def test_deep_wide_or_exploding_schemas_are_bounded() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(30):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(Inexpressible, match="deeper"):
        constrainable(deep)
    # Refs that each use the next one eight times: 8**4 nodes once inlined.
    defs: dict[str, Any] = {
        f"d{i}": {"type": "array", "items": [{"$ref": f"#/$defs/d{i + 1}"}] * 8} for i in range(4)
    }
    defs["d4"] = {"type": "string"}
    exploding = {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}
    with pytest.raises(Inexpressible, match=str(MAX_NODES)):
        constrainable(exploding)
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"enum": [f"{'v' * 60}{j}" for j in range(100)]} for i in range(3)},
    }
    with pytest.raises(Inexpressible, match=str(MAX_SCHEMA_CHARS)):
        constrainable(wide)


def test_keywords_that_would_fail_or_expand_the_grammar_are_dropped_not_refused() -> None:
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^(a{1000}){1000}$", "maxLength": 100_000},
            "code": {"type": "string", "pattern": "([unbalanced", "minLength": 2, "maxLength": 8},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10**9},
            "n": {"type": "integer", "minimum": 1, "maximum": 1e308},
            "when": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email", "x-vendor": {"anything": True}},
            "flag": {"type": "boolean", "minLength": True},
        },
        "required": ["name", 7],
    }
    held = constrainable(parameters)
    assert held["properties"] == {
        "name": {"type": "string"},
        "code": {"type": "string", "minLength": 2, "maxLength": 8},
        "tags": {"type": "array", "items": {"type": "string"}},
        "n": {"type": "integer", "minimum": 1},
        "when": {"type": "string", "format": "date-time"},
        "mail": {"type": "string"},
        "flag": {"type": "boolean"},
    }
    assert held["required"] == ["name"]
    assert MAX_REPEAT < 10**9


def test_local_refs_are_inlined_so_they_resolve_under_the_replys_root() -> None:
    parameters = {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}, "more": {"$ref": "#/$defs/Item"}},
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "kind": {"oneOf": [{"const": "a"}]}},
            }
        },
    }
    item = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "kind": {"anyOf": [{"const": "a"}]}},
    }
    assert constrainable(parameters) == {
        "type": "object",
        "properties": {"item": item, "more": item},
    }


def test_descriptions_are_shown_cut_and_never_held_in_the_grammar() -> None:
    parameters = {
        "type": "object",
        "description": "top",
        "properties": {"path": {"type": "string", "description": "p" * 5_000}},
    }
    built = grammar_tools([tool("t", parameters, description="d" * 5_000)])
    assert built.schema is not None
    assert "description" not in json.dumps(built.schema)
    shown = json.loads(next(ln for ln in built.prompt.splitlines() if ln.startswith("{")))
    assert len(shown["description"]) == 1_000
    assert len(shown["parameters"]["properties"]["path"]["description"]) == 200


def test_the_prompt_and_the_tool_count_are_bounded() -> None:
    many = [tool(f"t{i}", PATH, description="x" * 900) for i in range(MAX_TOOLS + 10)]
    built = grammar_tools(many)
    assert len(built.prompt) < MAX_PROMPT_CHARS + 1_000
    assert len(built.offered) + len(built.left_out) == len(many)
    assert any("prompt" in left.reason for left in built.left_out)
    small = [tool(f"t{i}", {"type": "object", "properties": {}}, "") for i in range(MAX_TOOLS + 3)]
    built = grammar_tools(small)
    assert len(built.offered) == MAX_TOOLS
    assert [left.reason for left in built.left_out] == [
        f"more than {MAX_TOOLS} tools are offered"
    ] * 3


def test_a_bad_or_repeated_tool_name_is_left_out() -> None:
    built = grammar_tools([READ, tool('x" | "y', PATH), tool("read_file", PATH), tool("", PATH)])
    assert built.offered == ("read_file",)
    assert [left.reason for left in built.left_out] == [
        "its name is not 1-128 letters, digits, '_', '.' or '-'",
        "another tool has its name",
        "its name is not 1-128 letters, digits, '_', '.' or '-'",
    ]


# The conversation as the model sees it ------------------------------------------------------


def test_calls_answers_and_results_are_shown_as_the_model_writes_and_reads_them() -> None:
    first = ProviderCall(id="call_1", name="read_file", arguments={"path": "a.txt"})
    second = ProviderCall(id="call_2", name="read_file", arguments={"path": "b.txt"})
    messages = [
        ChatMessage("system", "Be careful."),
        ChatMessage("user", "Read a and b."),
        ChatMessage("assistant", "I'll read them.", tool_calls=(first, second)),
        ChatMessage("tool", "alpha", tool_call_id="call_1"),
        ChatMessage("tool", "beta", tool_call_id="call_2"),
        ChatMessage("assistant", "A says alpha."),
        ChatMessage("user", "Thanks."),
    ]
    sent = grammar_messages(messages, "TOOLS")
    assert sent == [
        {"role": "system", "content": "Be careful.\n\nTOOLS"},
        {"role": "user", "content": "Read a and b."},
        {
            "role": "assistant",
            "content": '{"tool": "read_file", "arguments": {"path": "a.txt"}}\n'
            '{"tool": "read_file", "arguments": {"path": "b.txt"}}',
        },
        {"role": "user", "content": "Result of read_file:\nalpha\n\nResult of read_file:\nbeta"},
        {"role": "assistant", "content": '{"answer": "A says alpha."}'},
        {"role": "user", "content": "Thanks."},
    ]
    assert not any("tool_calls" in m or m["role"] == "tool" for m in sent)


def test_the_tools_get_a_system_message_when_there_is_none() -> None:
    sent = grammar_messages([ChatMessage("user", "hi")], "TOOLS")
    assert sent[0] == {"role": "system", "content": "TOOLS"}


# Reading the reply ------------------------------------------------------------------------


def test_a_constrained_call_becomes_a_provider_call() -> None:
    read = read_constrained('{"tool": "read_file", "arguments": {"path": "a.txt"}}')
    assert read is not None
    assert read.calls == [ProviderCall(id="", name="read_file", arguments={"path": "a.txt"})]
    assert read.text == ""


def test_a_constrained_answer_is_the_text_even_when_it_quotes_a_call() -> None:
    quoted = '{"tool": "x", "arguments": {}}'
    read = read_constrained(json.dumps({"answer": f"Call it as {quoted}.\nDone."}))
    assert read is not None
    assert read.calls == []
    assert read.text == f"Call it as {quoted}.\nDone."


def test_a_fenced_reply_is_read_too() -> None:
    read = read_constrained('```json\n{"answer": "ok"}\n```')
    assert read is not None and read.text == "ok"


def test_a_reply_the_server_did_not_constrain_is_left_to_the_text_reader() -> None:
    assert read_constrained("I think the answer is 4.") is None
    assert read_constrained('{"name": "read_file", "arguments": {}}') is None
    assert read_constrained("[1, 2]") is None


def test_a_reply_cut_short_keeps_the_call_as_malformed_or_the_answer_written() -> None:
    cut_call = read_constrained(
        '{"tool": "write_file", "arguments": {"path": "out/r.md", "content": "# Rep', cut=True
    )
    assert cut_call is not None
    [call] = cut_call.calls
    assert call.name == "write_file"
    assert call.arguments == {RAW_ARGUMENTS_KEY: '{"path": "out/r.md", "content": "# Rep'}
    cut_answer = read_constrained('{"answer": "The files are a, b\\nand c\\u00e9 an', cut=True)
    assert cut_answer is not None
    assert cut_answer.text == "The files are a, b\nand c\u00e9 an"
    assert read_constrained('{"answer": "x', cut=False) is None


def test_arguments_that_are_not_an_object_are_kept_raw() -> None:
    read = read_constrained('{"tool": "read_file", "arguments": "a.txt"}')
    assert read is not None
    assert read.calls[0].arguments == {RAW_ARGUMENTS_KEY: '"a.txt"'}


# The streamed preview ---------------------------------------------------------------------


async def preview_of(pieces: list[str]) -> str:
    heard: list[str] = []

    async def sink(piece: str) -> None:
        heard.append(piece)

    preview = AnswerPreview(sink)
    for piece in pieces:
        await preview(piece)
    return "".join(heard)


async def test_the_preview_passes_on_the_answers_words_decoded() -> None:
    text = json.dumps({"answer": 'Line one\nsaid "hi" \u00e9 \U0001f600 done'})
    # Every split point, escapes and surrogate pairs cut in two included.
    for cut in range(1, len(text)):
        assert (
            await preview_of([text[:cut], text[cut:]])
            == 'Line one\nsaid "hi" \u00e9 \U0001f600 done'
        )
    assert await preview_of(list(text)) == 'Line one\nsaid "hi" \u00e9 \U0001f600 done'
    assert await preview_of(["```json\n", '{ "answer" :', ' "ok"}', "\n```"]) == "ok"


async def test_the_preview_says_nothing_of_a_call() -> None:
    text = '{"tool": "write_file", "arguments": {"content": "{\\"answer\\": \\"no\\"}"}}'
    assert await preview_of(list(text)) == ""
    assert await preview_of(["plain text"]) == ""
