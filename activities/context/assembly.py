"""Context assembly: persisted items in, model messages out, within a token budget.

Tool results, and user messages over the inline limit, are persisted as a ref plus a short
preview. To call the model we expand refs into full text *in a copy*, newest first, while
the budget lasts; one that does not fit is cut to an excerpt and says so, with its ref.
Nothing assembled here is ever written back: only the model's reply is persisted, by the
caller.

Whatever else is dropped, the system prompt, the task (the first user message) and the
newest block are kept: older blocks go first, and if those three alone overflow, the
inline user messages among them are cut (in the copy) to fit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from durable_agents.activities.context.call_expected import CallAsked
from durable_agents.activities.context.call_ids import EchoIds, provider_id_of
from durable_agents.activities.providers.base import ChatMessage, ProviderCall, ToolSpec
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.tools.effects import RERUN_NOTE
from durable_agents.storage.models import ItemRow
from durable_agents.storage.tool_effects import EffectState
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.tokens import count_tokens, truncate_to_tokens

FetchArtifact = Callable[[uuid.UUID, int], Awaitable[tuple[bytes, str]]]
"""Returns (bytes, content_type) of one artifact of the session's tenant: all of it, or only
its first `max_bytes` bytes when it is larger (an excerpt needs no more)."""

# Bytes read per token of allowance: generous (English averages ~4 bytes per token), so the
# prefix read holds more than the excerpt can use, and a 200 MB result costs a small read.
_BYTES_PER_TOKEN_READ = 16

# An excerpt encodes a sample of this many characters per token of allowance first (a
# token is ~4 characters of English, ~2.5 of base64), and the whole prefix only if the
# sample holds too few tokens; the margin keeps the cut away from the sample's ragged end.
_SAMPLE_CHARS_PER_TOKEN = 8
_SAMPLE_MARGIN = 64

# Rough per-message overhead of chat formats (role markers, separators).
_MESSAGE_OVERHEAD = 4
# Expanding a result is worth an S3 read only if it adds at least this much over the preview.
_MIN_GAIN_TOKENS = 128
# A call's raw (not JSON) arguments are shown again only up to this many characters.
SHOWN_RAW_CHARS = 200


@dataclass(frozen=True)
class ContextBudget:
    context_tokens: int = 32_000
    reply_tokens: int = 2_048
    tool_result_tokens: int = 6_000
    encoding: str = "cl100k_base"
    compact_at_ratio: float = 0.75


@dataclass
class AssembledContext:
    messages: list[ChatMessage]
    input_tokens: int
    expanded: int = 0
    truncated: int = 0
    not_expanded: int = 0
    dropped_messages: int = 0
    # The conversation's messages with every result as its preview, before dropping any:
    # what the session needs at least. Expansion is elastic (it fills whatever room is
    # left), so this, not input_tokens, says when a compaction is due.
    preview_tokens: int = 0
    # What the turn answered asks of the reply, and the tools it may not call
    # (activities/context/call_expected.py).
    call_asked: CallAsked = CallAsked.NOTHING
    withheld: tuple[str, ...] = ()


@dataclass
class _Block:
    """One unit that is kept or dropped whole: a user message, or an assistant turn with
    the results of its tool calls (providers reject a tool call without its result)."""

    messages: list[ChatMessage]
    pinned: bool = False
    # message index -> item whose content is an artifact (a tool result, a long message)
    result_items: dict[int, ItemRow] = field(default_factory=dict)


def _tokens(msg: ChatMessage, encoding: str) -> int:
    n = count_tokens(msg.content, encoding) + _MESSAGE_OVERHEAD
    for call in msg.tool_calls:
        n += count_tokens(call.name + json.dumps(call.arguments), encoding)
    return n


def tool_tokens(tools: Sequence[ToolSpec], encoding: str) -> int:
    """What the tool schemas of a request cost, as the budget counts them."""
    return sum(
        count_tokens(t.name + t.description + json.dumps(t.parameters), encoding) for t in tools
    )


def _note(item: ItemRow) -> str:
    """Our words before a result that ran again after the call was in doubt."""
    rerun_ran = item.data.get("rerun") and item.data.get("effect") != EffectState.IN_DOUBT
    return RERUN_NOTE if rerun_ran else ""


def _result_text(item: ItemRow) -> str:
    return _note(item) + (item.text or "")


def pending_note(device_id: str, step: int) -> str:
    """What the model reads for a device call still without its result: our words only
    (nothing the device sent), and where the result will be."""
    return (
        f"[pending on device {device_id} since step {step}; its result will be given here, "
        "as this call's result, when it arrives. You may go on with other steps and tools.]"
    )


def shown_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as the model is shown them again: raw ones (not JSON) only when
    under SHOWN_RAW_CHARS, else empty (the call's result says what went wrong). A small
    model copies what it is shown: a runaway reply's text, or a marker cut into it."""
    raw = arguments.get(RAW_ARGUMENTS_KEY)
    if isinstance(raw, str) and len(raw) > SHOWN_RAW_CHARS:
        return {**arguments, RAW_ARGUMENTS_KEY: ""}
    return dict(arguments)


