"""Consumer groups with the kafkalite client: a mixed kafkalite + confluent-kafka group on cooperative-sticky,
eager range with listeners, regex subscriptions, poll-interval eviction, and a SIGKILLed member (no loss,
duplicates only after its last commit). Against kafkalite and Tansu."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest
from test_client_support import any_broker, create_topic, new_topic_name  # noqa: F401

from kafkalite.client import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]

FAST = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 300,
    "auto_offset_reset": "earliest",
    "metadata_max_age_ms": 1000,
}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def produce(bs: str, topic: str, n: int, partitions: int) -> set[tuple[int, bytes]]:
    with KafkaProducer(bootstrap_servers=bs, linger_ms=2) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, partition=i % partitions)
        p.flush(30)
    return {(i % partitions, b"v%d" % i) for i in range(n)}


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Poller(threading.Thread):
    """Polls one consumer on its own thread, collecting (partition, value)."""

    def __init__(self, poll_one: Callable[[], list[tuple[int, bytes]]], close: Callable[[], None]):
        super().__init__(daemon=True)
        self.poll_one = poll_one
        self.close_fn = close
        self.seen: list[tuple[int, bytes]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.seen.extend(self.poll_one())
        except BaseException as exc:
            self.error = exc
        finally:
            self.close_fn()


def kafkalite_poller(bs: str, group: str, topic: str, **kw: object) -> tuple[Poller, KafkaConsumer]:
    c = KafkaConsumer(topic, bootstrap_servers=bs, group_id=group, **{**FAST, **kw})

    def poll_one() -> list[tuple[int, bytes]]:
        return [(r.partition, r.value) for recs in c.poll(100).values() for r in recs]

    return Poller(poll_one, c.close), c


def confluent_poller(bs: str, group: str, topic: str, owned: set[int]) -> Poller:
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )

    def on_assign(_c: object, parts: list) -> None:
        owned.update(p.partition for p in parts)

    def on_revoke(_c: object, parts: list) -> None:
        owned.difference_update(p.partition for p in parts)

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

    def poll_one() -> list[tuple[int, bytes]]:
        m = c.poll(0.1)
        if m is None or m.error() is not None:
            return []
        return [(m.partition(), m.value())]

    return Poller(poll_one, c.close)


def test_mixed_cooperative_group(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("mix"), 6)
    group = new_topic_name("gmix")
    expected = produce(bs, topic, 600, 6)
    kl, klc = kafkalite_poller(
        bs, group, topic, partition_assignment_strategy=["cooperative-sticky"]
    )
    ck_owned: set[int] = set()
    ck = confluent_poller(bs, group, topic, ck_owned)
    kl.start()
    ck.start()
    try:
        wait_until(
            lambda: (
                bool(klc.assignment())
                and bool(ck_owned)
                and set(kl.seen) | set(ck.seen) >= expected
            ),
            60,
            "both members to own partitions and the group to consume everything",
        )
        kl_parts = {tp.partition for tp in klc.assignment()}
        assert kl_parts and ck_owned and not (kl_parts & ck_owned)
    finally:
        kl.stop.set()
        ck.stop.set()
        kl.join(15)
        ck.join(15)
    assert kl.error is None and ck.error is None
    assert set(kl.seen) | set(ck.seen) == expected
    assert kl.seen and ck.seen


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.events.append(("lost", lost))


def test_eager_range_listener_and_handover(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("eager"), 4)
    group = new_topic_name("geager")
    r1, r2 = Recorder(), Recorder()
    c1 = KafkaConsumer(
        bootstrap_servers=bs, group_id=group, partition_assignment_strategy=["range"], **FAST
    )
    c2 = KafkaConsumer(
        bootstrap_servers=bs, group_id=group, partition_assignment_strategy=["range"], **FAST
    )
    c1.subscribe([topic], listener=r1)
    try:
        wait_until(
            lambda: (c1.poll(50), len(c1.assignment()) == 4)[1], 30, "c1 to own all partitions"
        )
        c2.subscribe([topic], listener=r2)
        done = threading.Event()

        def pump_c1() -> None:
            while not done.is_set():
                c1.poll(50)

        t = threading.Thread(target=pump_c1, daemon=True)
        t.start()
        wait_until(
            lambda: (c2.poll(50), len(c2.assignment()) == 2)[1], 40, "c2 to get 2 partitions"
        )
        wait_until(lambda: len(c1.assignment()) == 2, 20, "c1 to keep 2")
        done.set()
        t.join(10)
        assert c1.assignment() | c2.assignment() == {TopicPartition(topic, p) for p in range(4)}
        assert ("revoked", sorted(TopicPartition(topic, p) for p in range(4))) in r1.events
        c2.close()
        wait_until(lambda: (c1.poll(50), len(c1.assignment()) == 4)[1], 30, "c1 to take all back")
    finally:
        c1.close()
        c2.close()


def test_regex_subscription(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    prefix = new_topic_name("rx")
    a = create_topic(bs, prefix + "-a", 1)
    b = create_topic(bs, prefix + "-b", 1)
    create_topic(bs, new_topic_name("other"), 1)
    produce(bs, a, 5, 1)
    produce(bs, b, 7, 1)
    with KafkaConsumer(bootstrap_servers=bs, group_id=new_topic_name("grx"), **FAST) as c:
        c.subscribe(pattern=prefix + "-.*")
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 12 and time.monotonic() < deadline:
            for recs in c.poll(200).values():
                got.extend(recs)
        assert {r.topic for r in got} == {a, b} and len(got) == 12


def test_poll_interval_expiry_leaves_group(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("mpi"), 2)
    group = new_topic_name("gmpi")
    r1 = Recorder()
    c1 = KafkaConsumer(bootstrap_servers=bs, group_id=group, max_poll_interval_ms=1500, **FAST)
    c2 = KafkaConsumer(topic, bootstrap_servers=bs, group_id=group, **FAST)
    try:
        c1.subscribe([topic], listener=r1)
        wait_until(lambda: (c1.poll(50), len(c1.assignment()) == 2)[1], 30, "c1 to join")
        time.sleep(3)  # no poll for longer than max.poll.interval.ms: c1 leaves the group
        wait_until(lambda: (c2.poll(50), len(c2.assignment()) == 2)[1], 30, "c2 to take over")
        c1.poll(100)
        assert any(kind == "lost" for kind, _ in r1.events)
    finally:
        c1.close()
        c2.close()


MEMBER = r"""
import sys, time
sys.path.insert(0, sys.argv[5])
from kafkalite.client import KafkaConsumer
bs, group, topic = sys.argv[1:4]
c = KafkaConsumer(topic, bootstrap_servers=bs, group_id=group, enable_auto_commit=False,
                  session_timeout_ms=6000, heartbeat_interval_ms=300, auto_offset_reset="earliest",
                  max_poll_records=int(sys.argv[4]))
