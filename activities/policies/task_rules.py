"""The rules a task's options must meet, whichever door it came in by.

The command layer (workers/client/commands.py) checks a start from the CLI, the gateway and the
Python API with them; the workflow checks a plain Temporal client's start input with the
very same function before its first command, so a value refused at one door is refused at
every door, in the same words. Pure and deterministic (the workflow sandbox runs it), no
I/O; messages name the field and the bound, never free text a caller sent.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, TypeVar

from durable_agents.activities.policies.approval_policy import validate as validate_policy
from durable_agents.activities.policies.text_limits import check_text
from durable_agents.storage.devices import validate_device_id
from durable_agents.workflows.task_settings import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS
from durable_agents.workflows.task_settings import (
    DEFAULT_TOOL_TIMEOUT_SECONDS as DEFAULT_TOOL_TIMEOUT_SECONDS,
)
from durable_agents.workflows.task_settings import TaskSettings

# Upper bounds a task may ask for: past them a value is a typo, not a plan.
MAX_STEPS = 10_000
MAX_APPROVAL_WAIT_SECONDS = 30 * 24 * 3600
MAX_TOOL_TIMEOUT_SECONDS = 24 * 3600
MAX_DEVICE_WAIT_SECONDS = 7 * 24 * 3600
MAX_MODEL_OUTAGE_SECONDS = 30 * 24 * 3600
MAX_MODEL_RETRY_INTERVAL_SECONDS = 3600
MAX_PENDING_DEVICE_CALLS = 64
# Sub-agents delegate at most this deep (workflows/delegation.py refuses a deeper one).
MAX_DEPTH = 2

# Lists and maps in options are bounded in count and size: they travel in the workflow's
# start input, and 150,000 policy entries (6.7 MB) once stalled every tenant's worker.
MAX_POLICIES = 64
MAX_POLICY_KEY_CHARS = 200
MAX_POLICY_CHARS = 1024
MAX_DEVICE_TOOLS = 64
MAX_TOOL_NAME_CHARS = 128
MAX_MODEL_CONFIG_BYTES = 4096

# (field, bound) of every float option: each must be > 0 and <= its bound.
SECONDS_FIELDS = (
    ("approval_timeout_seconds", MAX_APPROVAL_WAIT_SECONDS),
    ("tool_timeout_seconds", MAX_TOOL_TIMEOUT_SECONDS),
    ("device_schedule_to_start_seconds", MAX_DEVICE_WAIT_SECONDS),
    ("model_outage_seconds", MAX_MODEL_OUTAGE_SECONDS),
    ("model_retry_max_interval_seconds", MAX_MODEL_RETRY_INTERVAL_SECONDS),
)


# A task's budget (each optional): past these a value is a typo, not a plan.
MAX_BUDGET_TOKENS = 10**12
MAX_BUDGET_COST_USD = 1_000_000.0
MAX_BUDGET_TOOL_CALLS = 1_000_000
MAX_BUDGET_SECONDS = 365 * 24 * 3600.0
# (name, bound, whole number): a budget_{name} option, or a raise's {name}.
BUDGET_FIGURES: tuple[tuple[str, float, bool], ...] = (
    ("tokens", MAX_BUDGET_TOKENS, True),
    ("cost_usd", MAX_BUDGET_COST_USD, False),
    ("tool_calls", MAX_BUDGET_TOOL_CALLS, True),
    ("seconds", MAX_BUDGET_SECONDS, False),
)


# Who decides (a user id) and why (told to the model), at every door that takes them.
MAX_DECIDER_CHARS = 100
MAX_REASON_CHARS = 2000
# Tool call ids are ours (activities/context/call_ids.py), stored in 128 characters.
MAX_TOOL_CALL_ID_CHARS = 128


class InvalidTaskInput(ValueError):
    """An option no door accepts; nothing was committed. `field` names the option."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_number(field: str, value: object, *, integer: bool) -> float:
    # bool is an int; a JSON start input may also carry a string: neither is a number here.
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        kind = "a whole number" if integer else "a number"
        raise InvalidTaskInput(field, f"{field} must be {kind}, got {type(value).__name__}")
    return float(value)


