"""The web page: `/` and its static files under `/web/`, plain HTML, CSS and ES modules
from workers/gateway/web/ (package data; nothing is built at install time).

Every answer carries strict headers (workers/gateway/security_headers.py): the page runs
only its own scripts (no inline script, no other origin), cannot be framed, and is never
content-sniffed. The page renders every string it gets from the API as text, so model
replies, tool arguments and results cannot become markup; the policy is the second line
if that ever slips.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

WEB_DIR = Path(__file__).with_name("web")

# A new deploy's page and scripts are picked up on the next load. The security headers
# (CSP, nosniff, framing) are workers/gateway/security_headers.py's, as on every route.
PAGE_HEADERS = {"Cache-Control": "no-cache"}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> FileResponse:
    """The page itself."""
    return FileResponse(WEB_DIR / "index.html", media_type="text/html", headers=PAGE_HEADERS)


class _PageFiles(StaticFiles):
    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(PAGE_HEADERS)
        return response


def static_files() -> StaticFiles:
    """The page's scripts and styles, to mount at /web."""
    return _PageFiles(directory=WEB_DIR)
