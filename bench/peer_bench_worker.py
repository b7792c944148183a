"""The worker process of bench/peer_plugins.py: one peer agent's worker as its users configure
it (tests/support/peer_worker.py's setup for the two SDKs, bench/peer_harness_agent.py's for
temporal-agent-harness), with or without our claim check, plus a probe that only measures.

    python bench/peer_bench_worker.py openai-agents|pydantic-ai|harness QUEUE TENANT MODEL_URL

Environment: TEMPORAL_ADDRESS, S3_* and DATABASE_URL (the claim check's store), PEER_CLAIM_CHECK
(0: the SDK alone), PEER_OFFLOAD_DIR (the harness's offload directory), PEER_PROBE (a file: the
probe appends "<monotonic seconds> <bytes>" for the largest payload of every encode of 64 KiB or
more, as the SDK's converter made it, before any codec: the model call's input is the largest).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from temporalio.api.common.v1 import Payload  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.converter import DataConverter, PayloadCodec  # noqa: E402
from temporalio.plugin import SimplePlugin  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from durable_agents import ClaimCheckPlugin  # noqa: E402
from durable_agents.workers.peers.claim_check_plugin import ChainedCodec  # noqa: E402

PROBE_MIN_BYTES = 64 * 1024


class SizeProbe(PayloadCodec):
    """Passes payloads through unchanged; notes the largest of each encode."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        largest = max((len(p.data) for p in payloads), default=0)
        if largest >= PROBE_MIN_BYTES:
            self.out.write(f"{time.monotonic():.3f} {largest}\n")
            self.out.flush()
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


def probe_plugin(out: TextIO) -> SimplePlugin:
    """Outermost codec (listed after every other plugin): it sees what the SDK's converter made."""
    probe = SizeProbe(out)

    def converter(base: DataConverter | None) -> DataConverter:
        base = base or DataConverter.default
        inner = base.payload_codec
        codec: PayloadCodec = probe if inner is None else ChainedCodec([probe, inner])
        return dataclasses.replace(base, payload_codec=codec)

    return SimplePlugin("bench.SizeProbe", data_converter=converter)


def setup(sdk: str, model_url: str) -> tuple[list[Any], list[Any], type, list[Any]]:
    """(client plugins, worker plugins, workflow, activities) as the SDK's users write them."""
    if sdk == "harness":
        with warnings.catch_warnings():  # the harness's 0.8 example uses TemporalAgent
            warnings.simplefilter("ignore")
            import peer_harness_agent as harness
        harness.CHAT_CLIENT.base_url = model_url
        offload = Path(os.environ["PEER_OFFLOAD_DIR"])
        return (
            harness.client_plugins(offload),
            harness.worker_plugins(),
            harness.HarnessReaderWorkflow,
            [],
        )
    from tests.support.peer_worker import sdk_setup

    plugins, workflow, activities = sdk_setup(sdk, model_url)
    return plugins, [], workflow, activities


async def main(argv: list[str]) -> int:
    sdk, queue, tenant, model_url = argv
    plugins, worker_plugins, workflow, activities = setup(sdk, model_url)
    if os.environ.get("PEER_CLAIM_CHECK", "1") != "0":
        plugins.append(ClaimCheckPlugin(tenant))  # docs/other-sdks.md's one line
    with Path(os.environ.get("PEER_PROBE", os.devnull)).open("a") as probe_out:  # noqa: ASYNC230
        plugins.append(probe_plugin(probe_out))
        client = await Client.connect(
            os.environ["TEMPORAL_ADDRESS"], namespace="default", plugins=plugins
        )
        async with Worker(
            client,
            task_queue=queue,
            workflows=[workflow],
            activities=activities,
            plugins=worker_plugins,
        ):
            print(f"peer worker on {queue}", flush=True)
            await asyncio.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