def check_range(field: str, value: object, low: float, high: float, *, open_low: bool) -> None:
    """InvalidTaskInput unless low < value (or <=, when not `open_low`) and value <= high."""
    number = check_number(field, value, integer=not open_low)
    # Written so NaN fails too: every comparison with it is False.
    inside = (low < number if open_low else low <= number) and number <= high
    if not inside:
        bound = f"> {low:g}" if open_low else f">= {low:g}"
        raise InvalidTaskInput(field, f"{field} must be {bound} and <= {high:g}, got {value!r}")


Figure = TypeVar("Figure", int, float)


def tighter(*figures: Figure | None) -> Figure | None:
    """The smallest of the figures given (None: no limit from that side)."""
    given = [f for f in figures if f is not None]
    return min(given) if given else None


def check_budget_figure(field: str, value: object, high: float, integer: bool) -> None:
    """None (no limit), or a whole number >= 1 / a number > 0, up to `high`."""
    if value is None:
        return
    if integer:
        check_range(field, value, 1, high, open_low=False)
    else:
        check_range(field, value, 0, high, open_low=True)


def check_budget_raise(request: object) -> None:
    """A raise names at least one figure, each in its budget option's range."""
    given = [name for name, _, _ in BUDGET_FIGURES if getattr(request, name, None) is not None]
    if not given:
        raise InvalidTaskInput(
            "budget", "a budget raise names tokens, cost_usd, tool_calls or seconds"
        )
    for name, high, integer in BUDGET_FIGURES:
        check_budget_figure(name, getattr(request, name, None), high, integer)


