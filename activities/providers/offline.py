"""The offline demo model: a small deterministic agent that needs no network.

It surveys the workspace (list_dir), reads the text files it finds (read_file), writes
a report built from what it read (write_file, which asks for approval) and then answers.
A task that names other tools it was given ("weather city=Paris") gets those called
instead, with the `arg=value` pairs of the task as arguments, and an answer quoting each
result: enough to run an agent of your own tools end to end without a model server.
It decides from the conversation it is given, so it reads the tool results that context
assembly expanded from the artifact store: the demo shows the real data path.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from typing import Any

from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelReply,
    ModelRequest,
    ProviderCall,
    ToolSpec,
    Usage,
)

_TEXT_SUFFIXES = (".md", ".txt", ".py", ".csv", ".json", ".toml", ".yaml", ".yml", ".rst")
MAX_FILES = 6
REPORT_PATH = "out/report.md"
# The survey's own tools: a task naming them still gets the survey.
_SURVEY_TOOLS = frozenset({"list_dir", "read_file", "write_file"})
# How much of each result the answer quotes.
_QUOTED_CHARS = 300
# A reply streams in about this many pieces.
STREAM_PIECES = 4


# Its reply while a device has yet to answer (the loop goes on meanwhile); the survey goes
# on from the calls before it once the results are in.
WAITING = "Waiting for the device's results."
# How a device call without its result reads (activities/context/assembly.py pending_note).
_PENDING = "[pending on device "


def _waited(message: ChatMessage) -> bool:
    return message.role == "assistant" and not message.tool_calls and message.content == WAITING


def _last_assistant(messages: list[ChatMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant" and not _waited(messages[i]):
            return i
    return None


# What a source file defines, for its row: its first line may say nothing only it holds.
_DEFINED = re.compile(
    r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w{0,60})", re.MULTILINE
)


def _summarise(path: str, text: str) -> str:
    lines = text.splitlines()
    words = sum(len(line.split()) for line in lines)
    heading = next((ln.lstrip("# ").strip() for ln in lines if ln.strip()), "(empty)")
    defined = [m.group(1) for m in _DEFINED.finditer(text)][:3]
    defines = f" (defines {', '.join(defined)})" if defined else ""
    return f"| `{path}` | {len(lines)} | {words} | {heading[:60]}{defines} |"


def _named_calls(task: str, tools: list[ToolSpec]) -> list[tuple[str, dict[str, Any]]]:
    """Calls of the tools `task` names (not the survey's), in the order named, each with
    the task's `arg=value` pairs its schema declares (typed by the schema)."""
    try:
        words = shlex.split(task)
    except ValueError:  # an unbalanced quote: take the words as they are
        words = task.split()
    # "city=Oslo, then ...": the punctuation after a value is the sentence's, not the value's.
    pairs = dict(w.rstrip(",;.").split("=", 1) for w in words if "=" in w and w[0] != "=")
    named = []
    for spec in tools:
        if spec.name in _SURVEY_TOOLS:
            continue
        found = re.search(rf"(?<![\w.-]){re.escape(spec.name)}(?![\w-])", task)
        if found is not None:
            props = spec.parameters.get("properties", {})
            args = {k: _typed(v, props[k]) for k, v in pairs.items() if k in props}
            named.append((found.start(), spec.name, args))
    return [(name, args) for _, name, args in sorted(named)]


def _typed(value: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return value  # the tool's validation says what is wrong with it
    if kind == "boolean":
        return value.lower() in ("1", "true", "yes")
    return value


def pieces_of(text: str, count: int = STREAM_PIECES) -> list[str]:
    """`text` cut at spaces into about `count` pieces that join back to it."""
    if not text:
        return []
    words = text.split(" ")
    size = max(1, -(-len(words) // count))
    groups = [words[i : i + size] for i in range(0, len(words), size)]
    return [("" if i == 0 else " ") + " ".join(g) for i, g in enumerate(groups) if g]


class OfflineProvider:
    name = "offline"

    def __init__(self, piece_seconds: float = 0.0) -> None:
        """`piece_seconds`: the pause between streamed pieces of a reply."""
        self._piece_seconds = piece_seconds

    async def complete(self, request: ModelRequest) -> ModelReply:
        reply = self._decide(request)
        if request.on_text is not None:
            for n, piece in enumerate(pieces_of(reply.text)):
                if n and self._piece_seconds:
                    await asyncio.sleep(self._piece_seconds)
                await request.on_text(piece)
        return reply

    def _decide(self, request: ModelRequest) -> ModelReply:
        msgs = request.messages
        if request.purpose == "compaction":
            used = [c.name for m in msgs for c in m.tool_calls]
            return self._final(f"Earlier steps called: {', '.join(used) or 'no tools'}.", Usage())
        turn = sum(1 for m in msgs if m.role == "assistant")
        last = _last_assistant(msgs)
        usage = Usage(input_tokens=sum(len(m.content) for m in msgs) // 4, output_tokens=40)
        task = next((m.content for m in msgs if m.role == "user"), "")
        if last is None:
            named = _named_calls(task, request.tools)
            if named:
                return self._calls(turn, named, usage, f"Calling {len(named)} tool(s).")
        if last is None or not msgs[last].tool_calls:
            if last is not None:
                return self._final("There is nothing more to do.", usage)
            return self._calls(
                turn,
                [("list_dir", {"path": ".", "recursive": True})],
                usage,
                "Let me look at the workspace first.",
            )
        calls = msgs[last].tool_calls
        results = {m.tool_call_id: m.content for m in msgs[last + 1 :] if m.role == "tool"}
        if any(results.get(c.id, "").startswith(_PENDING) for c in calls):
            return self._final(WAITING, usage)
        kind = calls[0].name
        if kind not in _SURVEY_TOOLS:
            quoted = [
                f"{c.name}: {results.get(c.id, '(no result)')[:_QUOTED_CHARS]}" for c in calls
            ]
            return self._final("\n".join(quoted), usage)
        if kind == "list_dir":
            files = self._text_files(results.get(calls[0].id, ""))
            if not files:
                return self._final("The workspace has no text files to report on.", usage)
            return self._calls(
                turn,
                [("read_file", {"path": p}) for p in files],
                usage,
                f"Reading {len(files)} files.",
            )
        if kind == "read_file":
            rows = [_summarise(str(c.arguments.get("path")), results.get(c.id, "")) for c in calls]
            report = "\n".join(
                [
                    "# Workspace report",
                    "",
                    f"Task: {task[:200]}",
                    "",
                    "| file | lines | words | first line |",
                    "|---|---|---|---|",
                    *rows,
                    "",
                ]
            )
            return self._calls(
                turn,
                [("write_file", {"path": REPORT_PATH, "content": report})],
                usage,
                "Writing the report.",
            )
        if kind == "write_file":
            outcome = results.get(calls[0].id, "")
            if "rejected" in outcome.lower() or "error" in outcome.lower():
                return self._final(f"I did not write the report: {outcome[:200]}", usage)
            return self._final(f"Wrote {REPORT_PATH} summarising the workspace.", usage)
        return self._final("Done.", usage)

    @staticmethod
    def _text_files(listing: str) -> list[str]:
        try:
            data: Any = json.loads(listing)
        except json.JSONDecodeError:
            return []
        entries = data.get("entries", data) if isinstance(data, dict) else data
        files = [
            str(e["path"])
            for e in entries
            if isinstance(e, dict)
            and e.get("type") == "file"
            and str(e.get("path", "")).endswith(_TEXT_SUFFIXES)
            and not str(e.get("path", "")).startswith("out/")
        ]
        return sorted(files)[:MAX_FILES]

    @staticmethod
    def _calls(
        turn: int, calls: list[tuple[str, dict[str, Any]]], usage: Usage, text: str
    ) -> ModelReply:
        return ModelReply(
            text=text,
            tool_calls=[ProviderCall(f"call_{turn}_{i}", n, a) for i, (n, a) in enumerate(calls)],
            finish_reason="tool_calls",
            usage=usage,
            model="offline",
        )

    @staticmethod
    def _final(text: str, usage: Usage) -> ModelReply:
        return ModelReply(text=text, finish_reason="stop", usage=usage, model="offline")

    async def aclose(self) -> None:
        return None
