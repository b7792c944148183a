"""The client's Server-Sent Events decoder (workers/client/watch/sse.py) against the cases of the
standard's event stream interpretation that real servers and proxies produce."""

from __future__ import annotations

import pytest

from durable_agents.workers.client.watch.sse import SseDecoder, SseError, SseEvent


def decode(*chunks: str) -> list[SseEvent]:
    decoder = SseDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def test_fields_named_events_and_ids() -> None:
    stream = 'event: status\ndata: {"status":"running"}\n\nid: 3\nevent: item\ndata: {}\n\n'
    assert decode(stream) == [
        SseEvent("status", '{"status":"running"}', None),
        SseEvent("item", "{}", "3"),
    ]


def test_multi_line_data_joins_with_newlines() -> None:
    assert decode("data: one\ndata:two\ndata:  three\ndata\n\n") == [
        SseEvent("message", "one\ntwo\n three\n")
    ]


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_every_line_ending(eol: str) -> None:
    stream = f"id: 7{eol}event: item{eol}data: a{eol}data: b{eol}{eol}"
    assert decode(stream) == [SseEvent("item", "a\nb", "7")]


def test_a_crlf_split_across_chunks_is_one_line_end() -> None:
    # Were the CR taken as a line end on its own, the LF would end the event early.
    assert decode("data: a\r", "\ndata: b\r", "\n\r", "\n") == [SseEvent("message", "a\nb")]


def test_a_field_split_anywhere_across_chunks() -> None:
    stream = 'id: 12\nevent: item\ndata: {"text": "héllo"}\n\n'
    whole = decode(stream)
    for cut in range(1, len(stream)):
        assert decode(stream[:cut], stream[cut:]) == whole, cut
    assert decode(*stream) == whole  # one character at a time


def test_comments_and_heartbeats_dispatch_nothing() -> None:
    assert decode(": ping\n\n:\n\n: ping - 2026-01-01\r\n\r\n") == []
    assert decode("data: a\n: a heartbeat inside an event\ndata: b\n\n") == [
        SseEvent("message", "a\nb")
    ]


def test_the_last_id_stays_in_force_and_a_nul_id_is_ignored() -> None:
    stream = "id: 4\ndata: a\n\nevent: status\ndata: s\n\nid: 5\0x\ndata: b\n\nid\ndata: c\n\n"
    assert [e.id for e in decode(stream)] == ["4", "4", "4", ""]


def test_an_event_cut_off_by_the_end_of_the_stream_is_not_delivered() -> None:
    decoder = SseDecoder()
    assert decoder.feed('id: 9\nevent: item\ndata: {"half":') == []
    assert decoder.last_id == "9"  # the id is taken, the event is not dispatched


def test_unknown_fields_retry_and_a_leading_bom_are_ignored() -> None:
    assert decode("\ufeffretry: 1000\nfoo: bar\ndata: x\n\n") == [SseEvent("message", "x")]
    assert decode("data: \ufeffx\n\n") == [SseEvent("message", "\ufeffx")]  # only the first


def test_a_blank_line_without_data_resets_the_event_type() -> None:
    assert decode("event: delta\n\ndata: x\n\n") == [SseEvent("message", "x")]


def test_an_oversized_event_is_refused_not_buffered() -> None:
    decoder = SseDecoder(max_event_chars=100)
    with pytest.raises(SseError):
        decoder.feed("data: " + "x" * 60 + "\ndata: " + "y" * 60 + "\n")
    with pytest.raises(SseError):
        SseDecoder(max_event_chars=100).feed("data: " + "z" * 200)  # no line end yet
