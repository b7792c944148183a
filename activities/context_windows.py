"""The server's real context window, learned once per worker, and calls that fit inside it.

The configured budget (MODEL_CONTEXT_TOKENS) may be larger than the window the server was
started with (llama.cpp ``-c 2048``, vLLM ``--max-model-len``). The window is learned up
front where the server tells (see providers.context_window), else from the numbers in its
overflow errors (providers.overflow). A request that still overflows is assembled again
under a smaller budget (fewer results expanded, older turns dropped, a smaller reply
reservation) and sent again, a bounded number of times, within the same activity attempt.
Only when the system prompt, the task and the newest item alone do not fit does the call
fail, for good, saying so.

Windows are counted in the server's tokens; budgets in ours (tiktoken). The ratio between
the two is learned from an overflow that names the prompt's size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol, runtime_checkable

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.context.assembly import AssembledContext, ContextBudget, tool_tokens
from durable_agents.activities.providers.base import ModelReply, ToolSpec
from durable_agents.activities.providers.context_window import DiscoveredWindow
from durable_agents.activities.providers.failure import ProviderError
from durable_agents.activities.providers.overflow import CONTEXT_OVERFLOW, Overflow, overflow_of
from durable_agents.storage.models import CompactionRow

# Overflows answered by a smaller request within one call before it fails.
MAX_OVERFLOW_RETRIES = 4
# The reply reservation never shrinks below this (nor above a quarter of a small window).
MIN_REPLY_TOKENS = 256
# Share of a server's window left unused: our tokenizer is not the server's, and chat
# templates add tokens we do not count.
_MARGIN = 0.1
# An overflow that gives no usable numbers keeps this share of what was sent.
_SHRINK = 0.7
_RATIO_BOUNDS = (0.5, 4.0)


@runtime_checkable
class WindowSource(Protocol):
    """A provider that can ask its server for the window (OpenAICompatibleProvider)."""

    async def context_window(self) -> DiscoveredWindow | None: ...


@dataclass(frozen=True)
class _Learned:
    window: int | None  # the server's tokens; None: it never said
    source: str  # props | models | overflow
    ratio: float = 1.0  # server tokens per token of ours
    cap: int | None = None  # a budget of ours that overflowed less, when numbers were missing


class ContextWindows:
    """What one worker knows about its servers' windows, by model name."""

    def __init__(self, source: WindowSource | None = None) -> None:
        self._source = source
        self._asked = source is None
        self._lock = asyncio.Lock()
        self._known: dict[str, _Learned] = {}

    async def discover(self, model: str) -> None:
        """Ask the server once per worker; a failure only means the setting is used."""
        if self._asked:
            return
        async with self._lock:
            if self._asked or self._source is None:
                return
            try:
                found = await self._source.context_window()
            except Exception as exc:  # discovery must never fail a model call
                activity.logger.info("context window discovery failed: %s", type(exc).__name__)
                found = None
            self._asked = True
            if found is not None:
                self._known.setdefault(model, _Learned(found.tokens, found.source))

    def budget(self, model: str, configured: ContextBudget) -> ContextBudget:
        """`configured`, shrunk to what is known of the server's window."""
        learned = self._known.get(model)
        return configured if learned is None else _capped(configured, learned)

    def learn(self, model: str, overflow: Overflow, sent_prompt: int, used: ContextBudget) -> None:
        """Remember what an overflow said. `sent_prompt`: our count of the prompt that
        overflowed (messages and tool schemas); `used`: the budget it was assembled under."""
        before = self._known.get(model)
        prompt = overflow.prompt_tokens
        if prompt is None and overflow.total_tokens is not None:
            prompt = overflow.total_tokens - (overflow.reply_tokens or used.reply_tokens)
        ratio = before.ratio if before else 1.0
        if prompt and sent_prompt > 0:
            low, high = _RATIO_BOUNDS
            ratio = min(max(prompt / sent_prompt, low), high)
        window = overflow.window or (before.window if before else None)
        learned = _Learned(window, "overflow" if overflow.window else _source(before), ratio)
        after = _capped(used, learned)
        if (after.context_tokens, after.reply_tokens) >= (used.context_tokens, used.reply_tokens):
            # What the server said would not make the next request smaller (or it said
            # nothing): send a fixed share less than what overflowed.
            reply = max(MIN_REPLY_TOKENS, int(used.reply_tokens * _SHRINK))
            learned = replace(learned, cap=int(sent_prompt * _SHRINK) + reply)
        self._known[model] = learned

    def stats(self, model: str, used: ContextBudget, retries: int) -> dict[str, Any]:
        """What a reply's context stats record about the window it was sent into."""
        learned = self._known.get(model)
        return {
            "server_tokens": learned.window if learned else None,
            "source": learned.source if learned else "setting",
            "budget_tokens": used.context_tokens,
            "reply_tokens": used.reply_tokens,
            "overflow_retries": retries,
        }


