"""Asking an OpenAI-compatible server how large its context window is, before the first call.

llama.cpp's server tells at ``GET /props`` (``default_generation_settings.n_ctx``: the window
it was started with, ``-c``); vLLM lists ``max_model_len`` per model at ``GET /v1/models``;
llama.cpp lists ``meta.n_ctx_train`` there (the model's own limit, an upper bound only).
Hosted APIs say nothing, and then the MODEL_CONTEXT_TOKENS setting is all there is.

Discovery is best effort: any failure is logged in one line and yields None.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

logger = logging.getLogger(__name__)

# A server that answers slowly here is not worth delaying the first model step for.
DISCOVERY_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class DiscoveredWindow:
    tokens: int
    # Where it came from: "props" (llama.cpp), "models" (vLLM, llama.cpp), for context stats.
    source: str


async def discover_window(
    base_url: str, api_key: str | None, model: str
) -> DiscoveredWindow | None:
    """The window the server at ``base_url`` (its OpenAI ``/v1`` root) advertises, if any."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = base_url.rstrip("/")
    # /props lives at the server root, beside /v1.
    root = base.removesuffix("/v1")
    try:
        async with httpx.AsyncClient(timeout=DISCOVERY_TIMEOUT_SECONDS, headers=headers) as client:
            props = await _json(client, f"{root}/props")
            found = _from_props(props)
            if found is not None:
                return DiscoveredWindow(found, "props")
            found = _from_models(await _json(client, f"{base}/models"), model)
    except (httpx.HTTPError, ValueError) as exc:
        logger.info("context window discovery at %s failed: %s", base, type(exc).__name__)
        return None
    if found is None:
        logger.info("context window: %s does not advertise one; using the setting", base)
        return None
    return DiscoveredWindow(found, "models")


async def _json(client: httpx.AsyncClient, url: str) -> Any:
    response = await client.get(url)
    if response.status_code != 200:
        return None  # e.g. /props on a server that is not llama.cpp
    return response.json()


def _from_props(props: Any) -> int | None:
    if not isinstance(props, Mapping):
        return None
    settings = props.get("default_generation_settings")
    if isinstance(settings, Mapping) and _count(settings.get("n_ctx")):
        return _count(settings.get("n_ctx"))
    return _count(props.get("n_ctx"))


def _from_models(listing: Any, model: str) -> int | None:
    if not isinstance(listing, Mapping) or not isinstance(listing.get("data"), list):
        return None
    entries = [e for e in listing["data"] if isinstance(e, Mapping)]
    # The served model by name; a single-model server may call it anything.
    named = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in named:
        meta = entry.get("meta")
        train = _count(meta.get("n_ctx_train")) if isinstance(meta, Mapping) else None
        found = _count(entry.get("max_model_len")) or train
        if found:
            return found
    return None


def _count(value: object) -> int | None:
    """A positive token count, or None for anything else (bool is an int to Python)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
