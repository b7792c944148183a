"""One Temporal plugin that gives an agent written for another SDK our storage.

    from temporalio.client import Client
    from temporalio.openai_agents import OpenAIAgentsPlugin  # or pydantic-ai's PydanticAIPlugin
    from durable_agents import ClaimCheckPlugin

    client = await Client.connect(
        "localhost:7233", plugins=[OpenAIAgentsPlugin(), ClaimCheckPlugin("acme")]
    )

Workers built from that client inherit the plugin (Temporal applies a client's plugins to
its workers), so the agent code and the worker code do not change. It only sets the data
converter's codec (workers/peers/claim_check.py), keeping whatever payload converter the SDK's
own plugin chose (both SDKs' plugins keep a codec already set, and this one keeps their
converter), so the plugins may come in either order. A codec already configured (e.g. an
encryption codec) still runs, after ours on the way out: it then sees refs, not content.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Self

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)
from temporalio.plugin import SimplePlugin

from durable_agents.workers.peers.claim_check import (
    DEFAULT_GROUP,
    DEFAULT_OBJECT_THRESHOLD,
    DEFAULT_STRING_THRESHOLD,
    ClaimCheckCodec,
    ClaimCheckStore,
)

PLUGIN_NAME = "durable_agents.ClaimCheckPlugin"


class ClaimCheckPlugin(SimplePlugin):
    """The claim check on a client and every worker built from it, for tenant `tenant_id`.

    `store`: where objects and holds go; by default opened from the environment (S3_*,
    DATABASE_URL, as every entry point) at first use; `await plugin.aclose()` closes it.
    """

    def __init__(
        self,
        tenant_id: str,
        *,
        store: ClaimCheckStore | None = None,
        string_threshold: int = DEFAULT_STRING_THRESHOLD,
        group: int = DEFAULT_GROUP,
        object_threshold: int = DEFAULT_OBJECT_THRESHOLD,
    ) -> None:
        self.store = store or ClaimCheckStore()
        self.codec = ClaimCheckCodec(
            self.store,
            tenant_id,
            string_threshold=string_threshold,
            group=group,
            object_threshold=object_threshold,
        )
        super().__init__(PLUGIN_NAME, data_converter=self._data_converter)

    def _data_converter(self, converter: DataConverter | None) -> DataConverter:
        base = converter or DataConverter.default
        if _has(base.payload_codec, self.codec):
            return base
        codec: PayloadCodec = self.codec
        if base.payload_codec is not None:
            codec = ChainedCodec([self.codec, base.payload_codec])
        return dataclasses.replace(base, payload_codec=codec)

    async def aclose(self) -> None:
        await self.store.aclose()


def _has(codec: PayloadCodec | None, ours: ClaimCheckCodec) -> bool:
    if isinstance(codec, ChainedCodec):
        return any(c is ours for c in codec.codecs)
    return codec is ours


class ChainedCodec(PayloadCodec, WithSerializationContext):
    """Codecs in order on encode, in reverse on decode; each gets the serialization context."""

    def __init__(self, codecs: Sequence[PayloadCodec]) -> None:
        self.codecs = list(codecs)

    def with_context(self, context: SerializationContext) -> Self:
        return type(self)(
            [
                c.with_context(context) if isinstance(c, WithSerializationContext) else c
                for c in self.codecs
            ]
        )

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in self.codecs:
            out = await codec.encode(out)
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in reversed(self.codecs):
            out = await codec.decode(out)
        return out
