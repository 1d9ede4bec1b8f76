"""The sans-IO server connection driven with bytes: requests decoded with the right header version,
the KIP-511 downgrade, SASL v0 raw tokens, throttle time in the response, and garbage (truncated frames,
unknown API, bad version, oversized length, undecodable bodies) as events, never an exception.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkalite.protocol.messages  # noqa: F401
from kafkalite.protocol.client_connection import ClientConnection
from kafkalite.protocol.schema import APIS, Api
from kafkalite.protocol.server_connection import (
    AnsweredByConnection,
    ConnectionState,
    ProtocolViolation,
    RequestReceived,
    SaslTokenReceived,
    ServerConnection,
    SlicedResponse,
)


@dataclass(frozen=True)
class Served:
    api: Api
    min_version: int
    max_version: int
    decode_request: Callable[[bytes | bytearray, int, int], Any] | None = None
    encode_response: Callable[[bytearray, Any, int], None] | None = None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class Apis:
    def __init__(self, *served: Served) -> None:
        self.served = {s.api.key: s for s in served}

    def get(self, key: int) -> Served | None:
        return self.served.get(key)

    def api_versions_response(self, error_code: int = 0) -> Any:
        av = APIS[18].response
        return av(
            error_code=error_code,
            api_keys=[
                av.ApiVersion(api_key=k, min_version=s.min_version, max_version=s.max_version)
                for k, s in sorted(self.served.items())
            ],
            throttle_time_ms=0,
        )


APIS_SERVED = Apis(Served(APIS[18], 0, 3), Served(APIS[3], 0, 12), Served(APIS[1], 4, 16))


def _server(max_frame: int = 1 << 20) -> ServerConnection[Served]:
    return ServerConnection(APIS_SERVED, max_frame)


def _request(key: int, version: int, body: Any, client_id: str | None = "me") -> bytes:
    _corr, frame = ClientConnection(client_id).send_request(body, version)
    return bytes(frame)


def _events(server: ServerConnection[Served], data: bytes) -> list[Any]:
    server.receive_data(data)
    out = []
    while (event := server.next_event()) is not None:
        out.append(event)
    return out


def test_a_request_split_over_reads_is_decoded_with_its_header() -> None:
    s = _server()
    frame = _request(3, 12, APIS[3].request(topics=None, allow_auto_topic_creation=False))
    assert _events(s, frame[:3]) == []
    assert _events(s, frame[3:10]) == []
    [event] = _events(s, frame[10:])
    assert isinstance(event, RequestReceived)
    assert (event.api_key, event.api_version, event.correlation_id) == (3, 12, 1)
    assert event.header.client_id == "me" and event.flexible
    assert event.body.allow_auto_topic_creation is False
    assert event.served.api.key == 3


@pytest.mark.parametrize("version", [0, 9, 12])
def test_responses_carry_the_request_header_version_and_round_trip(version: int) -> None:
    s = _server()
    client = ClientConnection("me")
    _corr, frame = client.send_request(APIS[3].request(topics=[]), version)
    [event] = _events(s, bytes(frame))
    assert isinstance(event, RequestReceived)
    body = APIS[3].response(brokers=[], topics=[], cluster_id="c", controller_id=1)
    [out] = s.send_response(event, body, throttle_ms=250)
    [resp] = client.receive_data(bytes(out))
    assert resp.body.cluster_id == ("c" if version >= 2 else None)
    assert resp.body.throttle_time_ms == (250 if version >= 3 else 0)
    assert body.throttle_time_ms == 250  # set on the response object, before encoding


def test_api_versions_answers_with_header_v0_even_when_flexible() -> None:
    s = _server()
    client = ClientConnection("me")
    _corr, frame = client.send_request(APIS[18].request(), 3)
    [event] = _events(s, bytes(frame))
    assert isinstance(event, RequestReceived) and event.flexible
    [out] = s.send_response(event, APIS_SERVED.api_versions_response())
    [resp] = client.receive_data(bytes(out))  # the client expects header v0
    assert resp.body.error_code == 0


def test_kip511_an_api_versions_newer_than_served_gets_v0_unsupported_version() -> None:
    s = _server()
    head = struct.pack(">hhi", 18, 7, 42) + b"\x00\x02me\x00" + b"garbage-of-a-future-version"
    [event] = _events(s, struct.pack(">i", len(head)) + head)
    assert isinstance(event, AnsweredByConnection) and event.correlation_id == 42
    (corr,) = struct.unpack_from(">i", event.data, 4)
    assert corr == 42
    body = APIS[18].response.decode(bytes(event.data[8:]), 0, 0)
    assert body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (1, 4, 16),
        (3, 0, 12),
        (18, 0, 3),
    ]
    assert s.state is ConnectionState.OPEN  # the client goes on at a version we serve


def test_an_undecodable_api_versions_gets_invalid_request_at_v0() -> None:
    s = _server()
    head = struct.pack(">hhi", 18, 3, 7) + b"\x00\x02me\x00" + b"\x05ab"  # a truncated string
    [event] = _events(s, struct.pack(">i", len(head)) + head)
    assert isinstance(event, AnsweredByConnection)
    assert APIS[18].response.decode(bytes(event.data[8:]), 0, 0).error_code == 42


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (_frame(b"\x00\x03\x00"), "shorter than a header"),
        (_frame(struct.pack(">hhi", 999, 0, 1)), "unsupported request api_key=999 version=0"),
        (_frame(struct.pack(">hhi", 3, 13, 1) + b"\x00\x00\x00"), "api_key=3 version=13"),
        (_frame(struct.pack(">hhi", 1, 2, 1)), "api_key=1 version=2"),
        (_frame(struct.pack(">hhi", 3, 1, 5) + b"\x00\x02me" + b"\x00\x00"), "cannot decode"),
        (struct.pack(">i", -5) + b"xx", "negative frame length"),
        (struct.pack(">i", 1 << 30), "larger than the limit"),
    ],
)
def test_garbage_becomes_a_protocol_violation(data: bytes, reason: str) -> None:
    s = _server()
    [event] = _events(s, data)
    assert isinstance(event, ProtocolViolation) and reason in event.reason
    assert s.state is ConnectionState.ERROR
    assert s.next_event() is None


def test_an_oversized_frame_says_its_size_and_the_limit() -> None:
    s = _server(max_frame=1000)
    [event] = _events(s, struct.pack(">i", 5000))
    assert isinstance(event, ProtocolViolation) and event.frame_too_large is not None
    assert (event.frame_too_large.size, event.frame_too_large.limit) == (5000, 1000)


def test_a_truncated_frame_waits_for_more_bytes() -> None:
    s = _server()
    frame = _request(3, 1, APIS[3].request(topics=[]))
    assert _events(s, frame[:-1]) == []
    assert s.decoder.bytes_needed == 1


def test_the_admit_gate_refuses_before_anything_else_is_read() -> None:
    s = _server()
    frame = _request(3, 1, APIS[3].request(topics=[]))[4:]
    event = s.read_frame(frame, lambda key: f"api {key} not allowed yet")
    assert isinstance(event, ProtocolViolation) and event.refused
    assert event.reason == "api 3 not allowed yet" and event.api_key == 3


def test_sasl_v0_raw_tokens_are_bare_frames_both_ways() -> None:
    s = _server()
    s.start_raw_tokens()
    [event] = _events(s, _frame(b"\x00user\x00secret"))
    assert event == SaslTokenReceived(b"\x00user\x00secret")
    assert s.send_sasl_token(b"ok") == b"\x00\x00\x00\x02ok"
    s.end_raw_tokens()
    [event] = _events(s, _request(3, 1, APIS[3].request(topics=[])))
    assert isinstance(event, RequestReceived)


def test_a_hand_written_decoder_and_encoder_are_used_and_can_be_bypassed() -> None:
    calls: list[str] = []

    def decode(buf: bytes | bytearray, pos: int, version: int) -> Any:
        calls.append("decode")
        return None  # the schema decodes it

    def encode(out: bytearray, response: Any, version: int) -> None:
        calls.append("encode")
        response.encode_into(out, version)

    s = ServerConnection(Apis(Served(APIS[3], 0, 12, decode, encode)))
    [event] = _events(s, _request(3, 1, APIS[3].request(topics=[])))
    assert isinstance(event, RequestReceived)
    body = APIS[3].response(brokers=[], topics=[])
    s.send_response(event, body)
    s.send_response(event, body, hand_encoded=False)
    assert calls == ["decode", "encode"]


class Region:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.fileno = -1
        self.position = 0
        self.length = len(data)

    def read_bytes(self) -> bytes:
        return self.data


@pytest.mark.parametrize("version", [4, 12])
def test_a_sliced_fetch_answer_splices_its_file_regions(version: int) -> None:
    s = _server()
    client = ClientConnection("me")
    fetch = APIS[1].request
    _corr, frame = client.send_request(
        fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, topics=[]), version
    )
    [event] = _events(s, bytes(frame))
    assert isinstance(event, RequestReceived)
    resp_cls = APIS[1].response
    topic = resp_cls.FetchableTopicResponse  # type: ignore[attr-defined]
    sliced = SlicedResponse(None)
    records = os.urandom(300)
    part = topic.PartitionData(partition_index=0, high_watermark=5, last_stable_offset=5)
    part.records = sliced.placeholder(Region(records))
    sliced.response = resp_cls(
        responses=[topic(topic="t", topic_id=b"\x00" * 16, partitions=[part])]
    )
    pieces = s.send_response(event, sliced, throttle_ms=9)
    wire = b"".join(x if isinstance(x, bytes | bytearray) else x.read_bytes() for x in pieces)
    [resp] = client.receive_data(wire)
    assert resp.body.throttle_time_ms == 9
    assert resp.body.responses[0].partitions[0].records == records


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(min_value=0, max_value=3))
def test_any_bytes_give_events_never_an_exception(data: bytes, cut: int) -> None:
    s = _server(max_frame=4096)
    for chunk in (data[:cut], data[cut:], _frame(data), _frame(data[:2] + b"\x00" + data)):
        s.receive_data(chunk)
        while (event := s.next_event()) is not None:
            assert isinstance(event, RequestReceived | AnsweredByConnection | ProtocolViolation)
