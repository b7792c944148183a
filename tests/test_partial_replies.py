"""The client side of the token-delta contract (workers/client/watch/partial_replies.py): per
step, the partial text of the highest (attempt, send) seen; the committed item replaces it."""

from __future__ import annotations

from durable_agents.workers.client.watch.partial_replies import (
    MAX_PARTIAL_CHARS,
    Delta,
    PartialReplies,
)


def take(replies: PartialReplies, *deltas: tuple[int, int, int, int, str]) -> list[bool]:
    return [replies.add(Delta(*d)) for d in deltas]


def test_text_accumulates_per_step_in_seq_order() -> None:
    replies = PartialReplies()
    take(replies, (1, 1, 0, 0, "Hel"), (2, 1, 0, 0, "Other"), (1, 1, 0, 1, "lo"))
    assert replies.texts() == {1: "Hello", 2: "Other"}


def test_a_higher_attempt_or_send_drops_the_lower_ones_text() -> None:
    replies = PartialReplies()
    take(replies, (1, 1, 0, 0, "first try"), (1, 1, 1, 0, "re-sent"))
    assert replies.texts() == {1: "re-sent"}  # a re-send after a context overflow
    take(replies, (1, 2, 0, 0, "retried"))
    assert replies.texts() == {1: "retried"}  # attempt 2 outranks attempt 1's send 1


def test_a_lower_attempts_late_delta_and_a_repeated_seq_are_ignored() -> None:
    replies = PartialReplies()
    assert take(
        replies, (1, 2, 0, 0, "new"), (1, 1, 0, 5, "old"), (1, 2, 0, 0, "new"), (1, 2, 0, 1, "!")
    ) == [True, False, False, True]
    assert replies.texts() == {1: "new!"}


def test_a_gap_shows_what_came_and_the_commit_replaces_it() -> None:
    replies = PartialReplies()
    take(replies, (3, 1, 0, 0, "a"), (3, 1, 0, 4, "e"))  # 1-3 missed while reconnecting
    assert replies.texts() == {3: "ae"}
    assert replies.commit(3) is True and replies.texts() == {}
    assert replies.commit(3) is False


def test_partial_text_is_bounded() -> None:
    replies = PartialReplies()
    take(replies, (1, 1, 0, 0, "x" * MAX_PARTIAL_CHARS), (1, 1, 0, 1, "more"))
    assert len(replies.texts()[1]) == MAX_PARTIAL_CHARS


def test_only_well_formed_deltas_parse() -> None:
    good = '{"step": 1, "attempt": 2, "send": 0, "seq": 3, "text": "hi"}'
    assert Delta.parse(good) == Delta(1, 2, 0, 3, "hi")
    for bad in (
        "not json",
        "[]",
        '{"step": 1, "attempt": 2, "send": 0, "seq": 3}',
        '{"step": "1", "attempt": 2, "send": 0, "seq": 3, "text": "hi"}',
        '{"step": 1, "attempt": true, "send": 0, "seq": 3, "text": "hi"}',
        '{"step": 1, "attempt": 2, "send": -1, "seq": 3, "text": "hi"}',
        '{"step": 1, "attempt": 2, "send": 0, "seq": 3, "text": 5}',
    ):
        assert Delta.parse(bad) is None, bad
