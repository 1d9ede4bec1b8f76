"""Restart durability with a broker subprocess: after SIGTERM, and after SIGKILL with
log.flush.interval.messages=1, everything acknowledged is readable and offsets continue."""

from __future__ import annotations

import signal
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def produce_acked(
    bs: str, topic: str, values: list[bytes], partitions: int = 1
) -> list[tuple[int, int]]:
    acked: list[tuple[int, int]] = []
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2})
    for i, v in enumerate(values):
        p.produce(
            topic,
            value=v,
            partition=i % partitions,
            on_delivery=lambda e, m: (
                acked.append((m.partition(), m.offset())) if e is None else None
            ),
        )
        if i % 100 == 0:
            p.poll(0)
    p.flush(30)
    return acked


def read_all(
    bs: str, topic: str, partitions: int = 1, timeout: float = 30
) -> dict[int, list[tuple[int, bytes]]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "r", "enable.auto.commit": False})
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while any(len(out[p]) < ends[p] for p in out) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out[m.partition()].append((m.offset(), m.value()))
    finally:
        c.close()
    return out


@pytest.mark.parametrize(
    ("sig", "overrides"),
    [(signal.SIGTERM, ()), (signal.SIGKILL, ("log.flush.interval.messages=1",))],
    ids=["sigterm", "sigkill-flush-every-message"],
)
def test_acknowledged_records_survive_restart(tmp_path, sig, overrides, spawn_broker, port):
    data = tmp_path / "data"
    data.mkdir()
    broker = spawn_broker(data, port, "num.partitions=3", *overrides).start()
    try:
        values = [b"v%05d" % i for i in range(3000)]
        acked = produce_acked(broker.bootstrap_servers, "durable", values, partitions=3)
        assert len(acked) == len(values)
        rc = broker.stop(sig)
        if sig == signal.SIGTERM:
            assert rc == 0
        broker = spawn_broker(data, port, "num.partitions=3", *overrides).start()
        got = read_all(broker.bootstrap_servers, "durable", partitions=3)
        for part, offset in acked:
            assert offset < len(got[part])
            assert got[part][offset][0] == offset
        assert sum(len(v) for v in got.values()) == len(values)
        expect = {p: [v for i, v in enumerate(values) if i % 3 == p] for p in range(3)}
        assert {p: [v for _, v in got[p]] for p in got} == expect
        more = produce_acked(broker.bootstrap_servers, "durable", [b"after"] * 3, partitions=3)
        assert sorted(more) == [(0, 1000), (1, 1000), (2, 1000)]
    finally:
        broker.kill_quietly()


def test_cluster_id_and_topic_id_persist(tmp_path, spawn_broker, port):
    from confluent_kafka.admin import AdminClient

    data = tmp_path / "data"
    data.mkdir()
    broker = spawn_broker(data, port).start()
    try:
        produce_acked(broker.bootstrap_servers, "ids", [b"x"])
        md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
        cid = md.cluster_id
        props = (data / "meta.properties").read_text()
        assert f"cluster.id={cid}" in props
        broker.stop(signal.SIGTERM)
        broker = spawn_broker(data, port).start()
        md2 = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
        assert md2.cluster_id == cid
        assert "ids" in md2.topics
    finally:
        broker.kill_quietly()