def _capped(configured: ContextBudget, learned: _Learned) -> ContextBudget:
    limit, reply = configured.context_tokens, configured.reply_tokens
    if learned.window is not None:
        reply = min(reply, max(MIN_REPLY_TOKENS, learned.window // 4))
        usable = int(learned.window * (1 - _MARGIN)) - reply
        limit = min(limit, int(usable / learned.ratio) + reply)
    if learned.cap is not None:
        reply = min(reply, max(MIN_REPLY_TOKENS, learned.cap // 4))
        limit = min(limit, learned.cap)
    if (limit, reply) == (configured.context_tokens, configured.reply_tokens):
        return configured
    return replace(configured, context_tokens=max(limit, reply + 1), reply_tokens=reply)


def _source(before: _Learned | None) -> str:
    return before.source if before else "overflow"


@dataclass
class Fitted:
    reply: ModelReply
    context: AssembledContext
    budget: ContextBudget
    retries: int


def context_stats(
    windows: ContextWindows, fitted: Fitted, model: str, compaction: CompactionRow | None
) -> dict[str, Any]:
    """What a reply's context was made of and the window it was sent into. Zero counters
    are left out: readers default them. So is the window when it is just the configured
    budget (no server window learned, no overflow retry): the turn's context config records
    that budget, and ~150 B a reply was the same block every step."""
    context = fitted.context
    counts = {
        "input_tokens": context.input_tokens,
        "preview_tokens": context.preview_tokens,
        "expanded": context.expanded,
        "truncated": context.truncated,
        "not_expanded": context.not_expanded,
        "dropped_messages": context.dropped_messages,
        "compaction_version": compaction.version if compaction else None,
    }
    stats: dict[str, Any] = {k: v for k, v in counts.items() if v}
    window = windows.stats(model, fitted.budget, fitted.retries)
    if window["source"] != "setting" or window["overflow_retries"] or window["server_tokens"]:
        stats["window"] = window
    return stats


async def call_within_window(
    windows: ContextWindows,
    model: str,
    configured: ContextBudget,
    tools: Sequence[ToolSpec],
    assemble: Callable[[ContextBudget], Awaitable[AssembledContext]],
    send: Callable[[AssembledContext, ContextBudget, int], Awaitable[ModelReply]],
) -> Fitted:
    """Assemble and send; on overflow learn, assemble smaller and send again. `send` gets
    the number of overflows so far (a vendor may hold an idempotency key to one body)."""
    await windows.discover(model)
    used = windows.budget(model, configured)
    context = await assemble(used)
    retries = 0
    while True:
        try:
            return Fitted(await send(context, used, retries), context, used, retries)
        except ProviderError as err:
            overflow = overflow_of(err)
            if overflow is None:
                raise
            sent = context.input_tokens + tool_tokens(tools, used.encoding)
            windows.learn(model, overflow, sent, used)
            smaller = windows.budget(model, configured)
            shrunk = await assemble(smaller)
            progress = (
                shrunk.input_tokens < context.input_tokens
                or smaller.reply_tokens < used.reply_tokens
            )
            activity.logger.info(
                "context overflow (server window %s, prompt %s): %d -> %d input tokens",
                overflow.window,
                overflow.prompt_tokens,
                context.input_tokens,
                shrunk.input_tokens,
            )
            if not progress:
                raise window_too_small(overflow, sent, used, retries) from None
            if retries >= MAX_OVERFLOW_RETRIES:
                # Still shrinking: the activity's next attempt starts from what was learned.
                raise ApplicationError(
                    f"context overflow: still over the server's window after {retries + 1} "
                    f"smaller and smaller requests; the next attempt starts at "
                    f"{smaller.context_tokens} tokens",
                    asdict(overflow),
                    type=CONTEXT_OVERFLOW,
                ) from None
            context, used, retries = shrunk, smaller, retries + 1


def window_too_small(
    overflow: Overflow, sent: int, used: ContextBudget, retries: int
) -> ApplicationError:
    """The final error: even the smallest request this session allows overflows."""
    window = f"{overflow.window} tokens" if overflow.window else "size not stated"
    prompt = overflow.prompt_tokens or sent
    return ApplicationError(
        f"context window too small: the server's window ({window}) cannot hold even the "
        f"system prompt, the task and the newest item, which need about {prompt} tokens plus "
        f"{used.reply_tokens} for the reply ({retries + 1} requests, each smaller). Give the "
        "server a larger context (llama.cpp -c) or shorten the system prompt; committed "
        "items are kept.",
        {"window": overflow.window, "needed": prompt + used.reply_tokens},
        type=CONTEXT_OVERFLOW,
        non_retryable=True,
    )
