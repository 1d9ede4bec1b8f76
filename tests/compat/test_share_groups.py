"""KIP-932 with librdkafka's ShareConsumer (confluent-kafka 2.16): three consumers on one partition with
explicit acknowledgement each see every record exactly once accepted, released records come back, a
SIGKILLed consumer's records are redelivered after the lock, rejected and over-delivered records land in
the dead-letter topic with their headers, and share state survives a broker SIGKILL and restart.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from share_support import (
    ACCEPT,
    REJECT,
    RELEASE,
    consumer,
    new_topic,
    poll_until,
    produce,
    set_group_configs,
)

pytestmark = pytest.mark.compat

OVERRIDES = (
    "group.share.min.record.lock.duration.ms=1000",
    "group.share.record.lock.duration.ms=3000",
    "group.share.min.session.timeout.ms=6000",
    "group.share.session.timeout.ms=6000",
    "group.share.min.heartbeat.interval.ms=500",
    "group.share.heartbeat.interval.ms=500",
)
EARLIEST = {"share.auto.offset.reset": "earliest"}


@pytest.fixture
def broker(tmp_path: Path, spawn_broker: Any, port: int) -> Iterator[Any]:
    yield spawn_broker(tmp_path / "data", port, *OVERRIDES).start()


def test_three_consumers_share_one_partition(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group, n = new_topic(bs), "three", 600
    set_group_configs(bs, group, EARLIEST)
    deliveries: dict[int, list[tuple[str, int]]] = defaultdict(list)
    accepted: dict[int, list[str]] = defaultdict(list)
    lock = threading.Lock()
    stop = threading.Event()
    joined = threading.Barrier(4)
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            c = consumer(bs, group, **{"max.poll.records": 20})
            c.subscribe([topic])
            c.poll(0.5)
            joined.wait(30)
            while not stop.is_set():
                msgs = [m for m in c.poll(0.3) if m.error() is None]
                for m in msgs:
                    dc = m.delivery_count()
                    with lock:
                        deliveries[m.offset()].append((name, dc))
                    # every tenth record is released once: it must come back
                    release = m.offset() % 10 == 0 and dc == 1
                    c.acknowledge(m, RELEASE if release else ACCEPT)
                    if not release:
                        with lock:
                            accepted[m.offset()].append(name)
                if msgs:
                    c.commit_sync(30)
            c.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"c{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    joined.wait(30)
    for chunk in range(6):
        produce(bs, topic, n // 6, start=chunk * (n // 6))
        time.sleep(0.2)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not errors:
        with lock:
            if len(accepted) >= n:
                break
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors
    dup = {o: who for o, who in accepted.items() if len(who) > 1}
    lost = set(range(n)) - set(accepted)
    print(
        f"share group of 3: accepted {len(accepted)}/{n}, lost {len(lost)}, duplicated {len(dup)}"
    )
    assert not lost and not dup
    for offset, seen in deliveries.items():
        # one consumer at a time: every delivery of a record carries the next delivery count
        assert [dc for _, dc in seen] == list(range(1, len(seen) + 1)), (offset, seen)
        if offset % 10 == 0:
            assert len(seen) == 2, (offset, seen)
    per_consumer = defaultdict(int)
    for seen in deliveries.values():
        for name, _ in seen:
            per_consumer[name] += 1
    print("deliveries per consumer:", dict(per_consumer))
    assert len(per_consumer) == 3, per_consumer


def test_killed_consumers_records_come_back_after_the_lock(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group, n = new_topic(bs), "killed", 100
    set_group_configs(bs, group, EARLIEST)
    produce(bs, topic, n)
    worker = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("share_support.py")),
            "hold",
            bs,
            group,
            topic,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = worker.stdout.readline() if worker.stdout else ""
        assert line.startswith("HELD "), line
        held = {int(x) for x in line.split()[1:]}
        assert held
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        killed_at = time.monotonic()
    finally:
        if worker.poll() is None:
            worker.kill()
    c = consumer(bs, group)
    c.subscribe([topic])
    got: dict[int, int] = {}
    back: dict[int, float] = {}

    def handle(m: Any) -> None:
        got[m.offset()] = m.delivery_count()
        if m.offset() in held:
            back[m.offset()] = time.monotonic() - killed_at
        c.acknowledge(m, ACCEPT)

    poll_until(c, handle, lambda: len(got) >= n, timeout=60)
    c.close()
    assert set(got) == set(range(n))
    assert all(got[o] >= 2 for o in held), {o: got[o] for o in held}
    print(f"{len(held)} held records redelivered {max(back.values()):.1f} s after the SIGKILL")
    assert max(back.values()) < 3.0 + 6.0  # the 3 s lock (plus polling slack)


def test_rejected_and_exhausted_records_go_to_the_dead_letter_topic(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group, n = new_topic(bs), "dlq-group", 10
    dlq = topic + "-dlq"
    set_group_configs(
        bs,
        group,
        {
            **EARLIEST,
            "share.delivery.count.limit": "2",
            "errors.deadletterqueue.topic.name": dlq,
        },
    )
    produce(bs, topic, n)
    c = consumer(bs, group)
    c.subscribe([topic])
    accepted: set[int] = set()
    releases: dict[int, int] = defaultdict(int)

    def handle(m: Any) -> None:
        if m.offset() == 3:
            c.acknowledge(m, REJECT)
        elif m.offset() == 7:
            releases[7] += 1
            c.acknowledge(m, RELEASE)
        else:
            accepted.add(m.offset())
            c.acknowledge(m, ACCEPT)

    poll_until(c, handle, lambda: len(accepted) == n - 2 and releases[7] >= 2, timeout=30)
    c.close()
    reader = Consumer(
        {"bootstrap.servers": bs, "group.id": "dlq-reader", "auto.offset.reset": "earliest"}
    )
    reader.subscribe([dlq])
    letters = []
    deadline = time.monotonic() + 30
    while len(letters) < 2 and time.monotonic() < deadline:
        m = reader.poll(0.5)
        if m is not None and m.error() is None:
            letters.append(m)
    reader.close()
    assert len(letters) == 2
    heads = [dict(m.headers() or []) for m in letters]
    assert [(h["__dlq.errors.offset"], h["__dlq.errors.reason"]) for h in heads] == [
        (b"3", b"REJECTED"),
        (b"7", b"DELIVERY_COUNT_EXCEEDED"),
    ]
    assert heads[0]["__dlq.errors.topic"] == topic.encode()
    assert heads[0]["__dlq.errors.partition"] == b"0"
    assert heads[0]["__dlq.errors.group.id"] == group.encode()
    assert heads[1]["__dlq.errors.delivery.count"] == b"2"
    assert [m.value() for m in letters] == [b"v3", b"v7"]
    assert releases[7] == 2


def test_share_state_survives_a_broker_restart(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group, n = new_topic(bs), "restart", 200
    set_group_configs(bs, group, EARLIEST)
    produce(bs, topic, n)
    c = consumer(bs, group, **{"max.poll.records": 10})
    c.subscribe([topic])
    first: set[int] = set()

    def accept_some(m: Any) -> None:
        if len(first) < n // 2:
            first.add(m.offset())
            c.acknowledge(m, ACCEPT)
        else:
            c.acknowledge(m, RELEASE)

    poll_until(c, accept_some, lambda: len(first) >= n // 2, timeout=30)
    c.close()
    broker.stop(signal.SIGKILL)  # acknowledged = committed above; no clean shutdown
    broker.start()
    c = consumer(bs, group)
    c.subscribe([topic])
    second: dict[int, int] = {}

    def accept(m: Any) -> None:
        second[m.offset()] = second.get(m.offset(), 0) + 1
        c.acknowledge(m, ACCEPT)

    poll_until(c, accept, lambda: len(first) + len(second) >= n, timeout=60)
    time.sleep(0.5)
    for m in c.poll(0.5):  # nothing more may come
        if m.error() is None:
            second[m.offset()] = second.get(m.offset(), 0) + 1
    c.close()
    redelivered = first & set(second)
    lost = set(range(n)) - first - set(second)
    dup = {o for o, k in second.items() if k > 1}
    print(
        f"restart: acknowledged before {len(first)}, after {len(second)}, "
        f"lost {len(lost)}, acknowledged-then-redelivered {len(redelivered)}, duplicated {len(dup)}"
    )
    assert not redelivered and not lost and not dup


def test_read_committed_share_group_skips_aborted_records(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = new_topic(bs)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "share-txn"})
    p.init_transactions(30)
    for batch, commit in ((0, True), (1, False), (2, True)):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, value=f"t{batch}-{i}".encode(), partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    seen: dict[str, list[bytes]] = {}
    for level in ("read_committed", "read_uncommitted"):
        group = f"iso-{level}"
        set_group_configs(bs, group, {**EARLIEST, "share.isolation.level": level})
        c = consumer(bs, group)
        c.subscribe([topic])
        got: list[bytes] = []

        def handle(m: Any, c: Any = c, got: list[bytes] = got) -> None:
            got.append(m.value())
            c.acknowledge(m, ACCEPT)

        want = 10 if level == "read_committed" else 15
        poll_until(c, handle, lambda got=got, want=want: len(got) >= want, timeout=30)
        extra = [m for m in c.poll(1.0) if m.error() is None]  # and nothing more
        c.close()
        assert not extra
        seen[level] = got
    assert seen["read_committed"] == [f"t{b}-{i}".encode() for b in (0, 2) for i in range(5)]
    assert sorted(seen["read_uncommitted"]) == sorted(
        f"t{b}-{i}".encode() for b in range(3) for i in range(5)
    )
