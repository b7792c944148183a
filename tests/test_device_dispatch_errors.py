"""The dispatch's refusals answer a device in the gateway's words: each type maps to one
status, error type and fixed message (workers/gateway/errors.py), the ones the device
routes have always answered with."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from durable_agents.workers.device_dispatch.errors import (
    AlreadyCommitted,
    DeviceCallError,
    InvalidDeviceRequest,
    NoSuchCall,
    NotLeased,
    NotRegistered,
    ResultRefused,
)
from durable_agents.workers.gateway.errors import install_error_handlers

ANSWERS: list[tuple[DeviceCallError, int, str, str]] = [
    (NoSuchCall(), 404, "not_found", "no such call for this device"),
    (
        NotLeased(),
        409,
        "not_leased",
        "this device holds no current lease on that call; poll for it again",
    ),
    (NotRegistered(), 409, "not_registered", "register the device first (POST /v1/device)"),
    (AlreadyCommitted(), 409, "already_committed", "this call's result is committed already"),
    (
        ResultRefused("nothing was uploaded for this call"),
        422,
        "result_refused",
        "nothing was uploaded for this call; the call is offered again",
    ),
    (
        InvalidDeviceRequest("send exactly one of result and error"),
        422,
        "invalid_request",
        "send exactly one of result and error",
    ),
]


@pytest.mark.parametrize(("error", "status", "kind", "message"), ANSWERS)
async def test_a_dispatch_refusal_answers_its_status_type_and_words(
    error: DeviceCallError, status: int, kind: str, message: str
) -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/refused")
    async def refused() -> None:
        raise error

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        answer = await http.get("/refused")
    assert answer.status_code == status
    assert answer.json() == {"error": {"type": kind, "message": message}}
