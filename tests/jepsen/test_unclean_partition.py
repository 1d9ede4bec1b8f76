"""The checker can fail: a deliberately broken configuration (unclean.leader.election.enable=true,
min.insync.replicas=1) under a zombie-leader partition must show lost writes in the queue workload.

The cut, by a fixed schedule on 3 brokers and 3 ZooKeeper servers in network namespaces: the controller,
leading a queue partition, is cut from the other brokers (its followers) but not from ZooKeeper, so as
controller it shrinks that partition's ISR to itself and, with min.insync.replicas=1, acknowledges acks=all
writes alone; then it is cut from ZooKeeper too, still reachable by clients (a zombie): its session
expires, a new controller finds no live ISR member and elects a follower uncleanly, which never had those
writes. After the heal the old leader truncates to the new one's log: the writes it acknowledged are gone.
The controller must be the leader because a leader cut from every other broker can only shrink its ISR
through a controller it can reach. Skips (saying why) without root, `ip` or `nft`.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kafkalite.jepsen.netns import unavailable_reason

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ZK_SESSION_MS = 3000
LAG_MS = 2000
BROKEN = {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}


def _skip_reason() -> str | None:
    reason = unavailable_reason()
    if reason is None and subprocess.run(["ip", "netns", "list"], capture_output=True).returncode:
        reason = "`ip netns` does not work here"
    return reason


def _wait(what: str, cond: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting until {what}")
        time.sleep(0.1)


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_unclean_election_under_a_zombie_leader_loses_acknowledged_writes(tmp_path: Path) -> None:
    from kafkalite.jepsen.history import History
    from kafkalite.jepsen.nemesis import Nemesis
    from kafkalite.jepsen.netcluster import NetnsCluster
    from kafkalite.jepsen.process_run import run
    from kafkalite.jepsen.workloads import Counts, key_of

    # many producers, short timeouts: while the controller is cut off, the other leaders cannot shrink
    # their ISRs and each producer's synchronous send to them hangs until op_timeout (+5 s)
    counts = Counts(producers=8, consumers=1, partitions=3, op_timeout=3.0)
    config = {
        "zookeeper.session.timeout.ms": ZK_SESSION_MS,
        "replica.lag.time.max.ms": LAG_MS,
        "replica.fetch.backoff.ms": 200,
        **BROKEN,
    }
    cluster = NetnsCluster(tmp_path, brokers=3, zookeepers=3, config=config, log=print)
    seen: dict[str, object] = {}

    def zombie(
        histories: Sequence[History], stop: threading.Event, done: list[str], topics: Sequence[str]
    ) -> None:
        """The fixed schedule: leader-followers on the controller, then also leader-zookeeper."""
        try:
            schedule(histories, done, topics[0])
        except AssertionError as exc:  # said by the assertion below, not lost in a thread
            seen["error"] = str(exc)

    def schedule(histories: Sequence[History], done: list[str], topic: str) -> None:

        def record(f: str, value: dict[str, Any]) -> None:
            for h in histories:
                h.nemesis(f, value)

        nemesis = Nemesis(cluster, topic, counts.partitions, on_event=record, log=print)
        ctl = cluster.controller()
        led = [p for p in range(counts.partitions) if cluster.leader(topic, p) == ctl]
        assert ctl is not None and led, f"controller {ctl} leads no partition of {topic}"
        p, node = led[0], f"b{ctl}"
        key = key_of(topic, p)
        seen.update(controller=ctl, partition=p)
        rec = nemesis.start("leader-followers", node)

        def isr() -> list[int]:
            state = cluster.partition_state(topic, p)
            return list(state["isr"]) if state else []

        _wait(f"{key}'s ISR shrinks to [{ctl}]", lambda: isr() == [ctl], 20)
        shrunk = histories[0].ops()[-1].time

        def acked_alone() -> int:
            return sum(
                1
                for o in histories[0].ops()
                if o.type == "ok" and o.time > shrunk and o.f == "send" and o.value[0][1] == key
            )

        _wait(f"{key} acknowledges writes on {node} alone", lambda: acked_alone() >= 3, 30)
        zks = [f"zk{i}" for i in cluster.zk_ids]
        cluster.net.partition([node], zks)  # on top of the first cut: now a zombie
        record("start", {"kind": "leader-zookeeper", "nodes": {"side_a": [node], "side_b": zks}})
        _wait(
            f"another broker leads {key} (unclean election)",
            lambda: cluster.leader(topic, p) not in (None, ctl),
            30,
        )
        seen["new_leader"] = cluster.leader(topic, p)
        nemesis.heal()
        seen["healed_bit"] = rec.bit()
        done.append(f"zombie {node} on {key}")

    began = time.monotonic()
    with cluster:
        out = run(
            cluster,
            0,
            counts=counts,
            nemesis=zombie,
            min_faults=1,
            with_txn=False,  # the lost writes are the queue's
            recovery=4.0,
            topic_config=BROKEN,
            out_dir=tmp_path / "histories",
        )
    print(f"  {seen}; run {time.monotonic() - began:.0f} s")
    assert cluster.net.leftovers() == []
    assert out.faults, f"the zombie schedule did not run to its end: {seen.get('error')}"
    assert seen["healed_bit"], "the leader-followers cut did not bite"
    queue = out.reports["queue"]
    assert out.final_complete["queue"], "the final read did not reach every partition's end"
    assert queue.counts["lost-write"] > 0, out.tables["queue"]
