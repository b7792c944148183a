"""How agentctl reports a failure: one line on stderr (`error: ...`) and exit code 1.

Every exception a command lets through ends here, in `report`, so the mapping from our
errors (and the service clients') to a sentence lives in one place. A Python traceback is
only printed when AGENT_DEBUG=1 asks for it.
"""

from __future__ import annotations

import os
import sys
import traceback

import pydantic
from botocore.exceptions import BotoCoreError, ClientError
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from temporalio.client import (
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.storage.errors import StorageError
from durable_agents.workers.client.gateway_client import GatewayError
from durable_agents.workers.client.tasks import TaskNotRunning
from durable_agents.workers.settings import Settings
from durable_agents.workers.stack.errors import DevStackNotInstalled
from durable_agents.workers.stack.local_model import LocalModelError

# Long enough for any message of ours; short enough that a runaway one stays one line.
MAX_LINE = 400
# A service's own words on why it was not reached, clipped so what to do still fits.
MAX_DETAIL = 200
DEBUG_ENV = "AGENT_DEBUG"
DEV_STACK_HINT = "`agentctl env` shows the dev stack this shell uses, `agentctl dev up` starts one"


def unreachable(service: str, setting: str, detail: str) -> str:
    """The sentence for a service that cannot be reached: which, why, and what to do."""
    why = _one_line(detail, MAX_DETAIL)
    return f"cannot reach {service} ({why}); is it up? Check {setting} ({DEV_STACK_HINT})"


class ServiceUnavailable(Exception):
    """A service the command needs cannot be reached; names the setting that points at it."""

    def __init__(self, service: str, setting: str, detail: str) -> None:
        super().__init__(unreachable(service, setting, detail))


def _one_line(text: str, limit: int = MAX_LINE) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _leaf(err: BaseException) -> BaseException:
    # A task group's failure is a group around the error that matters.
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def _settings_error(err: pydantic.ValidationError) -> str:
    prefixes = {
        f.annotation.__name__: str(f.annotation.model_config.get("env_prefix", ""))
        for f in Settings.model_fields.values()
        if isinstance(f.annotation, type) and issubclass(f.annotation, pydantic.BaseModel)
    }
    # No input values: a setting may be a secret.
    problems = err.errors(include_url=False, include_input=False)
    first = problems[0]
    name = "_".join(str(part) for part in first["loc"]).upper()
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    if err.title in prefixes:
        return f"invalid setting {prefixes[err.title]}{name}: {first['msg']}{more}"
    return f"invalid {err.title} {name}: {first['msg']}{more}"


def explain(err: BaseException) -> str:
    """One line saying what went wrong, without the `error: ` prefix."""
    err = _leaf(err)
    if isinstance(err, pydantic.ValidationError):  # before ValueError: it is one
        return _settings_error(err)
    if isinstance(
        err,
        StorageError
        | ValueError
        | ServiceUnavailable
        | LocalModelError
        | DevStackNotInstalled
        | GatewayError
        | TaskNotRunning,
    ):
        return str(err) or type(err).__name__
    if isinstance(err, WorkflowUpdateFailedError):
        return str(err.cause or err)
    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
        return "Temporal did not confirm in time; the decision may still apply (see `status`)"
    if isinstance(err, RPCError):
        if err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            return unreachable("Temporal", "TEMPORAL_ADDRESS", err.message)
        return f"Temporal said: {err.message}"
    if isinstance(err, ClientError):
        return f"S3 refused the request: {err}"
    if isinstance(err, BotoCoreError):
        return unreachable("S3", "S3_ENDPOINT_URL", str(err))
    if isinstance(err, ArgumentError):
        # The message quotes the URL, which may hold a password: never echo it.
        return "DATABASE_URL is not a database URL (postgresql+asyncpg://USER@HOST:PORT/DB)"
    if isinstance(err, DBAPIError):
        return f"PostgreSQL said: {err.orig}"
    if isinstance(err, SQLAlchemyError):
        return f"database error: {err}"
    if isinstance(err, ConnectionError | TimeoutError):
        return f"lost a connection to a service ({err}); check the stack is up"
    if isinstance(err, OSError):
        return str(err)
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    kind = f"{type(err).__module__}.{type(err).__qualname__}".removeprefix("builtins.")
    return f"unexpected {kind}: {first} ({DEBUG_ENV}=1 prints the traceback)"


def report(err: BaseException) -> int:
    """Print `err` as one line on stderr (after its traceback if AGENT_DEBUG=1); return 1."""
    # Read straight from the environment: the settings themselves may be what failed.
    if os.environ.get(DEBUG_ENV, "").lower() in ("1", "true", "yes"):
        traceback.print_exception(err, file=sys.stderr)
    sys.stderr.write(f"error: {_one_line(explain(err))}\n")
    sys.stderr.flush()
    return 1
