"""Hostile bytes from raw sockets while a well-behaved librdkafka producer keeps producing: the broker keeps
serving it, answers or closes each bad connection, and no log is damaged."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.compat


def closed_or_answered(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Read until the broker closes the connection; returns whatever it sent first."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def raw(broker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=5)


def header(key: int, version: int, corr: int = 1, client: bytes = b"bad") -> bytes:
    return struct.pack(">hhih", key, version, corr, len(client)) + client


def test_hostile_input_while_good_client_produces(broker, topic):
    stop = threading.Event()
    errors: list = []
    acked: list[int] = []

    def good() -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1, "acks": "all"})
        i = 0
        while not stop.is_set():
            p.produce(
                topic,
                value=b"good-%06d" % i,
                on_delivery=lambda e, m: errors.append(e) if e else acked.append(m.offset()),
            )
            i += 1
            p.poll(0.001)
        p.flush(30)

    t = threading.Thread(target=good)
    t.start()
    try:
        time.sleep(0.3)
        # 1. garbage frames
        for _ in range(20):
            s = raw(broker)
            s.sendall(struct.pack(">i", 64) + os.urandom(64))
            closed_or_answered(s)
            s.close()
        # 2. truncated frame: declared 1000 bytes, sends 10, hangs up
        s = raw(broker)
        s.sendall(struct.pack(">i", 1000) + b"x" * 10)
        s.close()
        # 3. 2 GiB declared length: closed without reading it
        s = raw(broker)
        s.sendall(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16)
        assert closed_or_answered(s) == b""
        s.close()
        # 4. negative length
        s = raw(broker)
        s.sendall(struct.pack(">i", -5))
        assert closed_or_answered(s) == b""
        s.close()
        # 5. unknown API key and unknown version of a known API: connection closed
        for key, ver in ((999, 0), (0, 99), (1, 200)):
            s = raw(broker)
            body = header(key, ver)
            s.sendall(struct.pack(">i", len(body)) + body)
            assert closed_or_answered(s) == b""
            s.close()
        # 6. ApiVersions at an unknown version: KIP-511 answer (v0, UNSUPPORTED_VERSION) and the ranges
        s = raw(broker)
        body = header(18, 99, corr=77)
        s.sendall(struct.pack(">i", len(body)) + body)
        s.settimeout(5)
        size = struct.unpack(">i", s.recv(4))[0]
        resp = b""
        while len(resp) < size:
            resp += s.recv(size - len(resp))
        corr, err = struct.unpack(">ih", resp[:6])
        assert (corr, err) == (77, ErrorCode.UNSUPPORTED_VERSION)
        decoded = APIS[18].response.decode(resp, 0, 4)
        assert any(k.api_key == 18 for k in decoded.api_keys)
        s.close()
        # 7. a corrupt batch (CRC mismatch) is answered CORRUPT_MESSAGE and not appended
        bad_topic = topic + "-corrupt"
        blob = bytearray(build_batch([(b"k", b"v")]))
        blob[-1] ^= 0xFF
        with WireClient(broker.bootstrap_servers) as c:
            c.metadata([bad_topic], auto_create=True)
            cls = APIS[0].request
            td = cls.TopicProduceData(
                name=bad_topic,
                partition_data=[
                    cls.TopicProduceData.PartitionProduceData(index=0, records=bytes(blob))
                ],
            )
            resp = c.send(cls(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[td]))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
            # the same connection still works afterwards
            ok = c.send(
                cls(
                    transactional_id=None,
                    acks=1,
                    timeout_ms=5000,
                    topic_data=[
                        cls.TopicProduceData(
                            name=bad_topic,
                            partition_data=[
                                cls.TopicProduceData.PartitionProduceData(
                                    index=0, records=build_batch([(b"k", b"fine")])
                                )
                            ],
                        )
                    ],
                )
            )
            assert ok.responses[0].partition_responses[0].error_code == 0
            assert ok.responses[0].partition_responses[0].base_offset == 0
        # 8. a request body that does not decode: closed
        s = raw(broker)
        body = header(3, 1) + b"\xff\xff\xff\x7f"  # Metadata v1 with a huge topic array count
        s.sendall(struct.pack(">i", len(body)) + body)
        assert closed_or_answered(s) == b""
        s.close()
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(60)
    assert not errors
    assert len(acked) > 50
    assert sorted(acked) == list(range(len(acked)))
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "x",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(acked) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"good-%06d" % i for i in range(len(acked))]
        assert c.get_watermark_offsets(TopicPartition(topic + "-corrupt", 0), timeout=10) == (0, 1)
    finally:
        c.close()
