"""The power-cut nemesis (issue 36): brokers' data dirs on lazyfs, a file system that loses every
write not fsynced when the test says "crash", while an idempotent acks=all producer writes.

- one node with flush.messages=1: SIGKILL, power cut, restart: nothing acknowledged is lost;
- three brokers, three topics: a power cut of one broker loses nothing; then one of every broker at
  once loses nothing where flush.messages=1, and loses acknowledged records where flush.messages is
  left at its default (the nemesis and the checker bite), and the cluster still recovers: the
  brokers restart, the partitions take writes again, and every record served is one that was sent.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.jepsen.lazyfs import LazyFSMount, mounted
from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperMissing, ZooKeeperServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))  # the shared helpers
from cluster_support import AckedWriter, exactly_once, read_all, wait_until

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None or os.geteuid(),
        reason="needs /dev/fuse, fusermount3 (Debian fuse3) and root",
    ),
]

TOPIC = "powercut"
PARTITIONS = 3
VALUE = re.compile(rb"r\d{8}")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start()
    except ZooKeeperMissing as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def cluster_on_lazyfs(
    tmp_path: Path,
    zk: ZooKeeperServer,
    brokers: int,
    on_lazyfs: list[int],
    config: dict[str, object],
) -> Iterator[tuple[LocalCluster, dict[int, LazyFSMount]]]:
    """A cluster whose brokers in `on_lazyfs` keep their data dir on a lazyfs mount; the mounts are
    made before and removed after the brokers (always: no stale mount is left)."""
    c = LocalCluster(
        tmp_path / "cluster",
        brokers,
        zookeeper=zk,
        chroot=f"/{tmp_path.name}",
        config={
            "replica.lag.time.max.ms": 2000,
            "replica.fetch.backoff.ms": 200,
            # a restarted broker waits for its previous session to expire before it registers
            "zookeeper.session.timeout.ms": 3000,
            **config,
        },
    )
    mounts = {
        i: LazyFSMount(c.base_dir / f"broker-{i}" / "backing", c.brokers[i].data_dir)
        for i in on_lazyfs
    }
    with contextlib.ExitStack() as stack:
        for m in mounts.values():
            stack.enter_context(m)
        stack.enter_context(c)
        yield c, mounts
    assert not any(mounted(m.mountpoint) for m in mounts.values())


def create_topic(
    c: LocalCluster, topic: str, rf: int, config: dict[str, str], on: int | None = None
) -> None:
    """`topic` with `rf` replicas (all on broker `on` when given) and `config`."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    nt = (
        NewTopic(topic, PARTITIONS, rf, config=config)
        if on is None
        else NewTopic(topic, PARTITIONS, replica_assignment=[[on]] * PARTITIONS, config=config)
    )
    admin.create_topics([nt], operation_timeout=30)[topic].result(60)


class Writer(AckedWriter):
    """AckedWriter that keeps the last delivery error (for the message of a stalled test) and
    whose records wait out a slow restart (a busy machine): a record that times out in an
    idempotent producer stalls its partition for good."""

    last_error: Any = None

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(bootstrap, topic, partitions)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 300_000,
                "log_level": 0,
            }
        )

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.last_error = err
        super()._done(err, msg)


def acks_grow(w: Writer, by: int, what: str, timeout: float, since: float) -> None:
    n = len(w.acked)
    try:
        wait_until(f"{what} ({by} more acks)", lambda: len(w.acked) >= n + by, timeout, since)
    except AssertionError as e:
        raise AssertionError(f"{e}; {w.failed} failed deliveries, last: {w.last_error}") from None


def power_cut(
    c: LocalCluster, mounts: dict[int, LazyFSMount], victims: list[int], since: float
) -> float:
    """SIGKILL the victims, drop their file systems' unsynced writes, remount, restart them (all
    at once); answers the monotonic time when they were all back."""
    for i in victims:
        c.brokers[i].kill()
    for i in victims:
        print(f"  {time.monotonic() - since:5.1f} s: broker {i} killed, {mounts[i].crash()}")
        mounts[i].mount()
    starts = [threading.Thread(target=c.brokers[i].start) for i in victims]
    for t in starts:
        t.start()
    for t in starts:
        t.join()
    assert all(c.brokers[i].running for i in victims)
    print(f"  {time.monotonic() - since:5.1f} s: restarted {victims}")
    return time.monotonic()


