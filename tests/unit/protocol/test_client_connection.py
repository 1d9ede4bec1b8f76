"""The sans-IO client connection: frames out with the right header version and correlation ids,
responses matched in order, and a peer that breaks the protocol puts the connection in ERROR.
"""

from __future__ import annotations

import struct

import pytest

import kafkalite.protocol.messages  # noqa: F401
from kafkalite.protocol.client_connection import (
    ClientConnection,
    ConnectionState,
    ProtocolError,
)
from kafkalite.protocol.headers import decode_request_header, encode_response_header
from kafkalite.protocol.schema import APIS


def _response_frame(corr: int, key: int, version: int, body: object, header_version: int) -> bytes:
    out = bytearray(4)
    encode_response_header(out, corr, header_version)
    body.encode_into(out, version)  # type: ignore[attr-defined]
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def test_requests_get_increasing_correlation_ids_and_flexible_headers() -> None:
    c = ClientConnection("me")
    md = APIS[3].request(topics=None, allow_auto_topic_creation=False)
    corr1, frame1 = c.send_request(md, 12)
    corr2, frame2 = c.send_request(APIS[3].request(topics=None), 1)
    assert (corr1, corr2) == (1, 2) and c.in_flight == 2
    h, _ = decode_request_header(bytes(frame1[4:]), 2)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 12, 1, "me")
    assert struct.unpack_from(">i", frame2)[0] == len(frame2) - 4


def test_responses_are_matched_in_order_even_when_split_across_reads() -> None:
    c = ClientConnection("me")
    av = APIS[18]
    corr, _ = c.send_request(av.request(), 3)
    body = av.response(error_code=0, api_keys=[], throttle_time_ms=0)
    frame = _response_frame(corr, 18, 3, body, 0)  # ApiVersions answers with header v0
    assert c.receive_data(frame[:5]) == []
    [resp] = c.receive_data(frame[5:])
    assert resp.correlation_id == corr and resp.api_key == 18 and resp.body.error_code == 0
    assert c.in_flight == 0


def test_an_unexpected_correlation_id_breaks_the_connection() -> None:
    c = ClientConnection("me")
    av = APIS[18]
    corr, _ = c.send_request(av.request(), 0)
    bad = _response_frame(corr + 5, 18, 0, av.response(error_code=0, api_keys=[]), 0)
    with pytest.raises(ProtocolError, match="correlation id"):
        c.receive_data(bad)
    assert c.state is ConnectionState.ERROR
    with pytest.raises(ProtocolError):
        c.send_request(av.request(), 0)


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff\xff\xff\xff",
        b"\x00\x00\x00\x03abc",
        b"\x00\x00\x00\x08\x00\x00\x00\x01\xff\xff\xff\xff",
    ],
)
def test_garbage_from_the_peer_is_a_protocol_error(garbage: bytes) -> None:
    c = ClientConnection("me")
    c.send_request(APIS[3].request(topics=None), 4)
    with pytest.raises(ProtocolError):
        c.receive_data(garbage)
    assert c.state is ConnectionState.ERROR


def test_a_response_with_nothing_in_flight_is_refused_and_close_reports_the_lost() -> None:
    c = ClientConnection(None)
    with pytest.raises(ProtocolError, match="no request in flight"):
        c.receive_data(b"\x00\x00\x00\x04\x00\x00\x00\x01")
    c2 = ClientConnection(None)
    corr, _ = c2.send_request(APIS[18].request(), 0)
    _, _ = c2.send_request(
        APIS[0].request(acks=0, timeout_ms=1, topic_data=[]), 3, expect_response=False
    )
    assert c2.close() == [corr]
    assert c2.state is ConnectionState.CLOSED


def _produce(value: bytes) -> object:
    req = APIS[0].request
    part = req.TopicProduceData.PartitionProduceData(index=0, records=value)
    return req(
        acks=1, timeout_ms=1000, topic_data=[req.TopicProduceData(name="t", partition_data=[part])]
    )


def test_send_request_parts_passes_large_values_through_and_frames_like_send_request() -> None:
    big = bytes(range(256)) * 64  # 16 KiB: above the splice threshold
    c1, c2 = ClientConnection("me"), ClientConnection("me")
    corr1, whole = c1.send_request(_produce(big), 9)
    corr2, parts = c2.send_request_parts(_produce(big), 9)
    assert corr1 == corr2 == 1 and c2.in_flight == 1
    assert any(part is big for part in parts)  # the record bytes themselves, not a copy
    assert b"".join(parts) == bytes(whole)
    small_corr, small = c2.send_request_parts(APIS[18].request(), 3, expect_response=False)
    assert small_corr == 2 and len(small) == 1 and c2.in_flight == 1


def test_lenient_decoding_ignores_bytes_past_the_known_fields() -> None:
    av = APIS[18]
    frame = bytearray(_response_frame(1, 18, 0, av.response(error_code=0, api_keys=[]), 0))
    frame += b"\x00\x00"  # a newer broker's extra bytes
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    strict, lenient = ClientConnection("me"), ClientConnection("me", exact=False)
    strict.send_request(av.request(), 0)
    lenient.send_request(av.request(), 0)
    [resp] = lenient.receive_data(bytes(frame))
    assert resp.body.error_code == 0 and lenient.state is ConnectionState.OPEN
    with pytest.raises(ProtocolError, match="trailing bytes"):
        strict.receive_data(bytes(frame))


def test_bytes_needed_tells_a_reader_how_much_of_the_response_is_missing() -> None:
    c = ClientConnection("me")
    av = APIS[18]
    c.send_request(av.request(), 0)
    frame = _response_frame(1, 18, 0, av.response(error_code=0, api_keys=[]), 0)
    assert c.bytes_needed == 4
    c.receive_data(frame[:2])
    assert c.bytes_needed == 2
    c.receive_data(frame[2:7])
    assert c.bytes_needed == len(frame) - 7
    [resp] = c.receive_data(frame[7:])
    assert resp.correlation_id == 1 and c.bytes_needed == 4
