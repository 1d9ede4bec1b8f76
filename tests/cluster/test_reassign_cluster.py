"""Partition reassignment on a real cluster: four brokers, a topic on {1,2,3} written by an idempotent
acks=all producer; one partition moves to {2,3,4} (listed in flight, a controller change in the middle,
then done, broker 1's copy gone), another move is cancelled, then moved through the legacy
/admin/reassign_partitions znode; every acknowledged record is read back exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import (
    QUIET,
    AckedWriter,
    controller_epoch,
    controller_id,
    exactly_once,
    listed_reassignments,
    partition_dirs,
    read_all,
    wait_until,
)
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kerrors
from kazoo.client import KazooClient

from kafkalite.cli.wire import WireClient
from kafkalite.cluster import zk_data as zd
from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOPIC = "moving"
P0 = KpTopicPartition(TOPIC, 0)
P1 = KpTopicPartition(TOPIC, 1)


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        4,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "replica.lag.time.max.ms": 3000,
            "zookeeper.session.timeout.ms": 8000,
            "min.insync.replicas": 2,
            "replica.fetch.backoff.ms": 200,
        },
    )
    with c:
        yield c


def _read_all(bootstrap: str) -> list[tuple[int, int, bytes]]:
    return read_all(bootstrap, TOPIC, 2)


def _replicas(admin: AdminClient) -> dict[int, list[int]]:
    md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return {p: list(pm.replicas) for p, pm in md.partitions.items()}


def _dirs(cluster: LocalCluster, broker: int, partition: int) -> list[Path]:
    return partition_dirs(cluster, broker, TOPIC, partition)


T0 = [time.monotonic()]


def _wait(what: str, check: Any, timeout: float = 30) -> None:
    wait_until(what, check, timeout, T0[0])


def _moves_listed(kadmin: KafkaAdminClient) -> dict[Any, Any] | None:
    """The controller's list of moves, or None while the brokers' metadata still names the old one.

    After a controller change every broker learns the new controller from its UpdateMetadata, as in
    Kafka; until then kafka-python's one retry on NOT_CONTROLLER can land on the old id again."""
    try:
        return dict(kadmin.list_partition_reassignments())
    except RuntimeError as exc:
        if "controller" not in str(exc):
            raise
        return None


