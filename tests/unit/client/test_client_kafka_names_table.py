"""Kafka's Java / librdkafka property names in kafkalite's client: each one honoured changes what the
producer, consumer or connection does (given as strings, as Spark's kafka.* options are); others warn once.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_broker import FakeBroker

from kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafkalite.client.config import CONSUMER, PRODUCER, make_config
from kafkalite.client.kafka_names import ALIASES, translate


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeBroker]:
    b = FakeBroker(init_producer_id=True)
    yield b
    b.close()


@pytest.fixture(scope="module")
def defaults(fake: FakeBroker) -> Iterator[dict[type, Any]]:
    p = KafkaProducer(bootstrap_servers=fake.bootstrap_servers)
    c = KafkaConsumer(bootstrap_servers=fake.bootstrap_servers, group_id="g")
    yield {KafkaProducer: p, KafkaConsumer: c}
    p.close()
    c.close()


def _call(fn: Any, *args: Any) -> Any:
    """What a (de)serializer makes of args; its error's type when it refuses or is None."""
    try:
        return fn(*args)
    except Exception as exc:
        return type(exc)


P = KafkaProducer
C = KafkaConsumer

# (client type, setting, value as a string, what it changes, the expected effect)
CASES: list[tuple[type, str, str, Callable[[Any], Any], Any]] = [
    # Java names (the same here), given as strings
    (P, "linger.ms", "77", lambda p: p._acc.linger, 0.077),
    (P, "batch.size", "999", lambda p: p._acc.batch_size, 999),
    (P, "acks", "1", lambda p: p._sender.acks, 1),
    (P, "compression.type", "gzip", lambda p: p._acc.compression, 1),
    (P, "retries", "3", lambda p: p._sender.retries, 3),
    (P, "delivery.timeout.ms", "9000", lambda p: p._acc.delivery_timeout, 9.0),
    (P, "max.in.flight.requests.per.connection", "2", lambda p: p._sender.max_in_flight, 2),
    (P, "enable.idempotence", "true", lambda p: p._sender.idempotent, True),
    (P, "request.timeout.ms", "4321", lambda p: p._client.request_timeout, 4.321),
    (P, "metadata.max.age.ms", "60000", lambda p: p._client.metadata.max_age, 60.0),
    (P, "retry.backoff.ms", "250", lambda p: p._acc.retry_backoff, 0.25),
    (P, "client.id", "app-1", lambda p: p._client.client_id, "app-1"),
    (C, "max.partition.fetch.bytes", "12345", lambda c: c._fetcher.partition_max_bytes, 12345),
    (C, "fetch.max.bytes", "234567", lambda c: c._fetcher.max_bytes, 234567),
    (C, "fetch.min.bytes", "10", lambda c: c._fetcher.min_bytes, 10),
    (C, "fetch.max.wait.ms", "123", lambda c: c._fetcher.max_wait_ms, 123),
    (C, "max.poll.records", "7", lambda c: c._max_poll_records, 7),
    (C, "isolation.level", "read_committed", lambda c: c._fetcher.read_committed, True),
    (C, "enable.auto.commit", "false", lambda c: c._auto_commit, False),
    (C, "auto.offset.reset", "earliest", lambda c: c._subs.default_reset, "earliest"),
    (C, "auto.offset.reset", "smallest", lambda c: c._subs.default_reset, "earliest"),
    (C, "session.timeout.ms", "12000", lambda c: c._coordinator.session_timeout_ms, 12000),
    # librdkafka / kafka-python aliases: the table's rows
    (P, "queue.buffering.max.ms", "66", lambda p: p._acc.linger, 0.066),
    (P, "queue.buffering.max.kbytes", "2048", lambda p: p._acc.buffer_memory, 2048 * 1024),
    (P, "message.max.bytes", "2000000", lambda p: p._max_request, 2000000),
    (P, "message.send.max.retries", "4", lambda p: p._sender.retries, 4),
    (P, "message.timeout.ms", "8000", lambda p: p._acc.delivery_timeout, 8.0),
    (P, "compression.codec", "lz4", lambda p: p._acc.compression, 3),
    (P, "request.required.acks", "0", lambda p: p._sender.acks, 0),
    (P, "max.in.flight", "3", lambda p: p._sender.max_in_flight, 3),
    (P, "socket.timeout.ms", "5555", lambda p: p._client.request_timeout, 5.555),
    (P, "topic.metadata.refresh.interval.ms", "7000", lambda p: p._client.metadata.max_age, 7.0),
    (P, "key.serializer", "org.apache.kafka.common.serialization.StringSerializer",
     lambda p: _call(p._key_ser, "t", 12), b"12"),
    (C, "fetch.wait.max.ms", "321", lambda c: c._fetcher.max_wait_ms, 321),
    (C, "fetch.message.max.bytes", "54321", lambda c: c._fetcher.partition_max_bytes, 54321),
    (C, "value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer",
     lambda c: _call(c._fetcher.value_des, "t", b"x"), "x"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "name", "value", "read", "expected"),
    CASES,
    ids=[f"{k.__name__[5:]}:{n}={v[:20]}" for k, n, v, _, _ in CASES],
)
def test_each_name_changes_behaviour(
    fake: FakeBroker,
    defaults: dict[type, Any],
    kind: type,
    name: str,
    value: str,
    read: Callable[[Any], Any],
    expected: Any,
) -> None:
    base = {"bootstrap.servers": fake.bootstrap_servers, "group.id": "g"}
    if kind is P:
        base = {"bootstrap.servers": fake.bootstrap_servers}
    default = defaults[kind]
    assert read(default) != expected, "the default already gives the expected value"
    client = kind(config={**base, name: value})
    try:
        assert read(client) == expected
    finally:
        client.close()


