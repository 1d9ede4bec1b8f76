"""After a crash, a single node with many logs to recover serves those already recovered while the
rest load: checked with confluent-kafka against a broker whose recovery of one topic is held back.
That topic's partitions have no leader until then (LEADER_NOT_AVAILABLE), a producer's record to it
waits and is delivered once it is recovered, and every record is read back at its offset."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkalite.broker import server as server_module
from kafkalite.storage.log_manifest import MANIFEST_FILE
from kafkalite.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager
from kafkalite.testing import Broker

QUIET = {"log_level": 0}


def _produce(bs: str, topic: str, values: list[bytes], partition: int, **extra: Any) -> list[Any]:
    delivered: list[Any] = []
    p = Producer({"bootstrap.servers": bs, "acks": "all", **QUIET, **extra})
    for v in values:
        p.produce(topic, v, partition=partition, on_delivery=lambda e, m: delivered.append((e, m)))
    assert p.flush(30) == 0
    return delivered


def _read(bs: str, topic: str, partition: int, n: int) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic}", **QUIET})
    c.assign([TopicPartition(topic, partition, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    c.close()
    return got


def test_recovered_partitions_serve_while_the_others_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "data"
    with Broker(d, num_partitions=2) as b:
        b.create_topic("fast", 2)
        b.create_topic("slow", 2)
        for topic in ("fast", "slow"):
            delivered = _produce(
                b.bootstrap_servers, topic, [b"%s-%d" % (topic.encode(), i) for i in range(5)], 1
            )
            assert all(e is None for e, _ in delivered)
    (d / CLEAN_SHUTDOWN_FILE).unlink()  # as a crash leaves it: every log is recovered from files
    (d / MANIFEST_FILE).unlink()

    release = threading.Event()
    load_job = LogManager._load_job

    def held(self: LogManager, job: Any) -> Any:
        if job[1][0] == "slow":
            assert release.wait(60)
        return load_job(self, job)

    monkeypatch.setattr(LogManager, "_load_job", held)
    monkeypatch.setattr(server_module, "SERVE_WHILE_RECOVERING_FROM", 1)
    with Broker(d) as b:
        try:
            _while_recovering(b, release)
        finally:
            release.set()


def _while_recovering(b: Broker, release: threading.Event) -> None:
    bs = b.bootstrap_servers
    me = b.server.broker_id
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    deadline = time.monotonic() + 10
    while True:  # (recovered logs are taken up every tenth of a second)
        md = admin.list_topics(timeout=10)
        if md.topics["fast"].partitions[1].leader == me or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [md.topics["fast"].partitions[p].leader for p in (0, 1)] == [me, me]
    slow = md.topics["slow"].partitions
    assert [slow[p].leader for p in (0, 1)] == [-1, -1]
    assert slow[1].error is not None and slow[1].error.name() == "LEADER_NOT_AVAILABLE"
    # the recovered topic serves: its records, and new ones, at their offsets
    assert _read(bs, "fast", 1, 5) == [(i, b"fast-%d" % i) for i in range(5)]
    assert all(e is None for e, _ in _produce(bs, "fast", [b"fast-5"], 1))
    # a record for the held topic waits for its leader, then lands after the recovered ones
    waiting: list[Any] = []
    p = Producer({"bootstrap.servers": bs, "acks": "all", "message.timeout.ms": 30000, **QUIET})
    p.produce("slow", b"slow-5", partition=1, on_delivery=lambda e, m: waiting.append((e, m)))
    p.poll(2.0)
    assert waiting == []
    release.set()
    assert p.flush(30) == 0
    assert waiting[0][0] is None and waiting[0][1].offset() == 5
    assert _read(bs, "slow", 1, 6) == [(i, b"slow-%d" % i) for i in range(6)]
    assert _read(bs, "fast", 1, 6)[-1] == (5, b"fast-5")
    deadline = time.monotonic() + 10
    while b.server.log_manager.loading_partitions() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not b.server.log_manager.loading_partitions()
    md = AdminClient({"bootstrap.servers": bs, **QUIET}).list_topics(timeout=10)
    assert [md.topics["slow"].partitions[p].leader for p in (0, 1)] == [me, me]
