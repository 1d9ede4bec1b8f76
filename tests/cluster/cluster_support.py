"""Helpers shared by the cluster tests of partition moves: an idempotent acks=all writer that remembers
where and when each record was acknowledged, the read-back and exactly-once check, ZooKeeper lookups.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import TopicPartition as KpTopicPartition
from kazoo.client import KazooClient

from kafkalite.cli.wire import WireClient
from kafkalite.cluster import zk_data as zd
from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
from kafkalite.protocol.schema import APIS

QUIET = {"log_level": 0}


class AckedWriter(threading.Thread):
    """Numbered records round-robin over a topic's partitions, as fast as acks=all allows;
    remembers each acknowledged record's (partition, offset) and the monotonic time of its ack."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(name=f"writer-{topic}", daemon=True)
        self.topic, self.partitions = topic, partitions
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                **QUIET,
            }
        )
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.acked_at: dict[bytes, float] = {}
        self.failed = 0
        self.stop = threading.Event()

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
            self.acked_at[msg.value()] = time.monotonic()
        else:
            self.failed += 1

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            if len(self.producer) > 1000:
                self.producer.poll(0.05)
                continue
            self.producer.produce(
                self.topic,
                f"r{n:08d}".encode(),
                partition=n % self.partitions,
                on_delivery=self._done,
            )
            n += 1
            if n % 20 == 0:
                self.producer.poll(0.005)
        self.producer.flush(60)


def read_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes]]:
    """Every record of the topic, from offset 0 up to each partition's high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", **QUIET})
    ends = {
        p: c.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)[1]
        for p in range(partitions)
    }
    c.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    counts = dict.fromkeys(ends, 0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(counts[p] < ends[p] for p in ends):
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append((m.partition(), m.offset(), m.value()))
        counts[m.partition()] += 1
    c.close()
    return got


def exactly_once(
    acked: dict[bytes, tuple[int, int]], got: list[tuple[int, int, bytes]]
) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """(lost, duplicated, misplaced): acknowledged records not read back, values stored more than
    once, and records read at another (partition, offset) than they were acknowledged with."""
    seen: dict[bytes, int] = {}
    for _p, _o, v in got:
        seen[v] = seen.get(v, 0) + 1
    lost = [v for v in acked if v not in seen]
    duplicated = [v for v, n in seen.items() if n > 1]
    misplaced = [v for p, o, v in got if v in acked and acked[v] != (p, o)]
    return lost, duplicated, misplaced


def partition_dirs(cluster: LocalCluster, broker: int, topic: str, partition: int) -> list[Path]:
    base = cluster.brokers[broker].data_dir
    return [d for d in base.rglob(f"{topic}-{partition}") if d.is_dir()]


def controller_epoch(raw: KazooClient) -> int:
    return zd.decode_controller_epoch(raw.get(zd.CONTROLLER_EPOCH)[0])


def controller_id(raw: KazooClient) -> int:
    return zd.decode_controller(raw.get(zd.CONTROLLER)[0])


def listed_reassignments(cluster: LocalCluster, raw: KazooClient) -> list[KpTopicPartition] | None:
    """The moves the controller named in ZooKeeper lists, asked directly with a short timeout (a
    client's metadata refresh may pick a stopped broker and wait out its request timeout); None
    when there is no controller to answer yet."""
    try:
        with WireClient(cluster.brokers[controller_id(raw)].bootstrap, timeout=3) as wc:
            resp = wc.send(ListPartitionReassignmentsRequest(topics=None))
    except Exception:  # no controller yet, or it is just starting
        return None
    if resp.error_code != ErrorCode.NO_ERROR:
        return None
    return [KpTopicPartition(t.name, p.partition_index) for t in resp.topics for p in t.partitions]


def alter_reassignments(
    cluster: LocalCluster, raw: KazooClient, moves: dict[KpTopicPartition, list[int] | None]
) -> dict[KpTopicPartition, int]:
    """AlterPartitionReassignments sent straight to the controller named in ZooKeeper: each
    partition's error code (a client's admin may pick a SIGSTOPped broker for its metadata)."""
    R = AlterPartitionReassignmentsRequest
    by_topic: dict[str, list[Any]] = {}
    for tp, replicas in moves.items():
        by_topic.setdefault(tp.topic, []).append(
            R.ReassignableTopic.ReassignablePartition(
                partition_index=tp.partition, replicas=replicas
            )
        )
    req = R(
        timeout_ms=20_000,
        topics=[R.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    with WireClient(cluster.brokers[controller_id(raw)].bootstrap, timeout=20) as wc:
        resp = wc.send(req)
    assert resp.error_code == ErrorCode.NO_ERROR, resp
    return {
        KpTopicPartition(t.name, p.partition_index): p.error_code
        for t in resp.responses
        for p in t.partitions
    }


def topic_known(cluster: LocalCluster, broker: int, topic: str) -> bool:
    """Whether `broker`'s metadata has `topic` (asked of that broker alone)."""
    md = APIS[3].request
    with WireClient(cluster.brokers[broker].bootstrap, timeout=10) as wc:
        resp = wc.send(md(topics=[md.MetadataRequestTopic(name=topic)]), version=4)
    return any(t.name == topic and t.error_code == ErrorCode.NO_ERROR for t in resp.topics)


def wait_until(what: str, check: Any, timeout: float, since: float) -> None:
    """Poll `check` until true (or fail naming `what`); print when it came, `since` a start time."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    print(f"  {time.monotonic() - since:5.1f} s: {what}")