def test_every_alias_row_has_a_case() -> None:
    tested = {name for _, name, *_ in CASES}
    # rows tested elsewhere: security ones (test_client_sec_config, the compat tests), the
    # bootstrap and socket-buffer ones below
    elsewhere = {
        "metadata.broker.list",
        "socket.receive.buffer.bytes",
        "socket.send.buffer.bytes",
        "sasl.mechanisms",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "sasl.plain.username",
        "sasl.plain.password",
        "ssl.cafile",
        "ssl.certfile",
        "ssl.keyfile",
        "ssl.password",
        "ssl.check.hostname",
    }
    assert set(ALIASES) <= tested | elsewhere


def test_bootstrap_alias(fake: FakeBroker) -> None:
    with KafkaAdminClient(config={"metadata.broker.list": fake.bootstrap_servers}) as admin:
        assert admin._client.bootstrap == [("127.0.0.1", fake.port)]


@pytest.mark.parametrize(
    ("rcv", "snd"),
    [("receive.buffer.bytes", "send.buffer.bytes"), ("socket.receive.buffer.bytes", "socket.send.buffer.bytes")],
)  # fmt: skip
def test_socket_buffer_sizes(fake: FakeBroker, rcv: str, snd: str) -> None:
    conf = {"bootstrap.servers": fake.bootstrap_servers, rcv: "40000", snd: "50000"}
    with KafkaAdminClient(config=conf) as admin:
        admin.list_topics()

        async def sizes() -> list[tuple[int, int]]:
            out = []
            for conn in admin._client._conns.values():
                assert conn._writer is not None
                sock = conn._writer.get_extra_info("socket")
                out.append(
                    (
                        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                    )
                )
            return out

        got = admin._io.run(sizes())
    assert got
    # Linux doubles what is asked (room for its bookkeeping)
    assert all(r in (40000, 80000) and s in (50000, 100000) for r, s in got)


def test_names_with_no_effect_are_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kafkalite.client")
    cfg = make_config(
        CONSUMER,
        {
            "interceptor.classes": "com.example.Tracing",
            "statistics.interval.ms": "1000",
            "fetch.wait.max.ms": "10",
            "group.protocol": "consumer",
            "key.deserializer": "io.confluent.kafka.serializers.KafkaAvroDeserializer",
            "linger.ms": "5",  # a producer name: no effect on a consumer
        },
        {"enable_partition_eof": True},
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    for name in (
        "interceptor.classes",
        "statistics.interval.ms",
        "group.protocol",
        "key.deserializer",
        "linger.ms",
        "enable_partition_eof",
    ):
        assert repr(name) in warnings[0]
    assert "fetch.wait.max.ms" not in warnings[0]
    assert cfg["fetch.max.wait.ms"] == 10
    assert cfg["key.deserializer"] is None  # the Avro class name is kept aside, not used
    assert cfg["interceptor.classes"] == "com.example.Tracing"  # kept, as before


def test_no_warning_for_honoured_names(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kafkalite.client")
    make_config(PRODUCER, {"queue.buffering.max.ms": "1", "acks": "all"}, {"batch_size": 10})
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_translate_java_serde_class_names() -> None:
    bytes_class = "org.apache.kafka.common.serialization.ByteArraySerializer"
    assert translate("value.serializer", bytes_class, PRODUCER) == ("value.serializer", "bytes")
    assert translate("value.serializer", "str", PRODUCER) == ("value.serializer", "str")
    assert translate("value.serializer", "org.apache.LongSerializer", PRODUCER) is None
    assert translate("ssl.check.hostname", False, PRODUCER) == (
        "ssl.endpoint.identification.algorithm",
        "",
    )


def test_honoured_keeps_aliases_for_another_client_type() -> None:
    from kafkalite.client.config import ADMIN, honoured

    given = {
        "bootstrap.servers": "b:1",
        "sasl.mechanisms": "PLAIN",
        "ssl.truststore.location": "/ca.pem",
        "fetch.wait.max.ms": "5",  # a consumer setting: not for an admin client
        "linger.ms": "5",
    }
    assert honoured(ADMIN, given) == {
        "bootstrap.servers": "b:1",
        "sasl.mechanisms": "PLAIN",
        "ssl.truststore.location": "/ca.pem",
    }
