"""The claim check's rewriting of JSON values (workers/peers/claim_check_tree.py), service-free:
whatever the value, restoring what encoding wrote gives it back; a conversation that only
grows stores each earlier part once; its references stay small however long it gets."""

from __future__ import annotations

import random
from typing import Any

import pytest

from durable_agents.workers.peers.claim_check_tree import (
    Encoder,
    MarkerCollision,
    dumps,
    missing,
    restore,
)


def encoder() -> Encoder:
    return Encoder(string_threshold=256, object_threshold=128, group=4)


def roundtrip(value: Any, enc: Encoder) -> Any:
    encoded = enc.encode(value)
    # Through JSON, as a history would carry it.
    import json

    encoded = json.loads(dumps(encoded))
    stored = {t: b.data for t, b in enc.blobs.items()}
    strings: dict[str, str] = {}
    parsed: dict[str, Any] = {}
    while needed := missing(encoded, strings, parsed):
        for kind, tok in needed:
            if kind == "s":
                strings[tok] = stored[tok].decode()
            else:
                parsed[tok] = json.loads(stored[tok])
    return restore(encoded, strings, parsed)


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["str", "big", "int", "list", "dict", "none"] if depth < 4 else ["str"])
    if kind == "str":
        return "".join(rng.choice('aé"\\\n{}$') for _ in range(rng.randint(0, 40)))
    if kind == "big":
        return "x" * rng.randint(200, 700) + str(rng.random())
    if kind == "int":
        return rng.randint(-5, 5)
    if kind == "none":
        return None
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 13))]
    return {f"k{i}": random_value(rng, depth + 1) for i in range(rng.randint(0, 6))}


@pytest.mark.parametrize("seed", range(40))
def test_restoring_what_was_encoded_gives_the_value_back(seed: int) -> None:
    value = random_value(random.Random(seed))
    assert roundtrip(value, encoder()) == value


def conversation(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "call_id": f"c{i}", "output": f"result {i} " + "r" * 1000}
        for i in range(n)
    ]


def test_a_growing_conversation_stores_each_part_once_and_stays_small() -> None:
    seen: dict[str, bytes] = {}
    sizes = []
    for n in range(1, 200):
        enc = encoder()
        encoded = enc.encode({"input": conversation(n), "tools": ["t"] * 3})
        seen.update({t: b.data for t, b in enc.blobs.items()})
        sizes.append(len(dumps(encoded)))
        assert roundtrip(conversation(n), encoder()) == conversation(n)
    stored = sum(len(d) for d in seen.values())
    results = 199 * 1000
    # Each result once, plus the groups' and messages' few references: O(N), not O(N^2).
    assert stored < 1.5 * results, stored
    # A call's references grow like log N, not N.
    assert max(sizes) < 1200, max(sizes)


def test_a_value_that_already_uses_our_marker_is_refused_not_rewritten() -> None:
    with pytest.raises(MarkerCollision):
        encoder().encode({"a": [{"$da": "s1:00"}], "b": "x" * 1000})