def check_decider(field: str, by: object) -> str:
    """`by` if it can name who decides: 1-MAX_DECIDER_CHARS characters, none of them a
    control character (it is shown in status lines and records)."""
    if not isinstance(by, str):
        raise InvalidTaskInput(field, f"{field} must be a string, got {type(by).__name__}")
    if not by.strip() or len(by) > MAX_DECIDER_CHARS:
        raise InvalidTaskInput(field, f"{field} must be 1-{MAX_DECIDER_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in by):
        raise InvalidTaskInput(field, f"{field} contains a control character")
    return by


def check_decision(request: Any) -> None:
    """An approve's or reject's ids as no door would send them: the call, who decides, the
    staged request and the device."""
    call_id = getattr(request, "tool_call_id", None)
    if not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_TOOL_CALL_ID_CHARS:
        raise InvalidTaskInput("tool_call_id", "tool_call_id is not a tool call id")
    _check_who(request)
    device_id = getattr(request, "device_id", None)
    if device_id is not None:
        try:
            validate_device_id(device_id)
        except (ValueError, TypeError):
            raise InvalidTaskInput("device_id", "device_id is not a device id") from None


def check_raise(request: Any) -> None:
    """A budget raise as no door would send it: its figures and who raises it."""
    check_budget_raise(request)
    _check_who(request)


def _check_who(request: Any) -> None:
    """Who decides: named in the request (a raw update), or in the staged request whose id
    it carries (the service's: a person's name stays out of history)."""
    request_id = getattr(request, "request_id", None)
    if request_id is None:
        check_decider("decided_by", getattr(request, "decided_by", None))
        return
    try:
        uuid.UUID(request_id)
    except (ValueError, AttributeError, TypeError):
        raise InvalidTaskInput("request_id", "request_id must be a UUID") from None
    if getattr(request, "decided_by", "") != "":
        check_decider("decided_by", request.decided_by)


def check_reason(reason: object) -> str:
    """A rejection's reason: a string of at most MAX_REASON_CHARS, storable as text."""
    if not isinstance(reason, str):
        raise InvalidTaskInput("reason", f"reason must be a string, got {type(reason).__name__}")
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidTaskInput(
            "reason", f"the reason is {len(reason)} characters; at most {MAX_REASON_CHARS} are kept"
        )
    try:
        check_text("reason", reason)
    except ValueError as err:
        raise InvalidTaskInput("reason", str(err)) from None
    return reason


def check_policies(field: str, policies: object) -> dict[str, str]:
    """`policies` (tool -> policy) if bounded and well formed, else InvalidTaskInput."""
    if not isinstance(policies, Mapping):
        raise InvalidTaskInput(field, f"{field} must map tool names to policies")
    if len(policies) > MAX_POLICIES:
        raise InvalidTaskInput(
            field, f"{field} has {len(policies)} entries; at most {MAX_POLICIES} are allowed"
        )
    for tool, policy in policies.items():
        if not isinstance(tool, str) or not 0 < len(tool) <= MAX_POLICY_KEY_CHARS:
            raise InvalidTaskInput(
                field, f"{field}: a tool name must be 1-{MAX_POLICY_KEY_CHARS} characters"
            )
        if not isinstance(policy, str) or len(policy) > MAX_POLICY_CHARS:
            raise InvalidTaskInput(
                field,
                f"{field}: a policy must be at most {MAX_POLICY_CHARS} characters",
            )
        if "\x00" in tool or "\x00" in policy:
            raise InvalidTaskInput(field, f"{field} contains a NUL character (U+0000)")
        try:
            validate_policy(policy)
        except ValueError as err:
            raise InvalidTaskInput(field, f"{field}: {err}") from None
    return dict(policies)


def check_tool_names(field: str, names: object) -> list[str]:
    if not isinstance(names, list) or len(names) > MAX_DEVICE_TOOLS:
        raise InvalidTaskInput(field, f"{field} must be a list of at most {MAX_DEVICE_TOOLS} names")
    for name in names:
        if not isinstance(name, str) or not 0 < len(name) <= MAX_TOOL_NAME_CHARS:
            raise InvalidTaskInput(
                field, f"{field}: a tool name must be 1-{MAX_TOOL_NAME_CHARS} characters"
            )
        if "\x00" in name:
            raise InvalidTaskInput(field, f"{field} contains a NUL character (U+0000)")
    return names


def check_model_config(config: object) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        raise InvalidTaskInput("model_config", "model_config must be a JSON object")
    try:
        size = len(json.dumps(config, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError):
        raise InvalidTaskInput("model_config", "model_config must be plain JSON") from None
    if size > MAX_MODEL_CONFIG_BYTES:
        raise InvalidTaskInput(
            "model_config",
            f"model_config is {size} bytes; at most {MAX_MODEL_CONFIG_BYTES} are allowed",
        )
    return dict(config)


def check_task_settings(options: TaskSettings) -> None:
    """Refuse options that would fail the task at once, make it wait forever or load every
    worker: InvalidTaskInput naming the field, before anything commits or runs."""
    if options.max_steps is not None:
        check_range("max_steps", options.max_steps, 1, MAX_STEPS, open_low=False)
    check_range(
        "continue_as_new_every", options.continue_as_new_every, 0, MAX_STEPS, open_low=False
    )
    if options.stuck_after is not None:
        check_range("stuck_after", options.stuck_after, 1, MAX_STEPS, open_low=False)
    check_range(
        "max_pending_device_calls",
        options.max_pending_device_calls,
        1,
        MAX_PENDING_DEVICE_CALLS,
        open_low=False,
    )
    for name, high in SECONDS_FIELDS:
        value = getattr(options, name)
        if value is not None or name != "tool_timeout_seconds":
            check_range(name, value, 0, high, open_low=True)
    for figure, bound, integer in BUDGET_FIGURES:
        field = f"budget_{figure}"
        check_budget_figure(field, getattr(options, field, None), bound, integer)
    check_policies("approval_policies", options.approval_policies)
    check_tool_names("device_tools", options.device_tools)
    if options.device_id is not None:
        try:
            validate_device_id(options.device_id)
        except ValueError:
            raise InvalidTaskInput(
                "device_id", "device_id must be 1-64 letters, digits, '.', '_' or '-'"
            ) from None
    elif options.device_tools:
        raise InvalidTaskInput("device_tools", "device_tools need a device_id to run on")
