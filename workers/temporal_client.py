"""The Temporal client, configured by the SDK's own env/profile loading
(TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS, config profiles)."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig


async def connect_client(
    address: str | None = None,
    namespace: str | None = None,
    *,
    data_converter: DataConverter | None = None,
) -> Client:
    """Connect; `data_converter` (e.g. with payload offload) replaces the SDK default."""
    config = ClientConfig.load_client_connect_config()
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    config.setdefault("target_host", "localhost:7233")
    if data_converter is None:
        return await Client.connect(**config)
    return await Client.connect(**config, data_converter=data_converter)
