"""A failed log dir on a live broker: broker 1 has two log dirs, the second a small tmpfs that fills up
under an acks=all producer. Leadership of that dir's partitions moves off broker 1 within seconds, the
producer keeps succeeding, and broker 1 keeps leading the partitions in its healthy dir.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cli.wire import WireClient
from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import DescribeLogDirsRequest
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOPIC = "jbod"
X = 1  # the broker with two log dirs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


class Writer(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="writer", daemon=True)
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
             "linger.ms": 5, "message.timeout.ms": 60_000, "log_level": 0}
        )  # fmt: skip
        self.acked: list[tuple[int, float]] = []  # (partition, when)
        self.failed = 0
        self.stop = threading.Event()

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append((msg.partition(), time.monotonic()))
        else:
            self.failed += 1

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.producer.produce(TOPIC, b"x" * 2000, partition=i % 4, on_delivery=self._done)
            self.producer.poll(0.002)
            i += 1
        self.producer.flush(60)


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass


def _metadata(c: LocalCluster, broker: int) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, ISR, offline replicas), as `broker` answers Metadata."""
    with WireClient(c.brokers[broker].bootstrap, timeout=5) as wc:
        resp = wc.metadata([TOPIC])
    t = resp.topics[0]
    return {
        p.partition_index: (p.leader_id, list(p.isr_nodes), list(p.offline_replicas))
        for p in t.partitions
    }


def test_a_failed_log_dir_moves_leadership_away_and_the_broker_keeps_serving(
    tmp_path: Path, zookeeper: ZooKeeperServer, small_disk: Path
) -> None:
    healthy = tmp_path / "healthy"
    dirs = f"{healthy},{small_disk / 'logs'}"
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={"min.insync.replicas": 2, "replica.fetch.backoff.ms": 200},
        broker_config={X: {"log.dirs": dirs}},
    )
    with c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers, "log_level": 0})
        assignment = [[1, 2, 3], [1, 3, 2], [1, 2, 3], [1, 3, 2]]  # broker 1 leads them all
        admin.create_topics(
            [NewTopic(TOPIC, 4, replication_factor=-1, replica_assignment=assignment)]
        )[TOPIC].result(30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            on_small = {p for p in range(4) if (small_disk / "logs" / f"{TOPIC}-{p}").is_dir()}
            on_healthy = {p for p in range(4) if (healthy / f"{TOPIC}-{p}").is_dir()}
            if len(on_small) + len(on_healthy) == 4:
                break
            time.sleep(0.2)
        assert on_small and on_healthy, (on_small, on_healthy)  # spread over both dirs
        w = Writer(c.bootstrap_servers)
        w.start()
        try:
            while len(w.acked) < 200:
                time.sleep(0.1)
            _fill(small_disk)
            failed_at = time.monotonic()
            moved_after = None
            while time.monotonic() < failed_at + 20:
                md = _metadata(c, 2)
                if all(md[p][0] not in (X, -1) for p in on_small):
                    moved_after = time.monotonic() - failed_at
                    break
                time.sleep(0.2)
            assert moved_after is not None, md
            for p in on_small:
                assert X not in md[p][1] and md[p][2] == [X], md  # out of ISR, listed offline
            for p in on_healthy:
                assert md[p][0] == X, md  # still led by broker 1
            # DescribeLogDirs on broker 1: the failed dir with its error, the other with its logs
            with WireClient(c.brokers[X].bootstrap, timeout=5) as wc:
                dirs = {r.log_dir: r for r in wc.send(DescribeLogDirsRequest(topics=None)).results}
            bad = dirs[str((small_disk / "logs").resolve())]
            good = dirs[str(healthy.resolve())]
            assert bad.error_code == ErrorCode.KAFKA_STORAGE_ERROR and not bad.topics
            assert good.error_code == 0
            assert {
                p.partition_index for t in good.topics if t.name == TOPIC for p in t.partitions
            } == on_healthy
            # the producer keeps succeeding on every partition after the move
            since = time.monotonic()
            while time.monotonic() < since + 15:
                recent = {p for p, t in w.acked if t > since}
                if recent == {0, 1, 2, 3}:
                    break
                time.sleep(0.2)
            assert recent == {0, 1, 2, 3}, (recent, len(w.acked), w.failed, len(w.producer))
        finally:
            w.stop.set()
            w.join(60)
        assert w.failed == 0
        assert c.brokers[X].running  # the broker did not stop
        print(f"leadership moved {moved_after:.1f} s after the disk filled; acked {len(w.acked)}")
