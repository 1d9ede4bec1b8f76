"""Draining a broker with the operator CLI on a real cluster: `reassign generate` moves every partition of a
topic off broker 3, `execute` then `verify --watch` until complete, broker 3 stops, and nothing goes offline.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kafkalite.cli.main import main
from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}
TOPIC = "drained"
PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={"min.insync.replicas": 2, "replica.fetch.backoff.ms": 200},
    )
    with c:
        yield c


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, (argv, out, err)
    return out


def _produce(bootstrap: str, n: int, tag: str) -> int:
    """n acks=all records over every partition; how many were acknowledged."""
    acked = [0]

    def done(err: object, _msg: object) -> None:
        if err is None:
            acked[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
    for i in range(n):
        p.produce(TOPIC, f"{tag}{i:06d}".encode() * 8, partition=i % PARTITIONS, on_delivery=done)
        if i % 500 == 0:
            p.poll(0)
    p.flush(30)
    return acked[0]


def _cancel_a_move_held_in_flight(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broker that is neither the controller nor the bootstrap is held still (SIGSTOP) while a
    partition moves onto it: verify says in progress, a second execute is refused without
    --additional, cancel puts the original replicas back."""
    bs = cluster.bootstrap_servers  # the CLI talks to the first: broker 1
    doc = json.loads(_cli(capsys, "brokers", "list", "--bootstrap-server", bs, "--output", "json"))
    controller = next(b["id"] for b in doc if b["controller"])
    joining = next(b for b in (2, 3) if b != controller)
    out = _cli(capsys, "topics", "describe", TOPIC, "--bootstrap-server", bs, "--output", "json")
    parts = json.loads(out)[0]["partitions"]
    p = next(p for p in parts if joining not in p["replicas"])
    original = p["replicas"]
    moved = tmp_path / "one.json"
    moved.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p["partition"], "replicas": [original[0], joining]}
    ]}))  # fmt: skip
    args = ["--bootstrap-server", bs, "--reassignment-json-file", str(moved)]
    cluster.brokers[joining].pause()
    try:
        _cli(capsys, "reassign", "execute", *args)
        out = _cli(capsys, "reassign", "verify", *args)
        assert f"Reassignment of partition {TOPIC}-{p['partition']} is still in progress." in out
        code = main(["reassign", "execute", *args])
        assert code == 2 and "--additional" in capsys.readouterr().err
        # (throttle configs are left alone: clearing them asks every broker, the held one too)
        out = _cli(capsys, "reassign", "cancel", *args, "--preserve-throttles")
        assert (
            f"Successfully cancelled partition reassignment(s) for: {TOPIC}-{p['partition']}" in out
        )
    finally:
        cluster.brokers[joining].resume()
    out = _cli(capsys, "reassign", "verify", *args)
    now = ",".join(map(str, original))
    assert f"but replica set is {now} rather than {original[0]},{joining}." in out, out


def test_drain_a_broker_then_stop_it(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bs = cluster.bootstrap_servers
    t0 = time.monotonic()
    _cli(capsys, "topics", "create", TOPIC, "--bootstrap-server", bs, "--partitions",
         str(PARTITIONS), "--replication-factor", "2")  # fmt: skip
    assert _produce(bs, 3000, "before") == 3000

    _cancel_a_move_held_in_flight(cluster, tmp_path, capsys)
    print(f"  {time.monotonic() - t0:5.1f} s: a move cancelled", file=sys.__stderr__)

    topics_file = tmp_path / "move.json"
    topics_file.write_text(json.dumps({"topics": [{"topic": TOPIC}], "version": 1}))
    out = _cli(capsys, "reassign", "generate", "--bootstrap-server", bs,
               "--topics-to-move-json-file", str(topics_file), "--broker-list", "1,2")  # fmt: skip
    lines = out.splitlines()
    current = json.loads(lines[lines.index("Current partition replica assignment") + 1])
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    assert any(3 in p["replicas"] for p in current["partitions"])  # something to drain
    assert len(proposed["partitions"]) == PARTITIONS
    assert all(sorted(p["replicas"]) == [1, 2] for p in proposed["partitions"])
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(proposed))

    out = _cli(capsys, "reassign", "execute", "--bootstrap-server", bs,
               "--reassignment-json-file", str(plan_file))  # fmt: skip
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    assert "Successfully started partition reassignments for" in out
    out = _cli(capsys, "reassign", "verify", "--bootstrap-server", bs, "--reassignment-json-file",
               str(plan_file), "--watch", "--interval", "0.3", "--wait-timeout", "30")  # fmt: skip
    assert [ln for ln in out.splitlines() if ln.startswith("Reassignment of partition")] == [
        f"Reassignment of partition {TOPIC}-{p} is complete." for p in range(PARTITIONS)
    ], out
    print(f"  {time.monotonic() - t0:5.1f} s: drained", file=sys.__stderr__)

    doc = json.loads(_cli(capsys, "brokers", "list", "--bootstrap-server", bs, "--output", "json"))
    by_id = {b["id"]: b for b in doc}
    assert by_id[3]["replicas"] == 0 and by_id[3]["leaders"] == 0
    assert by_id[1]["replicas"] + by_id[2]["replicas"] == 2 * PARTITIONS
    assert sum(b["controller"] for b in doc) == 1

    cluster.brokers[3].stop()
    survivors = ",".join(cluster.brokers[b].bootstrap for b in (1, 2))
    admin = AdminClient({"bootstrap.servers": survivors, **QUIET})
    deadline = time.monotonic() + 15
    while True:  # the metadata of every topic, internal ones too: each partition has a live leader
        md = admin.list_topics(timeout=10)
        alive = set(md.brokers)
        offline = [
            f"{t}-{p}"
            for t, tm in md.topics.items()
            for p, pm in tm.partitions.items()
            if pm.leader not in alive
        ]
        if 3 not in alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert 3 not in alive and not offline, offline
    assert _produce(survivors, 600, "after") == 600  # acks=all, min.insync.replicas=2 on {1,2}
    print(
        f"  {time.monotonic() - t0:5.1f} s: broker 3 stopped, nothing offline", file=sys.__stderr__
    )
