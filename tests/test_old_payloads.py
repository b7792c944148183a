"""Payloads between our own activities and the loop outlive a deploy: a result written by a
newer worker, with keys this code's dataclass lacks, still decodes (Temporal's converter
ignores them). Only what a caller sends through a door is strict (tests/test_strict_inputs.py).
And every payload dataclass carries real annotations, which the converter reads cheaply."""

from __future__ import annotations

import dataclasses
import json

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter

import durable_agents.vocabulary.artifact_ref
import durable_agents.workflows.client_contracts
import durable_agents.workflows.contracts
from durable_agents.workflows.contracts import ModelCallResult, ToolOutcome


def test_a_result_with_keys_the_dataclass_lacks_decodes_into_the_current_type() -> None:
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
