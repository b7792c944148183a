"""Payloads recorded before a field was removed still decode: Temporal's converter ignores
keys a dataclass no longer has. The recorded histories (replayed by test_replay.py) carry
such fields; this checks they still do, so that replay keeps covering them."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter

import durable_agents.vocabulary.artifact_ref
import durable_agents.workflows.client_contracts
import durable_agents.workflows.contracts
from durable_agents.workflows.contracts import ModelCallResult, ToolOutcome

HISTORIES = Path(__file__).parent / "histories"
# Fields removed from payload dataclasses; recorded histories still hold them.
REMOVED = {"finished", "finish_reason", "is_error"}


def payload_objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object payload in a history exported as JSON."""
    if isinstance(node, dict):
        data = node.get("data")
        if isinstance(data, str) and node.get("metadata", {}).get("encoding"):
            try:
                value = json.loads(base64.b64decode(data))
            except ValueError:
                value = None
            if isinstance(value, dict):
                yield value
        for child in node.values():
            yield from payload_objects(child)
    elif isinstance(node, list):
        for child in node:
            yield from payload_objects(child)


def test_recorded_histories_carry_the_removed_fields() -> None:
    keys: set[str] = set()
    for path in HISTORIES.glob("*.json"):
        for obj in payload_objects(json.loads(path.read_text())):
            keys |= obj.keys()
    assert keys >= REMOVED


def test_a_result_with_removed_fields_decodes_into_the_current_type() -> None:
    converter = DataConverter.default.payload_converter
    old_model = {"item_id": "i", "ordinal": 3, "finished": True, "finish_reason": "stop"}
    old_tool = {"tool_call_id": "c", "item_id": "i", "ordinal": 4, "is_error": True}
    old_tool["error_type"] = "ToolFailed"
    payloads = [
        Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(o).encode())
        for o in (old_model, old_tool)
    ]
    model, tool = converter.from_payloads(payloads, [ModelCallResult, ToolOutcome])
    assert model == ModelCallResult(item_id="i", ordinal=3)
    assert tool == ToolOutcome("c", "i", 4, error_type="ToolFailed")


def test_payload_dataclasses_carry_real_annotations_not_strings() -> None:
    """Every decode resolves a payload dataclass's field types (typing.get_type_hints);
    string annotations (`from __future__ import annotations`) are compiled again each time,
    which doubled the converter's cost per payload."""
    stringly = [
        f"{module.__name__}.{cls.__name__}.{name}"
        for module in (
            durable_agents.workflows.contracts,
            durable_agents.workflows.client_contracts,
            durable_agents.vocabulary.artifact_ref,
        )
        for cls in vars(module).values()
        if dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__
        for name, annotation in cls.__annotations__.items()
        if isinstance(annotation, str)
    ]
    assert not stringly
