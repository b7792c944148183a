"""ArtifactRef: a verified object in the artifact store, as AgentState and workflow history
refer to it. Owned by storage (which makes and verifies them); durable_agents.workflows.contracts
re-exports it for the payloads that carry one. No I/O here, so the workflow sandbox
imports it cheaply.

A durable contract too: refs sit in Temporal histories as JSON objects of these fields, so
new fields are optional with defaults."""

# No `from __future__ import annotations` in payload modules: the SDK's converter resolves a
# dataclass's field types with typing.get_type_hints on every decode, and string annotations
# are compiled again each time (~100 vs ~45 us a payload; tests/test_old_payloads.py).

from dataclasses import dataclass


@dataclass(frozen=True)
class ArtifactRef:
    """A verified object in the artifact store: content-addressed, so sha256 names it."""

    tenant_id: str
    sha256: str
    key: str
    size_bytes: int
    content_type: str
    artifact_id: str | None = None
