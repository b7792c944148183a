"""`@tool`: a Tool from a typed Python function.

    @tool(effect="read_only")
    async def forecast(ctx: ToolContext, city: str, days: Annotated[int, Field(ge=1)] = 3) -> dict:
        '''The weather ahead.

        Args:
            city: The city, e.g. "Lyon".
            days: How many days ahead.
        '''

The JSON schema comes from the type hints (pydantic; Annotated/Field constraints and
descriptions honoured, defaults optional, no other names allowed) and the docstring (its first
paragraph describes the tool, its `Args:` section the arguments). The model's arguments are
validated before the function runs: a mistake is a ToolError("InvalidArguments") naming each
field and why, which the model is told; the run goes on and nothing is retried. The first
parameter, when annotated ToolContext, receives the call's context. A plain `def` runs in a
thread, off the event loop.

Results: `str` -> text/plain (UTF-8), `bytes` -> application/octet-stream (either with the
declared `content_type` instead), `dict`/`list`/pydantic model -> application/json, a
ToolOutput as it is. Anything else is a bug in the tool: a TypeError naming it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from durable_agents.activities.policies.approval_policy import PolicyError
from durable_agents.activities.policies.approval_policy import validate as validate_policy
from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.tools.args import check_allowed, check_args
from durable_agents.activities.tools.base import (
    EFFECTS,
    Effect,
    ReconcileFn,
    Tool,
    ToolContext,
    ToolOutput,
)
from durable_agents.activities.tools.tool_docs import parse_docstring
from durable_agents.activities.tools.tool_schema import (
    Arguments,
    ToolDefinitionError,
    arguments_of,
    parameters_schema,
)

__all__ = ["ToolDefinitionError", "output_of", "tool"]

TEXT = "text/plain; charset=utf-8"
BINARY = "application/octet-stream"
JSON = "application/json"
# Providers take names like this (OpenAI: ^[a-zA-Z0-9_-]{1,64}$).
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_DESCRIPTION_CHARS = 2000


def tool(
    *,
    effect: Effect,
    needs_approval: bool = False,
    reconcile: ReconcileFn | None = None,
    name: str | None = None,
    description: str | None = None,
    content_type: str | None = None,
    approval: str | None = None,
) -> Callable[[Callable[..., Any]], Tool]:
    """Make a Tool of the decorated function; `effect` is required (see base.Effect).

    `name` defaults to the function's name, `description` to the docstring's first
    paragraph; `content_type` is given to `str` and `bytes` results. `approval`: the
    tool's own approval policy when it asks only sometimes (e.g. `exists:path`); it
    implies `needs_approval`.
    """
    if effect not in EFFECTS:
        raise ToolDefinitionError(f"effect must be one of {', '.join(EFFECTS)}; got {effect!r}")
    if approval is not None:
        try:
            validate_policy(approval)
        except PolicyError as err:
            raise ToolDefinitionError(str(err)) from None

    def decorate(fn: Callable[..., Any]) -> Tool:
        tool_name: str = name or str(getattr(fn, "__name__", ""))
        if not _NAME.fullmatch(tool_name):
            raise ToolDefinitionError(
                f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-'"
            )
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as err:  # NameError for a hint naming something not importable
            raise ToolDefinitionError(
                f"tool {tool_name!r}: cannot read its type hints: {err}"
            ) from err
        doc = parse_docstring(inspect.getdoc(fn))
        summary = " ".join((description or doc.summary).split())
        if not summary:
            raise ToolDefinitionError(
                f"tool {tool_name!r} has no description: give it a docstring or description="
            )
        if len(summary) > MAX_DESCRIPTION_CHARS:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: its description is over {MAX_DESCRIPTION_CHARS} characters"
            )
        arguments = arguments_of(fn, tool_name, hints)
        schema = parameters_schema(arguments, tool_name, doc.arguments)
        return Tool(
            spec=ToolSpec(name=tool_name, description=summary, parameters=schema),
            fn=_runner(fn, tool_name, arguments, schema, content_type),
            needs_approval=needs_approval or approval is not None,
            effect=effect,
            reconcile=reconcile,
            approval=approval,
        )

    return decorate


def _runner(
    fn: Callable[..., Any],
    tool_name: str,
    arguments: Arguments,
    schema: dict[str, Any],
    content_type: str | None,
) -> Callable[[ToolContext, dict[str, Any]], Any]:
    is_async = inspect.iscoroutinefunction(fn)

    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        check_args(args, tool_name, schema)  # not JSON at all
        check_allowed(args, schema)  # names it does not take, listing those it does
        kwargs = arguments.validate(args)
        call = (
            functools.partial(fn, ctx, **kwargs)
            if arguments.takes_context
            else (functools.partial(fn, **kwargs))
        )
        result = await call() if is_async else await asyncio.to_thread(call)
        return output_of(tool_name, result, content_type)

    run.__name__ = tool_name
    run.__doc__ = fn.__doc__
    return run


def output_of(tool_name: str, result: object, content_type: str | None = None) -> ToolOutput:
    """A function's result as the bytes stored for it, with a fitting content type."""
    if isinstance(result, ToolOutput):
        return result
    if isinstance(result, str):
        try:
            return ToolOutput(result.encode("utf-8"), content_type or TEXT)
        except UnicodeEncodeError:
            raise TypeError(f"tool {tool_name!r} returned text that is not valid Unicode") from None
    if isinstance(result, bytes | bytearray | memoryview):
        return ToolOutput(bytes(result), content_type or BINARY)
    if isinstance(result, BaseModel):
        return ToolOutput(result.model_dump_json().encode("utf-8"), JSON)
    if isinstance(result, dict | list):
        try:
            body = json.dumps(result, ensure_ascii=False, sort_keys=True).encode("utf-8")
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"tool {tool_name!r} returned a {type(result).__name__} that is not JSON: {err}"
            ) from None
        return ToolOutput(body, JSON)
    raise TypeError(
        f"tool {tool_name!r} returned {type(result).__name__}; return str, bytes, dict, "
        "list, a pydantic model or a ToolOutput"
    )