n = 0
while True:
    for tp, recs in c.poll(100).items():
        for r in recs:
            print("R", r.partition, r.offset, flush=True)
            time.sleep(0.002)
        n += len(recs)
        c.commit({tp: recs[-1].offset + 1})
        print("C", tp.partition, recs[-1].offset + 1, flush=True)
"""


def test_killed_member_loses_nothing(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("kill"), 4)
    group = new_topic_name("gkill")
    n = 2000
    produce(bs, topic, n, 4)
    proc = subprocess.Popen(
        [sys.executable, "-c", MEMBER, bs, group, topic, "20", os.path.join(ROOT, "src")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    killed_reads: list[tuple[int, int]] = []
    commits: dict[int, int] = {}

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            kind, p, o = raw.decode().split()
            if kind == "R":
                killed_reads.append((int(p), int(o)))
            else:
                commits[int(p)] = int(o)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    survivor, sc = kafkalite_poller(bs, group, topic, enable_auto_commit=False)
    survivor.poll_one = lambda: [  # type: ignore[method-assign]
        (r.partition, r.offset) for recs in sc.poll(100).values() for r in recs
    ]
    try:
        wait_until(lambda: len(killed_reads) >= 100, 40, "the member to consume mid-stream")
        survivor.start()
        wait_until(lambda: len(killed_reads) >= 300, 40, "the member to keep consuming")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        reader.join(5)
        last_commit = dict(commits)
        wait_until(
            lambda: (
                {o for p, o in survivor.seen} | set() is not None
                and set(survivor.seen) | set(killed_reads) >= {(i % 4, i // 4) for i in range(n)}
            ),
            60,
            "the survivor to consume every record",
        )
    finally:
        survivor.stop.set()
        survivor.join(15)
        if proc.poll() is None:
            proc.kill()
    seen_offsets = survivor.seen
    assert set(seen_offsets) | set(killed_reads) == {(i % 4, i // 4) for i in range(n)}
    assert killed_reads and seen_offsets
    # duplicates only after the killed member's last commit on each partition
    dups = set(seen_offsets) & set(killed_reads)
    for p, o in dups:
        assert o >= last_commit.get(p, 0), (p, o, last_commit)


def test_new_partitions_trigger_rebalance(any_broker) -> None:  # noqa: F811
    if any_broker.kind == "tansu":
        pytest.skip("Tansu offers no CreatePartitions")
    from kafkalite.client import KafkaAdminClient

    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("grow"), 1)
    with KafkaConsumer(topic, bootstrap_servers=bs, group_id=new_topic_name("ggrow"), **FAST) as c:
        wait_until(lambda: (c.poll(50), len(c.assignment()) == 1)[1], 30, "the first assignment")
        with KafkaAdminClient(bootstrap_servers=bs) as admin:
            admin.create_partitions({topic: 3})
        wait_until(lambda: (c.poll(50), len(c.assignment()) == 3)[1], 30, "the new partitions")
