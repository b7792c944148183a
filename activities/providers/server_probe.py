"""Which server answers at an OpenAI-compatible base URL, for ``tool_mode: auto``.

llama.cpp's server is the one known to constrain tool calls only after the model opens its
call tag (activities/providers/tool_grammar.py); it says who it is at ``GET /props``, beside
``/v1``, with ``default_generation_settings`` (its ``n_ctx`` is what context_window reads).
No other server is known to serve that shape there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import httpx

from durable_agents.activities.providers.context_window import DISCOVERY_TIMEOUT_SECONDS

logger = logging.getLogger(__name__)


async def serves_llama_cpp(base_url: str, api_key: str | None) -> bool | None:
    """True when the server at ``base_url`` (its ``/v1`` root) is llama.cpp's server, False
    when it answered as something else, None when it could not be asked (ask again later)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        async with httpx.AsyncClient(timeout=DISCOVERY_TIMEOUT_SECONDS, headers=headers) as client:
            response = await client.get(f"{root}/props")
    except httpx.HTTPError as exc:
        logger.info("server probe at %s failed: %s", root, type(exc).__name__)
        return None
    if response.status_code >= 500:
        return None  # e.g. llama.cpp's 503 while it loads the model
    if response.status_code != 200:
        return False
    try:
        props = response.json()
    except ValueError:
        return False
    return isinstance(props, Mapping) and isinstance(
        props.get("default_generation_settings"), Mapping
    )
