"""Helpers shared by the Spark connector tests: produce records and read a whole topic back with the
kafkalite client (no Spark involved, so the tests check Spark against an independent reader)."""

from __future__ import annotations

from typing import Any

from kafkalite.testing import Broker

# Java options for the short-lived Spark JVMs with little to compute that the tests start in other
# processes (the exactly-once fault tests' drivers and executors, the standalone master and workers, the
# Connect server): the client JIT only. On a small machine the optimising compiler's threads cost them
# more CPU than they give back (a cold local session starts and runs its first queries in about half the
# time). Not for JVMs that run the stateful clickstream pipeline (the session of conftest.py, the
# pipeline's driver and executors): those were no faster with it. Nothing the tests check depends on it.
SPARK_TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def produce(broker: Broker, topic: str, records: list[dict[str, Any]]) -> list[Any]:
    """Send records ({value, key?, partition?, headers?, timestamp_ms?}); returns their RecordMetadata."""
    from kafkalite.client import KafkaProducer

    with KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=1) as producer:
        futures = [producer.send(topic, **r) for r in records]
        producer.flush(30)
        return [f.get(30) for f in futures]


def consume_all(broker: Broker, topic: str, timeout: float = 30) -> list[Any]:
    """Every record of every partition of `topic`, read with the kafkalite client (no group)."""
    import time

    from kafkalite.client import KafkaConsumer, TopicPartition

    with KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    ) as consumer:
        parts = [
            TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        ends = consumer.end_offsets(parts)
        consumer.assign(parts)
        consumer.seek_to_beginning()
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end")
            for recs in consumer.poll(500).values():
                out.extend(recs)
        return out


def consume_committed(broker: Broker, topic: str, timeout: float = 30) -> list[Any]:
    """Every committed record of `topic` (a read_committed reader, up to each partition's last stable
    offset: records of open or aborted transactions are not returned)."""
    import time

    from kafkalite.client import KafkaConsumer, TopicPartition

    with KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    ) as consumer:
        parts = [
            TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        ends = consumer.end_offsets(parts)
        consumer.assign(parts)
        consumer.seek_to_beginning()
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its last stable offset")
            for recs in consumer.poll(200).values():
                out.extend(recs)
        return out