def check(w: AckedWriter, c: LocalCluster) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Read the writer's topic back: (lost, duplicated, misplaced); no garbage may be served."""
    got = read_all(c.bootstrap_servers, w.topic, PARTITIONS)
    lost, duplicated, misplaced = exactly_once(w.acked, got)
    garbage = [v for _p, _o, v in got if not VALUE.fullmatch(v)]
    print(
        f"  {w.topic}: acknowledged {len(w.acked)}, read {len(got)}, lost {len(lost)}, "
        f"duplicated {len(duplicated)}, misplaced {len(misplaced)}, garbage {len(garbage)}"
    )
    assert garbage == [], garbage[:5]
    return lost, duplicated, misplaced


def run_writer(c: LocalCluster, topic: str = TOPIC) -> Writer:
    w = Writer(c.bootstrap_servers, topic, PARTITIONS)
    w.start()
    return w


def stop_writer(w: AckedWriter) -> None:
    w.stop.set()
    w.join(90)


def test_single_node_flush_each_message_loses_nothing(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    t0 = time.monotonic()
    with cluster_on_lazyfs(tmp_path, zookeeper, 1, [1], {"log.flush.interval.messages": 1}) as (
        c,
        mounts,
    ):
        create_topic(c, TOPIC, 1, {})
        w = run_writer(c)
        acks_grow(w, 300, "writes before the power cut", 30, t0)
        power_cut(c, mounts, [1], t0)
        acks_grow(w, 300, "writes after the restart", 120, t0)
        stop_writer(w)
        lost, duplicated, misplaced = check(w, c)
    assert (lost, duplicated, misplaced) == ([], [], [])


def test_power_cuts_of_one_broker_then_of_every_replica(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    """Three brokers, all on lazyfs, three topics written at once: `synced` (RF=3,
    min.insync.replicas=2, flush.messages=1), `default` (the same with the default flush) and
    `alone` (flush.messages=1, its one replica on broker 1: the single-replica case). A power cut
    of broker 1 loses nothing anywhere; then a power cut of every broker at once loses nothing of
    `synced` and `alone`, and loses acknowledged records of `default` (the checker bites), which
    still recovers: the brokers restart, its partitions take writes again, no garbage is served."""
    t0 = time.monotonic()
    each = {"flush.messages": "1"}
    with cluster_on_lazyfs(tmp_path, zookeeper, 3, [1, 2, 3], {"min.insync.replicas": 2}) as (
        c,
        mounts,
    ):
        create_topic(c, "synced", 3, each)
        create_topic(c, "default", 3, {})
        create_topic(c, "alone", 1, {**each, "min.insync.replicas": "1"}, on=1)
        writers = [run_writer(c, t) for t in ("synced", "default", "alone")]
        for w in writers:
            acks_grow(w, 200, f"{w.topic}: writes before the power cut of broker 1", 30, t0)
        power_cut(c, mounts, [1], t0)
        for w in writers:
            acks_grow(w, 200, f"{w.topic}: writes after broker 1 restarted", 120, t0)
        restarted = power_cut(c, mounts, [1, 2, 3], t0)
        for w in writers:
            acks_grow(w, 200, f"{w.topic}: writes after every broker restarted", 120, t0)
        for w in writers:
            stop_writer(w)
        synced, default, alone = (check(w, c) for w in writers)
        assert synced == ([], [], []) and alone == ([], [], [])
        lost = default[0]
        # the checker bites: acknowledged records that were only in the page cache are gone ...
        assert lost, "a power cut of every replica with the default flush lost nothing"
        # ... and only those: what was acknowledged once the brokers were back was all read back
        # (a delivery report is timed when the writer's poll serves it: a little after the ack)
        late = [v for v in lost if writers[1].acked_at[v] >= restarted]
        assert late == [], f"{len(late)} records acknowledged after the restart were lost"
