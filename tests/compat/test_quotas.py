"""Client quotas with real clients: quotas set and read through kafka-python's protocol classes
(AlterClientQuotas / DescribeClientQuotas), a confluent-kafka producer held to 1 MB/s over 15 s
while an unthrottled one keeps its pace, a consumer held to its byte rate, throttle times reported.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

from kafkalite.testing import Broker

pytestmark = pytest.mark.compat

MIB = 1 << 20
SLOW_SECONDS = 15  # how long the throttled producer runs (its rate is averaged over that)
_E = AlterClientQuotasRequest.EntryData


@pytest.fixture(scope="module")
def qbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    # a new group's first rebalance is not held back 3 s: the consumer test times from the first record
    quick = {"group.initial.rebalance.delay.ms": 0}
    with Broker(tmp_path_factory.mktemp("quotas"), config=quick, num_partitions=1) as b:
        yield b


@pytest.fixture
def admin(qbroker: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=qbroker.bootstrap_servers)
    yield client
    client.close()


def _send(admin: KafkaAdminClient, request: Any) -> Any:
    return admin._manager.run(admin._manager.send, request)  # kafka-python has no quota helper


def alter(
    admin: KafkaAdminClient,
    entity: list[tuple[str, str | None]],
    ops: dict[str, float | None],
    validate_only: bool = False,
) -> tuple[int, str | None]:
    entry = _E(
        entity=[_E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[
            _E.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
            for k, v in ops.items()
        ],
    )
    resp = _send(admin, AlterClientQuotasRequest(entries=[entry], validate_only=validate_only))
    (result,) = resp.entries
    return result.error_code, result.error_message


def describe(
    admin: KafkaAdminClient, components: list[tuple[str, int, str | None]], strict: bool = False
) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    comps = [
        DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n)
        for t, m, n in components
    ]
    resp = _send(admin, DescribeClientQuotasRequest(components=comps, strict=strict))
    assert resp.error_code == 0, resp.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def test_alter_and_describe_through_kafka_python(admin: KafkaAdminClient) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    assert alter(admin, [("user", user)], {"producer_byte_rate": 2048}) == (0, None)
    assert alter(admin, [("user", user), ("client-id", None)], {"request_percentage": 12.5}) == (
        0,
        None,
    )
    assert alter(admin, [("client-id", "app-x")], {"consumer_byte_rate": 4096}) == (0, None)
    exact = describe(admin, [("user", 0, user)])
    assert exact == {
        (("user", user),): {"producer_byte_rate": 2048.0},
        (("user", user), ("client-id", None)): {"request_percentage": 12.5},
    }
    assert describe(admin, [("user", 0, user)], strict=True) == {
        (("user", user),): {"producer_byte_rate": 2048.0}
    }
    defaults = describe(admin, [("client-id", 1, None)])
    assert (("user", user), ("client-id", None)) in defaults
    assert (("client-id", "app-x"),) not in defaults
    # validate_only changes nothing; removing the last key removes the entity
    assert alter(admin, [("user", user)], {"producer_byte_rate": 1}, validate_only=True)[0] == 0
    assert describe(admin, [("user", 0, user)], strict=True)[(("user", user),)] == {
        "producer_byte_rate": 2048.0
    }
    assert alter(admin, [("user", user)], {"producer_byte_rate": None}) == (0, None)
    assert describe(admin, [("user", 0, user)], strict=True) == {}


@pytest.mark.parametrize(
    ("entity", "ops", "says"),
    [
        ([("user", "x")], {"producer_byte_rate": 1.5}, "whole number"),
        ([("user", "x")], {"producer_byte_rate": -5}, "must be positive"),
        ([("user", "x")], {"bogus_rate": 5}, "Unknown quota key"),
        ([("user", "x")], {"controller_mutation_rate": 5}, "not enforced"),
        ([("ip", "10.0.0.1")], {"producer_byte_rate": 5}, "only connection_creation_rate"),
        ([("user", "x"), ("user", "y")], {"producer_byte_rate": 5}, "Duplicate"),
        ([("group", "g")], {"producer_byte_rate": 5}, "Unknown quota entity type"),
    ],
)
def test_bad_alterations_are_refused(
    admin: KafkaAdminClient, entity: Any, ops: Any, says: str
) -> None:
    code, message = alter(admin, entity, ops)
    assert code == 42  # INVALID_REQUEST
    assert message is not None and says in message
    assert describe(admin, [("user", 0, "x")]) == {}


def _produce_for(
    producer: Producer, seconds: float, value: bytes, acked: list[tuple[float, int]]
) -> None:
    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    topic = f"q-{uuid.uuid4().hex[:8]}"
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    producer.flush(60)


def _rate(acked: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(n for t, n in acked if start <= t < end) / (end - start)


@pytest.mark.slow
def test_producer_held_to_its_byte_rate_while_another_keeps_its_pace(
    qbroker: Broker, admin: KafkaAdminClient
) -> None:
    assert alter(admin, [("client-id", "slow-producer")], {"producer_byte_rate": MIB}) == (0, None)
    throttles: list[int] = []

    def producer(client_id: str) -> Producer:
        return Producer(
            {
                "bootstrap.servers": qbroker.bootstrap_servers,
                "client.id": client_id,
                "linger.ms": 5,
                "batch.size": 65536,
                "queue.buffering.max.kbytes": 4096,
                "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
            }
        )

    value = b"v" * 8192
    fast_alone: list[tuple[float, int]] = []
    t0 = time.monotonic()
    _produce_for(producer("fast-producer"), 4, value, fast_alone)
    baseline = _rate(fast_alone, t0 + 1, t0 + 4)

    slow_acked: list[tuple[float, int]] = []
    fast_acked: list[tuple[float, int]] = []
    slow = threading.Thread(
        target=_produce_for, args=(producer("slow-producer"), SLOW_SECONDS, value, slow_acked)
    )
    start = time.monotonic()
    slow.start()
    time.sleep(4)  # the slow producer is being throttled
    t1 = time.monotonic()
    _produce_for(producer("fast-producer"), 6, value, fast_acked)
    beside = _rate(fast_acked, t1 + 1, t1 + 6)
    slow.join(120)
    slow_rate = _rate(slow_acked, start, start + SLOW_SECONDS)
    print(
        f"\nslow producer: {slow_rate / MIB:.3f} MiB/s over {SLOW_SECONDS} s (quota 1 MiB/s); "
        f"fast producer alone {baseline / MIB:.1f} MiB/s, beside it {beside / MIB:.1f} MiB/s; "
        f"{len(throttles)} throttle reports"
    )
    assert slow_rate == pytest.approx(MIB, rel=0.10)
    assert throttles  # librdkafka saw throttle_time_ms in the answers
    assert beside > 0.5 * baseline
    assert beside > 10 * MIB
    assert alter(admin, [("client-id", "slow-producer")], {"producer_byte_rate": None})[0] == 0


def test_consumer_held_to_its_byte_rate(qbroker: Broker, admin: KafkaAdminClient) -> None:
    topic = f"qc-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": qbroker.bootstrap_servers, "linger.ms": 5})
    value = b"c" * 16384
    total = 6 * MIB
    for _ in range(total // len(value)):
        producer.produce(topic, value)
        producer.poll(0)
    assert producer.flush(30) == 0
    rate = 2 * MIB
    assert alter(admin, [("client-id", "slow-consumer")], {"consumer_byte_rate": rate})[0] == 0
    throttles: list[int] = []

    def drain(client_id: str) -> float:
        consumer = Consumer(
            {
                "bootstrap.servers": qbroker.bootstrap_servers,
                "group.id": f"g-{uuid.uuid4().hex[:6]}",
                "client.id": client_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
            }
        )
        consumer.subscribe([topic])
        got, started = 0, None
        deadline = time.monotonic() + 60
        while got < total and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            if started is None:
                started = time.monotonic()
            got += len(msg.value())
        consumer.close()
        assert got == total
        assert started is not None
        return time.monotonic() - started

    quick = drain("fast-consumer")
    held = drain("slow-consumer")
    print(
        f"\nconsumer: {total / MIB:.0f} MiB in {quick:.2f} s unthrottled, {held:.2f} s at 2 MiB/s"
    )
    # a window's allowance comes at once; the rest at the quota's pace
    assert held >= (total - rate) / rate * 0.9
    assert held < (total / rate) * 2
    assert throttles
    assert quick < held
