"""Consumer features against kafkalite and Tansu: iteration with consumer_timeout_ms, deserializers,
commit_async callbacks, auto commit, and static membership (group.instance.id) surviving a restart."""

from __future__ import annotations

import threading
import time

import pytest
from test_client_support import any_broker, create_topic, new_topic_name  # noqa: F401

from kafkalite.client import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]
FAST = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300, "auto_offset_reset": "earliest"}


def produce(bs: str, topic: str, n: int, partitions: int = 1) -> None:
    with KafkaProducer(bootstrap_servers=bs, value_serializer="json", key_serializer="str") as p:
        for i in range(n):
            p.send(topic, {"i": i}, key=f"k{i}", partition=i % partitions)
        p.flush(20)


def test_iteration_and_deserializers(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("it"), 1)
    produce(bs, topic, 25)
    c = KafkaConsumer(
        bootstrap_servers=bs,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1500,
        value_deserializer="json",
        key_deserializer="str",
    )
    c.assign([(topic, 0)])
    got = list(c)  # stops after 1.5 s without records
    c.close()
    assert [(r.key, r.value["i"], r.offset) for r in got] == [(f"k{i}", i, i) for i in range(25)]


def test_commit_async_callback_and_auto_commit(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("ac"), 1)
    tp = TopicPartition(topic, 0)
    group = new_topic_name("gac")
    produce(bs, topic, 10)
    done = threading.Event()
    results: list[object] = []
    with KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False, **FAST) as c:
        c.assign([tp])

        def cb(offsets: dict, exc: BaseException | None) -> None:
            results.append((offsets, exc))
            done.set()

        c.commit_async({tp: OffsetAndMetadata(3, "async")}, callback=cb)
        assert done.wait(10)
        assert results[0][1] is None and c.committed(tp).offset == 3
    with KafkaConsumer(
        bootstrap_servers=bs, group_id=group, auto_commit_interval_ms=200, **FAST
    ) as c:
        c.assign([tp])
        n = 0
        deadline = time.monotonic() + 20
        while n < 7 and time.monotonic() < deadline:
            n += sum(len(v) for v in c.poll(200).values())
        assert n == 7  # resumed at the committed offset 3
        deadline = time.monotonic() + 10
        while c.committed(tp).offset != 10 and time.monotonic() < deadline:
            c.poll(100)  # auto commit happens inside poll
        assert c.committed(tp).offset == 10


def test_static_member_keeps_partitions_across_restart(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("st"), 4)
    group = new_topic_name("gst")

    class Member(threading.Thread):
        """One static member polling on its own thread (a join blocks its poll, as in Kafka)."""

        def __init__(self, instance: str) -> None:
            super().__init__(daemon=True)
            self.c = KafkaConsumer(
                bootstrap_servers=bs,
                group_id=group,
                group_instance_id=instance,
                partition_assignment_strategy=["range"],
                **FAST,
            )
            self.c.subscribe([topic])
            self.stop = threading.Event()
            self.assignment: set[TopicPartition] = set()
            self.start()

        def run(self) -> None:
            while not self.stop.is_set():
                self.c.poll(50)
                self.assignment = self.c.assignment()
            self.c.close()

        def close(self) -> None:
            self.stop.set()
            self.join(20)

    def wait(cond, what: str) -> None:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not cond():
            time.sleep(0.05)
        assert cond(), what

    a, b = Member("a"), Member("b")
    try:
        wait(lambda: len(a.assignment) == 2 and len(b.assignment) == 2, "two members with 2 each")
        before, b_before = a.assignment, b.assignment
        a.close()  # a static member does not leave the group on close
        a = Member("a")
        wait(
            lambda: a.assignment == before, "the restarted static member to get its partitions back"
        )
        assert b.assignment == b_before
    finally:
        a.close()
        b.close()