def test_move_a_partition_under_load_and_cancel_another(cluster: LocalCluster) -> None:
    T0[0] = time.monotonic()
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    # the broker that joins is held still (SIGSTOP) while the moves are listed: it must not be the
    # controller, so it is 4 unless 4 was elected (then 3 plays its part)
    controller = admin.describe_cluster().result().controller.id
    joining = 4 if controller != 4 else 3
    origin = [b for b in (1, 2, 3, 4) if b != joining]  # {1,2,3} (or {1,2,4})
    leaving = origin[0]
    target = [*origin[1:], joining]  # {2,3,4}
    new = NewTopic(TOPIC, 2, replication_factor=-1, replica_assignment=[origin, origin])
    for f in admin.create_topics([new], operation_timeout=20).values():
        f.result()
    kadmin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20_000)
    raw = KazooClient(hosts=cluster.zookeeper_connect)
    raw.start()
    epoch = controller_epoch(raw)
    writer = AckedWriter(bs, TOPIC, 2)
    writer.start()
    try:
        _wait("first acknowledgements", lambda: len(writer.acked) > 500)
        # bad input changes nothing
        bad = kadmin.alter_partition_reassignments(
            {P0: [2, 3, 9], P1: [2, 2, 4], KpTopicPartition(TOPIC, 5): [1, 2, 3]}
        )
        assert bad == {
            P0: kerrors.InvalidReplicationAssignmentError,
            P1: kerrors.InvalidReplicationAssignmentError,
            KpTopicPartition(TOPIC, 5): kerrors.UnknownTopicOrPartitionError,
        }
        assert kadmin.alter_partition_reassignments({P0: None}) == {
            P0: kerrors.NoReassignmentInProgressError
        }
        assert kadmin.list_partition_reassignments() == {}
        # only the controller answers (Kafka's ZooKeeper mode): the others say NOT_CONTROLLER
        with WireClient(cluster.brokers[joining].bootstrap, timeout=10) as wc:
            listed = wc.send(ListPartitionReassignmentsRequest(topics=None))
            altered = wc.send(AlterPartitionReassignmentsRequest(topics=[]))
        assert listed.error_code == altered.error_code == ErrorCode.NOT_CONTROLLER
        assert _dirs(cluster, leaving, 0) and not _dirs(cluster, joining, 0)

        # the joining broker is held still so both moves are surely in flight when listed
        cluster.brokers[joining].pause()
        try:
            started = time.monotonic()
            cancelled = [origin[0], origin[1], joining]
            res = kadmin.alter_partition_reassignments({P0: target, P1: cancelled})
            assert res == {P0: None, P1: None}
            moving = kadmin.list_partition_reassignments()
            assert moving == {
                P0: {
                    "replicas": [*target, leaving],
                    "adding_replicas": [joining],
                    "removing_replicas": [leaving],
                },
                P1: {
                    "replicas": [*cancelled, origin[2]],
                    "adding_replicas": [joining],
                    "removing_replicas": [origin[2]],
                },
            }
            assert kadmin.alter_partition_reassignments({P1: None}) == {P1: None}  # cancel
            assert list(kadmin.list_partition_reassignments()) == [P0]
            # the controller owns the topic znode while a move runs: CreatePartitions waits
            grow = admin.create_partitions([NewPartitions(TOPIC, 3)])[TOPIC]
            with pytest.raises(KafkaException, match="reassignment"):
                grow.result(10)
            # a controller change in the middle: the next controller resumes from the znodes
            raw.delete(zd.CONTROLLER)
            _wait("a new controller term", lambda: controller_epoch(raw) > epoch, 5)
            _wait("the move listed again", lambda: listed_reassignments(cluster, raw) == [P0], 10)
        finally:
            cluster.brokers[joining].resume()
        _wait("the move to finish", lambda: _moves_listed(kadmin) == {})
        print(f"move of {TOPIC}-0: {time.monotonic() - started:.1f} s from request to done")
        _wait("metadata of the move", lambda: sorted(_replicas(admin)[0]) == sorted(target), 15)
        # the cancelled partition moves too, asked for the pre-KIP-455 way
        raw.create(zd.REASSIGN_PARTITIONS, zd.encode_reassignment_request({(TOPIC, 1): target}))
        _wait("the legacy znode to go", lambda: raw.exists(zd.REASSIGN_PARTITIONS) is None)
        _wait("metadata of that move", lambda: sorted(_replicas(admin)[1]) == sorted(target), 15)
        admin.create_partitions([NewPartitions(TOPIC, 3)])[TOPIC].result(20)
        time.sleep(1.0)  # keep writing against the new replica sets
    finally:
        writer.stop.set()
        writer.join(90)
    replicas = _replicas(admin)
    assert sorted(replicas[0]) == sorted(target) and sorted(replicas[1]) == sorted(target)
    assert len(replicas) == 3  # the partition added after the moves
    for p in (0, 1):
        _wait("the leaving broker to delete its copy", lambda p=p: not _dirs(cluster, leaving, p))
    assert _dirs(cluster, joining, 0) and _dirs(cluster, joining, 1)
    print(
        f"controller {controller} then {controller_id(raw)}: {TOPIC}-0 and (after a cancel) "
        f"{TOPIC}-1 moved {origin} -> {target}"
    )
    raw.stop()

    got = _read_all(bs)
    lost, duplicated, misplaced = exactly_once(writer.acked, got)
    print(
        f"acknowledged {len(writer.acked)}, failed {writer.failed}, read {len(got)}, "
        f"lost {len(lost)}, duplicated {len(duplicated)}, misplaced {len(misplaced)}"
    )
    assert not lost and not duplicated and not misplaced
    kadmin.close()
