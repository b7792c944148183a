"""The Temporal client, configured by the SDK's own env/profile loading
(TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS, config profiles)."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.envconfig import ClientConfig


async def connect_client(address: str | None = None, namespace: str | None = None) -> Client:
    config = ClientConfig.load_client_connect_config()
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    config.setdefault("target_host", "localhost:7233")
    return await Client.connect(**config)
