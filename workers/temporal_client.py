"""The Temporal client, configured by the SDK's own env/profile loading
(TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS, config profiles); where that
names no server, the running dev stack's (workers/dev_env.py), else localhost:7233."""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime

from durable_agents.workers.dev_env import stack_defaults
from durable_agents.workflows.strict_inputs import StrictPayloadConverter

DEFAULT_ADDRESS = "localhost:7233"


async def connect_client(
    address: str | None = None,
    namespace: str | None = None,
    *,
    data_converter: DataConverter | None = None,
    runtime: Runtime | None = None,
) -> Client:
    """Connect; `data_converter` (e.g. with payload offload) replaces the SDK default;
    `runtime`, e.g. one serving the core's metrics, the SDK's default runtime. Either way
    what callers send the loop decodes strictly (workflows/strict_inputs.py): a worker
    decodes with its client's converter."""
    config = ClientConfig.load_client_connect_config()
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    if "target_host" not in config:
        stack = stack_defaults()
        config["target_host"] = stack.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS)
        if "namespace" not in config and "TEMPORAL_NAMESPACE" in stack:
            config["namespace"] = stack["TEMPORAL_NAMESPACE"]
    extra: dict[str, Any] = {}
    if runtime is not None:
        extra["runtime"] = runtime
    extra["data_converter"] = dataclasses.replace(
        data_converter or DataConverter.default, payload_converter_class=StrictPayloadConverter
    )
    return await Client.connect(**config, **extra)
