"""Token counting and cutting are memoised; the answers must stay tiktoken's own."""

from __future__ import annotations

from durable_agents.vocabulary.tokens import count_tokens, get_encoding, truncate_to_tokens


def _direct(text: str) -> list[int]:
    return get_encoding("cl100k_base").encode(text, disallowed_special=())


def test_repeated_and_nearly_equal_long_texts_are_counted_exactly() -> None:
    base = "the quick brown fox jumps over the lazy dog " * 40
    variants = [base, base + "x", base + " and then some more words", base[:-1] + "!"]
    for _ in range(2):  # the second round is answered from the cache
        assert [count_tokens(t) for t in variants] == [len(_direct(t)) for t in variants]
    assert len({count_tokens(t) for t in variants}) > 1


def test_cuts_are_the_same_prefix_from_the_cache_and_fit_the_allowance() -> None:
    text = "ünïcödé and ascii words, " * 200
    for limit in (10, 57, 300):
        first, again = truncate_to_tokens(text, limit), truncate_to_tokens(text, limit)
        assert first == again == get_encoding("cl100k_base").decode(_direct(text)[:limit])
        assert count_tokens(first) <= limit
    assert truncate_to_tokens("short", 100) == "short"
