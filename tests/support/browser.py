"""Debian's chromium driven by Playwright (no browser download: the machine's package).

The browser test must never skip on a machine without it: `make test` installs it, and a
run that still lacks it fails here with what to do.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# How long an `expect` waits for the page unless it says otherwise. The page's requests are
# served by the stack and a gateway that share the machine with the suite's other workers:
# a page that is right can take longer than Playwright's 5 s default to show it.
EXPECT_MS = 30_000


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless chromium for as long as the block runs."""
    if not os.path.exists(CHROMIUM):  # noqa: ASYNC240 (one stat, before anything runs)
        pytest.fail(
            f"no chromium at {CHROMIUM}: the web page's browser test needs Debian's chromium "
            "(`make test` installs it: apt-get install -y --no-install-recommends chromium)",
            pytrace=False,
        )
    expect.set_options(timeout=EXPECT_MS)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def sign_in(page: Page, base: str, key: str) -> None:
    """Open the gateway's page at `base` and sign in with `key`; return once the sign-in
    was refused, or once the start form holds the agent's tools (the last thing above the
    lists to arrive: a click placed before it can land on whatever it pushed down)."""
    await page.goto(base)
    await page.fill("#key", key)
    await page.click("#signin-form button[type=submit]")
    settled = "[data-testid=approve-tool], #start-tools .muted, #signin-error:not(:empty)"
    await expect(page.locator(settled).first).to_be_visible()
