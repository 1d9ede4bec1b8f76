"""The embedded Broker and its pytest fixture, and zero-copy fetch under both event loops (uvloop and the
stdlib loop), including responses far larger than the socket buffer and pipelined behind other answers."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from broker_wire_helpers import encode_request, read_frame

import kafkalite
from kafkalite.broker.network.connection import SendfileStats
from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch, iter_batches
from kafkalite.testing import Broker, kafkalite_broker  # noqa: F401  (the fixture, imported to use it)

P = APIS[0].request
F = APIS[1].request
MD = APIS[3].request


def test_fixture_gives_a_running_broker(kafkalite_broker):  # noqa: F811
    assert isinstance(kafkalite_broker, kafkalite.Broker)
    with WireClient(kafkalite_broker.bootstrap_servers) as c:
        assert 18 in c.versions
    assert kafkalite_broker.bootstrap_servers.startswith("127.0.0.1:")


@pytest.mark.parametrize("use_uvloop", [True, False], ids=["uvloop", "asyncio"])
def test_large_pipelined_fetches_use_sendfile_and_stay_ordered(tmp_path, use_uvloop):
    with (
        Broker(tmp_path, use_uvloop=use_uvloop, message_max_bytes=8 << 20) as b,
        WireClient(b.bootstrap_servers) as c,
    ):
        c.metadata(["big"], auto_create=True)
        batches = [
            build_batch([(None, bytes([i]) * 1_000_000) for _ in range(3)]) for i in range(4)
        ]
        for blob in batches:
            td = P.TopicProduceData(
                name="big",
                partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=blob)],
            )
            assert (
                c.send(P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[td]))
                .responses[0]
                .partition_responses[0]
                .error_code
                == 0
            )
        before = SendfileStats.bytes
        frames = []
        for corr, offset in enumerate((0, 3, 6, 9)):
            ft = F.FetchTopic(
                topic="big",
                partitions=[
                    F.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1
                    )
                ],
            )
            frames.append(
                encode_request(
                    F(
                        replica_id=-1,
                        max_wait_ms=0,
                        min_bytes=1,
                        max_bytes=64 << 20,
                        topics=[ft],
                        forgotten_topics_data=[],
                    ),
                    11,
                    10 + corr,
                )
            )
            frames.append(
                encode_request(MD(topics=[]), 1, 100 + corr)
            )  # small answers between the big ones
        with socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall(b"".join(frames))
            answers = [read_frame(s) for _ in frames]
        corrs = [struct.unpack(">i", a[:4])[0] for a in answers]
        assert corrs == [10, 100, 11, 101, 12, 102, 13, 103]
        for i, a in enumerate(answers[::2]):
            resp = APIS[1].response.decode(a, 11, 4)
            recs = resp.responses[0].partitions[0].records
            assert {r.value for bt in iter_batches(recs) for r in bt.records} == {
                bytes([i]) * 1_000_000
            }
        assert SendfileStats.bytes - before >= 12_000_000


def test_backpressure_with_an_unread_socket(tmp_path):
    with Broker(tmp_path) as b, socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
        frames = b"".join(encode_request(MD(topics=[]), 1, i) for i in range(5000))
        s.sendall(
            frames
        )  # far more than the 64-request queue bound at once: all answered, in order
        got = [struct.unpack(">i", read_frame(s)[:4])[0] for _ in range(5000)]
        assert got == list(range(5000))
        assert not b.server.connections or all(not c._reading_paused for c in b.server.connections)


def test_unknown_fetch_session_is_refused(kafkalite_broker):  # noqa: F811
    with WireClient(kafkalite_broker.bootstrap_servers) as c:
        resp = c.send(
            F(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                session_id=12345,
                session_epoch=1,
                topics=[],
                forgotten_topics_data=[],
            ),
            version=11,
        )
        assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and resp.session_id == 0


@pytest.mark.parametrize("use_uvloop", [True, False], ids=["uvloop", "asyncio"])
def test_sendfile_waits_for_buffered_bytes_before_it(tmp_path, use_uvloop):
    """A down-converted (buffered) answer of megabytes, then a sendfile answer: bytes stay in order."""
    with (
        Broker(tmp_path, use_uvloop=use_uvloop, message_max_bytes=8 << 20) as b,
        WireClient(b.bootstrap_servers) as c,
    ):
        c.metadata(["mix"], auto_create=True)
        blob = build_batch([(None, b"m" * 1_000_000) for _ in range(3)])
        td = P.TopicProduceData(
            name="mix",
            partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=blob)],
        )
        c.send(P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[td]))
        ft = F.FetchTopic(
            topic="mix",
            partitions=[
                F.FetchTopic.FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=8 << 20
                )
            ],
        )
        frames = [
            encode_request(
                F(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=64 << 20,
                    topics=[ft],
                    forgotten_topics_data=[],
                ),
                3,
                1,
            ),
            encode_request(
                F(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=64 << 20,
                    topics=[ft],
                    forgotten_topics_data=[],
                ),
                11,
                2,
            ),
        ]
        before = SendfileStats.calls
        with socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
            s.sendall(b"".join(frames))
            time.sleep(0.5)  # let the broker fill the socket and its transport buffer first
            first, second = read_frame(s), read_frame(s)
        old = APIS[1].response.decode(first, 3, 4).responses[0].partitions[0].records
        new = APIS[1].response.decode(second, 11, 4).responses[0].partitions[0].records
        assert [r.value for bt in iter_batches(old) for r in bt.records] == [b"m" * 1_000_000] * 3
        assert [r.value for bt in iter_batches(new) for r in bt.records] == [b"m" * 1_000_000] * 3
        assert SendfileStats.calls > before
