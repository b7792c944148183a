"""What a device may say about a call's effect: only how a call settles (storage's
EffectState, the one list of them), never a state the ledger keeps for itself."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from durable_agents.storage.tool_effects import SETTLED, EffectState
from durable_agents.workers.gateway.device_models import Completion


@pytest.mark.parametrize("effect", list(SETTLED))
def test_a_settled_effect_is_accepted(effect: EffectState) -> None:
    assert Completion.model_validate({"effect": effect.value}).effect == effect


@pytest.mark.parametrize("effect", ["started", "retrying", "done", ""])
def test_any_other_effect_is_refused_naming_the_choices(effect: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Completion.model_validate({"effect": effect})
    assert "completed" in str(refused.value)