def _blocks(items: Sequence[ItemRow], pending: Mapping[str, str]) -> list[_Block]:
    calls = {i.tool_call_id: i for i in items if i.kind == ItemKind.TOOL_CALL and i.tool_call_id}
    # One result per call, as every provider requires: the newest, when a call reported in
    # doubt was settled again (re-run, or declined) after its first result.
    results = {
        i.tool_call_id: i for i in items if i.kind == ItemKind.TOOL_RESULT and i.tool_call_id
    }
    blocks: list[_Block] = []
    echo = EchoIds()
    first_user = True
    for item in items:
        if item.kind == ItemKind.USER_MESSAGE:
            block = _Block([ChatMessage("user", item.text)], pinned=first_user)
            if item.artifact_id is not None:
                block.result_items[0] = item
            blocks.append(block)
            first_user = False
        elif item.kind == ItemKind.ASSISTANT_MESSAGE:
            ids = [c["id"] for c in item.data.get("tool_calls", []) if c["id"] in calls]
            # The provider is shown its own ids (ours where its are unusable); results
            # are matched by ours.
            provider_calls = tuple(
                ProviderCall(
                    id=echo.assign(cid, provider_id_of(cid, calls[cid].data)),
                    name=calls[cid].tool_name or "",
                    arguments=shown_arguments(calls[cid].data.get("arguments", {})),
                )
                for cid in ids
            )
            block = _Block([ChatMessage("assistant", item.text, tool_calls=provider_calls)])
            for cid, call in zip(ids, provider_calls, strict=True):
                result = results.get(cid)
                # A late result is given with its call, where every provider expects it
                # (an assistant tool call is followed by its tool message).
                if result is not None:
                    text = _result_text(result)
                else:
                    text = pending.get(cid, "[no result was recorded]")
                block.messages.append(
                    ChatMessage("tool", text, tool_call_id=call.id, name=call.name)
                )
                if result is not None and result.artifact_id is not None:
                    block.result_items[len(block.messages) - 1] = result
            blocks.append(block)
    return blocks


def _decode(data: bytes, content_type: str, prefix_only: bool = False) -> str | None:
    if content_type.startswith(("text/", "application/json", "application/xml")) or (
        "charset" in content_type
    ):
        return data.decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        # A prefix may end inside a multi-byte character; that alone doesn't make it binary.
        if prefix_only and err.start >= len(data) - 3:
            return data[: err.start].decode("utf-8")
        return None


def _ref_note(item: ItemRow) -> str:
    info = item.data.get("artifact", {})
    what = "message" if item.kind == ItemKind.USER_MESSAGE else "result"
    sha, size = info.get("sha256", "?"), info.get("size_bytes", "?")
    return f"full {what}: artifact sha256:{sha} ({size} bytes)"


def _sample(text: str, allowance: int, encoding: str) -> str:
    """A prefix of `text` holding more than `allowance` tokens, far shorter than the whole
    when the text is long: only the start of a result is ever shown."""
    for chars in (allowance * _SAMPLE_CHARS_PER_TOKEN, len(text)):
        sample = text[:chars]
        if chars >= len(text) or count_tokens(sample, encoding) > allowance + _SAMPLE_MARGIN:
            return sample
    return text


async def _expand(
    block: _Block, index: int, remaining: int, budget: ContextBudget, fetch: FetchArtifact
) -> tuple[ChatMessage, bool] | None:
    """The result at `index` expanded to fit `remaining` more tokens, or None if it can't."""
    enc = budget.encoding
    item, floor = block.result_items[index], block.messages[index]
    floor_cost = _tokens(floor, enc)
    allowance = min(budget.tool_result_tokens, remaining + floor_cost)
    # Fetch only when an excerpt meaningfully longer than the preview fits.
    if allowance <= floor_cost + _MIN_GAIN_TOKENS or item.artifact_id is None:
        return None
    data, content_type = await fetch(item.artifact_id, allowance * _BYTES_PER_TOKEN_READ)
    size = int(item.data.get("artifact", {}).get("size_bytes", len(data)))
    prefix_only = len(data) < size
    text = _decode(data, content_type, prefix_only)
    if text is None:
        text = f"[binary {content_type}, {size} bytes: {_ref_note(item)}]"
    text = _note(item) + text
    if prefix_only:
        # Counting a 200 MB result's tokens would cost more than the call: estimate from a
        # sample of the prefix, which is also all the excerpt below needs to encode.
        text = _sample(text, allowance, enc)
        sampled = len(text.encode("utf-8", "surrogatepass"))
        total = f"~{count_tokens(text, enc) * size // max(sampled, 1)}"
    else:
        full = replace(floor, content=text)
        full_tokens = _tokens(full, enc)
        if full_tokens <= allowance:
            return full, False
        total = str(full_tokens)
    note = f"\n[truncated: first {{kept}} of {total} tokens; {_ref_note(item)}]"
    kept = allowance - _MESSAGE_OVERHEAD - count_tokens(note, enc) - 8
    for _ in range(3):  # token counts of a cut text can shift by a few at the seam
        if kept <= count_tokens(_result_text(item), enc):
            return None
        cut = replace(floor, content=truncate_to_tokens(text, kept, enc) + note.format(kept=kept))
        over = _tokens(cut, enc) - allowance
        if over <= 0:
            return cut, True
        kept -= over
    return None


