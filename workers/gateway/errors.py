"""Every error the gateway answers with has one JSON shape: {"error": {"type", "message"}},
plus `errors` (a list of strings, one problem each) where a request has several problems.

Exceptions from workers.client.tasks, workers.device_dispatch and storage map to statuses
here, so routes just call them. A missing session and another tenant's session raise the
same SessionNotFound, so they answer the same 404.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.policies.edited_arguments import InvalidEdit
from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.storage.errors import (
    ArtifactNotFound,
    InvalidTenant,
    SessionNotFound,
    TenantNotFound,
)
from durable_agents.storage.forks import NotForkable
from durable_agents.storage.quotas import QuotaRefused, TenantFrozen
from durable_agents.workers.client.commands import ScopeRefused
from durable_agents.workers.client.tasks import TaskNotResumable, TaskNotRunning
from durable_agents.workers.device_dispatch.errors import (
    AlreadyCommitted,
    InvalidDeviceRequest,
    NoSuchCall,
    NotLeased,
    NotRegistered,
    ResultRefused,
)

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An answer the gateway gives on purpose (auth, scope, rate limit, ...)."""

    def __init__(
        self,
        status: int,
        type_: str,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        details: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.type, self.message, self.headers = status, type_, message, headers
        self.details = details


def error_response(
    status: int,
    type_: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    details: list[str] | None = None,
) -> JSONResponse:
    error: dict[str, Any] = {"type": type_, "message": message}
    if details:
        error["errors"] = details
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def _validation_message(err: RequestValidationError) -> str:
    problems: list[Any] = list(err.errors())
    if not problems:
        return "invalid request"
    first = problems[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


_HTTP_TYPES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}


def install_error_handlers(app: FastAPI) -> None:
    """Map exceptions to the one error shape (most specific class wins)."""

    def on(exc_type: type[Exception], status: int, type_: str) -> None:
        async def handler(_: Request, err: Exception) -> JSONResponse:
            return error_response(status, type_, str(err) or type_)

        app.add_exception_handler(exc_type, handler)

    async def api_error(_: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, ApiError)
        return error_response(err.status, err.type, err.message, err.headers, details=err.details)

    async def validation(_: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, RequestValidationError)
        for problem in err.errors():
            rule = (problem.get("ctx") or {}).get("error")
            if isinstance(rule, InvalidTaskInput):  # the command layer's rule, as elsewhere
                return error_response(400, "invalid_request", str(rule))
        return error_response(422, "invalid_request", _validation_message(err))

    async def http(_: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, HTTPException)
        kind = _HTTP_TYPES.get(err.status_code, "http_error")
        return error_response(err.status_code, kind, str(err.detail), err.headers)

    async def invalid_edit(_: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, InvalidEdit)
        return error_response(422, "invalid_arguments", str(err), details=err.problems)

    async def update_failed(_: Request, err: Exception) -> JSONResponse:
        # The workflow refused the decision (no such call waiting, decided already...).
        assert isinstance(err, WorkflowUpdateFailedError)
        return error_response(409, "conflict", str(err.cause or err))

    async def rpc(_: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, RPCError)
        if err.status == RPCStatusCode.NOT_FOUND:
            # Routes check the session is the tenant's first: here its workflow has ended
            # (or ended between our look and our request).
            return error_response(409, "conflict", "the task is not running")
        log.warning("Temporal RPC failed: %s", err.status)
        return error_response(503, "unavailable", "the task service is unavailable; try again")

    async def internal(_: Request, err: Exception) -> JSONResponse:
        log.error("unhandled %s in a gateway route", type(err).__name__, exc_info=err)
        return error_response(500, "internal", "internal error")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(HTTPException, http)
    app.add_exception_handler(InvalidEdit, invalid_edit)
    app.add_exception_handler(WorkflowUpdateFailedError, update_failed)
    app.add_exception_handler(RPCError, rpc)
    on(SessionNotFound, 404, "not_found")
    on(ArtifactNotFound, 404, "not_found")
    on(InvalidTenant, 400, "invalid_request")
    on(TenantNotFound, 404, "not_found")
    on(TaskNotRunning, 409, "conflict")
    on(TaskNotResumable, 409, "conflict")
    on(NotForkable, 409, "conflict")
    on(ScopeRefused, 403, "forbidden")
    on(QuotaRefused, 429, "quota_exceeded")
    on(TenantFrozen, 403, "tenant_frozen")
    on(NoSuchCall, 404, "not_found")
    on(NotLeased, 409, "not_leased")
    on(NotRegistered, 409, "not_registered")
    on(AlreadyCommitted, 409, "already_committed")
    on(ResultRefused, 422, "result_refused")
    on(InvalidDeviceRequest, 422, "invalid_request")
    on(ValueError, 400, "invalid_request")
    on(WorkflowUpdateRPCTimeoutOrCancelledError, 504, "timeout")
    app.add_exception_handler(Exception, internal)
