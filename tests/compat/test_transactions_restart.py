"""Transactions across a broker crash (single node): SIGKILL while a transaction is open, restart, and a
new instance of the producer fences the old one; read_committed sees every committed record exactly once
and never the open one's. A producer SIGKILLed mid-transaction is aborted by the coordinator's timeout."""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


def _read_all(bs: str, topic: str, isolation: str, expect: int, timeout: float = 30) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"r-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    quiet_since = None
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                if len(out) >= expect:
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since > 1.0:
                        break
                continue
            out.append(m.value())
    finally:
        c.close()
    return out


def _report(acked: list[bytes], seen: list[bytes]) -> tuple[int, int]:
    counts = collections.Counter(seen)
    lost = sum(1 for v in acked if counts[v] == 0)
    dup = sum(n - 1 for n in counts.values() if n > 1)
    print(f"acknowledged {len(acked)}, lost {lost}, duplicated {dup}, read {len(seen)}")
    return lost, dup


def _producer(bs: str, txn_id: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 2, **conf})
    p.init_transactions(60)
    return p


def test_broker_sigkill_mid_transaction_loses_no_commit_and_shows_no_abort(
    tmp_path: Path, spawn_broker: Any, port: int
) -> None:
    broker = spawn_broker(tmp_path / "data", port).start()
    bs = broker.bootstrap_servers
    topic = "txn-crash"
    txn_id = "crash-producer"
    p = _producer(bs, txn_id)
    acked: list[bytes] = []
    for t in range(5):
        p.begin_transaction()
        batch = [b"c-%d-%d" % (t, j) for j in range(10)]
        for v in batch:
            p.produce(topic, value=v, partition=0)
        p.commit_transaction(30)
        acked += batch
    p.begin_transaction()
    for j in range(10):
        p.produce(topic, value=b"open-%d" % j, partition=0)
    p.flush(30)
    broker.stop(signal.SIGKILL)
    broker.start()
    # the restarted coordinator loads the open transaction; a new instance fences it and aborts it
    p2 = _producer(bs, txn_id)
    p2.begin_transaction()
    batch = [b"after-%d" % j for j in range(10)]
    for v in batch:
        p2.produce(topic, value=v, partition=0)
    p2.commit_transaction(30)
    acked += batch
    seen = _read_all(bs, topic, "read_committed", len(acked))
    lost, dup = _report(acked, seen)
    assert (lost, dup) == (0, 0)
    assert not any(v.startswith(b"open-") for v in seen)
    assert len(seen) == len(acked)
    everything = _read_all(bs, topic, "read_uncommitted", len(acked) + 10)
    assert sum(v.startswith(b"open-") for v in everything) == 10  # there, but aborted
    broker.stop(signal.SIGTERM)


_KILLED_PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                  "transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(50):
        p.produce(sys.argv[3], value=b"orphan-%d" % i, partition=0)
    p.flush(30)
    print("open", flush=True)
    time.sleep(600)
    """
)


def test_a_sigkilled_producers_transaction_is_aborted_after_its_timeout(
    tmp_path: Path, spawn_broker: Any, port: int
) -> None:
    broker = spawn_broker(
        tmp_path / "data",
        port,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
    ).start()
    bs = broker.bootstrap_servers
    topic = "txn-orphan"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_PRODUCER, bs, "orphan-txn", topic],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"open"
    finally:
        child.kill()
        child.wait(10)
    # a committed write after the orphan's records: read_committed sees it only once the orphan ends
    p = _producer(bs, "survivor")
    p.begin_transaction()
    p.produce(topic, value=b"committed", partition=0)
    p.commit_transaction(30)
    seen = _read_all(bs, topic, "read_committed", 1, timeout=20)
    assert seen == [b"committed"]
    broker.stop(signal.SIGTERM)