def _squeeze(blocks: list[_Block], sizes: list[int], over: int, encoding: str) -> None:
    """Cut the longest inline user messages (in the copy), each once, until `over` tokens
    are gone: the kept blocks alone overflow the window, and an over-budget request fails."""
    cut_already: set[int] = set()
    while over > 0:
        candidates = [
            (_tokens(b.messages[0], encoding), i)
            for i, b in enumerate(blocks)
            if i not in cut_already and b.messages[0].role == "user" and not b.result_items
        ]
        if not candidates:
            return  # nothing left to cut: send what is kept
        tokens, index = max(candidates)
        cut_already.add(index)
        msg = blocks[index].messages[0]
        note = f"\n[cut to fit the context budget: first {{kept}} of {tokens} tokens]"
        kept = max(tokens - over - _MESSAGE_OVERHEAD - count_tokens(note, encoding) - 8, 0)
        content = truncate_to_tokens(msg.content, kept, encoding) + note.format(kept=kept)
        cut = replace(msg, content=content)
        saved = tokens - _tokens(cut, encoding)
        if saved > 0:
            blocks[index].messages[0] = cut
            sizes[index] -= saved
            over -= saved


async def assemble_context(
    items: Sequence[ItemRow],
    *,
    system_prompt: str,
    tools: Sequence[ToolSpec],
    budget: ContextBudget,
    fetch: FetchArtifact,
    pending: Mapping[str, str] | None = None,
) -> AssembledContext:
    """Build the model input for `items` (in ordinal order) within `budget`. `pending`:
    tool call id -> the note given for a device call still running (see pending_note)."""
    enc = budget.encoding
    system = ChatMessage("system", system_prompt)
    blocks = _blocks(items, pending or {})
    # The floor is every result as its preview plus a note saying where the rest is;
    # expansion below replaces that with content while the budget lasts.
    for block in blocks:
        for index, item in block.result_items.items():
            msg = block.messages[index]
            note = f"\n[not expanded to fit the context budget; {_ref_note(item)}]"
            block.messages[index] = replace(msg, content=msg.content + note)
    fixed = _tokens(system, enc) + budget.reply_tokens + tool_tokens(tools, enc)
    if blocks:
        blocks[-1].pinned = True  # the newest: what the next step answers
    sizes = [sum(_tokens(m, enc) for m in b.messages) for b in blocks]
    preview_tokens = sum(sizes)

    # Drop the oldest unpinned blocks until previews alone fit.
    dropped = 0
    while fixed + sum(sizes) > budget.context_tokens:
        victim = next((i for i, b in enumerate(blocks) if not b.pinned), None)
        if victim is None:
            break
        dropped += len(blocks[victim].messages)
        del blocks[victim], sizes[victim]
    _squeeze(blocks, sizes, fixed + sum(sizes) - budget.context_tokens, enc)

    result = AssembledContext(
        messages=[], input_tokens=0, dropped_messages=dropped, preview_tokens=preview_tokens
    )
    remaining = budget.context_tokens - fixed - sum(sizes)
    # Newest results first: they matter most to the next step.
    for block in reversed(blocks):
        if remaining <= _MIN_GAIN_TOKENS:
            result.not_expanded += sum(
                len(b.result_items) for b in blocks[: blocks.index(block) + 1]
            )
            break
        for index in sorted(block.result_items, reverse=True):
            expanded = await _expand(block, index, remaining, budget, fetch)
            if expanded is None:
                result.not_expanded += 1
                continue
            message, truncated = expanded
            remaining -= _tokens(message, enc) - _tokens(block.messages[index], enc)
            block.messages[index] = message
            result.expanded += 1
            result.truncated += truncated

    result.messages = [system] + [m for b in blocks for m in b.messages]
    result.input_tokens = sum(_tokens(m, enc) for m in result.messages)
    return result
