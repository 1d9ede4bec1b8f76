"""Kafka 4 protocol parity through real clients: ListOffsets max-timestamp, incremental APPEND/SUBTRACT,
ListGroups filters, record-level produce errors and Metadata's allow_auto_topic_creation."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)

pytestmark = pytest.mark.compat


def _create(bs: str, topic: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def test_list_offsets_max_timestamp_names_the_record(broker, topic):
    """KAFKA-16310: the largest timestamp sits mid-batch; librdkafka's OffsetSpec.max_timestamp
    (ListOffsets v7+) gets that record's offset, not the batch's last."""
    _create(broker.bootstrap_servers, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 200})
    for ts in (1_000, 50_000, 2_000, 3_000):
        p.produce(topic, value=b"v", timestamp=1_700_000_000_000 + ts)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(topic, 0)
    res = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(30)
    assert (res.offset, res.timestamp) == (1, 1_700_000_050_000)
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30)
    assert latest.offset == 4


def _incremental(admin: AdminClient, res_type, name: str, *ops: tuple) -> None:
    res = ConfigResource(
        res_type,
        name,
        incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, op, v in ops],
    )
    admin.incremental_alter_configs([res])[res].result(30)


def _value(admin: AdminClient, res_type, name: str, key: str) -> str:
    res = ConfigResource(res_type, name)
    return admin.describe_configs([res])[res].result(30)[key].value


def test_incremental_append_and_subtract_on_list_configs(broker, topic):
    """APPEND starts from the default when the topic has no override (delete + compact); SUBTRACT
    removes elements; a non-list config refuses both with INVALID_CONFIG, as Kafka's controller."""
    bs = broker.bootstrap_servers
    _create(bs, topic)
    admin = AdminClient({"bootstrap.servers": bs})
    topic_res = ConfigResource.Type.TOPIC
    _incremental(admin, topic_res, topic, ("cleanup.policy", AlterConfigOpType.APPEND, "compact"))
    assert _value(admin, topic_res, topic, "cleanup.policy") == "delete,compact"
    _incremental(admin, topic_res, topic, ("cleanup.policy", AlterConfigOpType.APPEND, "compact"))
    assert _value(admin, topic_res, topic, "cleanup.policy") == "delete,compact"
    _incremental(admin, topic_res, topic, ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete"))
    assert _value(admin, topic_res, topic, "cleanup.policy") == "compact"
    for op in (AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT):
        with pytest.raises(confluent_kafka.KafkaException) as exc:
            _incremental(admin, topic_res, topic, ("retention.ms", op, "1000"))
        err = exc.value.args[0]
        assert err.code() == confluent_kafka.KafkaError.INVALID_CONFIG
        assert "not LIST" in err.str()
    assert _value(admin, topic_res, topic, "retention.ms") == "604800000"

    broker_res = ConfigResource.Type.BROKER
    node = str(next(iter(admin.list_topics(timeout=10).brokers)))
    key = "log.cleanup.policy"
    try:
        _incremental(admin, broker_res, node, (key, AlterConfigOpType.APPEND, "compact"))
        assert _value(admin, broker_res, node, key) == "delete,compact"
        _incremental(admin, broker_res, node, (key, AlterConfigOpType.SUBTRACT, "compact"))
        assert _value(admin, broker_res, node, key) == "delete"
        with pytest.raises(confluent_kafka.KafkaException) as exc:
            _incremental(
                admin, broker_res, node, ("log.retention.ms", AlterConfigOpType.APPEND, "1")
            )
        assert exc.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    finally:
        _incremental(admin, broker_res, node, (key, AlterConfigOpType.DELETE, None))


def test_list_groups_filters_by_state_and_type(broker, topic):
    """ListGroups v4 states filter (KIP-518) and v5 types filter (KIP-848) through librdkafka: every
    group here is classic; a consumer-type filter lists none of them."""
    from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType

    bs = broker.bootstrap_servers
    _create(bs, topic)
    group = f"g-{topic}"
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "session.timeout.ms": 6000})
    admin = AdminClient({"bootstrap.servers": bs})

    def listed(**filters: object) -> dict:
        res = admin.list_consumer_groups(request_timeout=10, **filters).result(30)
        assert not res.errors, res.errors
        return {g.group_id: g for g in res.valid}

    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while not c.assignment():
            assert time.monotonic() < deadline, "the consumer never got an assignment"
            c.poll(0.2)
        stable = listed(states={ConsumerGroupState.STABLE})
        assert group in stable and stable[group].state == ConsumerGroupState.STABLE
        assert group not in listed(states={ConsumerGroupState.EMPTY})
        classic = listed(types={ConsumerGroupType.CLASSIC})
        assert group in classic and classic[group].type == ConsumerGroupType.CLASSIC
        assert listed(types={ConsumerGroupType.CONSUMER}) == {}
        both = listed(states={ConsumerGroupState.STABLE}, types={ConsumerGroupType.CLASSIC})
        assert group in both
    finally:
        c.close()
    empty = listed(states={ConsumerGroupState.EMPTY}, types={ConsumerGroupType.CLASSIC})
    assert group in empty and empty[group].state == ConsumerGroupState.EMPTY
    assert group not in listed(states={ConsumerGroupState.STABLE})


def test_keyless_record_to_a_compacted_topic_is_refused(broker, topic):
    """KIP-467 through librdkafka and kafka-python: INVALID_RECORD for the batch holding a keyless
    record on a compacted topic, nothing of it appended; keyed records still go through."""
    bs = broker.bootstrap_servers
    _create(bs, topic, **{"cleanup.policy": "compact"})
    errors: list = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 50})
    p.produce(topic, key=None, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.produce(topic, key=b"k", value=b"keyed")
    p.flush(30)
    assert errors and errors[0] is not None
    assert errors[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
    p.produce(topic, key=b"k", value=b"alone", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0 and errors[-1] is None

    kafka = pytest.importorskip("kafka")
    from kafka.errors import InvalidRecordError

    kp = kafka.KafkaProducer(bootstrap_servers=bs, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            kp.send(topic, value=b"no key").get(timeout=30)
        assert kp.send(topic, key=b"k2", value=b"v").get(timeout=30).offset >= 1
    finally:
        kp.close()
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bs, "group.id": f"r-{topic}", "auto.offset.reset": "earliest"}
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.key())
        assert None not in got and b"k2" in got
    finally:
        c.close()


def _ask_for(bs: str, topic: str, allow: bool, *, assign: bool) -> None:
    """A librdkafka consumer that subscribes to `topic` or assigns itself its partition 0 for a few
    seconds. (librdkafka asks for creation only for topics it holds a handle for, as assign does;
    a bare subscription always sends allow_auto_topic_creation=false.)"""
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"a-{topic}",
            "allow.auto.create.topics": allow,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    try:
        if assign:
            c.assign([TopicPartition(topic, 0)])
        else:
            c.subscribe([topic])
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            c.poll(0.2)
    finally:
        c.close()


def _exists(bs: str, topic: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bs})
    return topic in admin.list_topics(timeout=10).topics


def test_metadata_auto_creation_follows_the_request_and_the_broker(broker, topic, tmp_path):
    """Metadata v4+ allow_auto_topic_creation: false never creates; true creates only where the
    broker's auto.create.topics.enable is true (librdkafka's consumer allow.auto.create.topics)."""
    from kafkalite.testing import Broker

    bs = broker.bootstrap_servers
    for assign in (False, True):
        _ask_for(bs, f"{topic}-no", allow=False, assign=assign)
        assert not _exists(bs, f"{topic}-no")
    _ask_for(bs, f"{topic}-yes", allow=True, assign=True)
    assert _exists(bs, f"{topic}-yes")
    with Broker(tmp_path, num_partitions=1, auto_create_topics_enable=False) as closed:
        _ask_for(closed.bootstrap_servers, topic, allow=True, assign=True)
        assert not _exists(closed.bootstrap_servers, topic)


def test_describe_topic_partitions_pages_and_hides_what_one_may_not_describe(tmp_path, topic):
    """KIP-966 through kafka-python's admin client (DescribeTopicPartitions, key 75), with Kafka's
    authorizer: a topic with ACLs for someone else is refused when named and left out of a listing,
    as Metadata does; the operations bit field (KIP-430) follows the ACLs."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    from kafka.admin import KafkaAdminClient

    from kafkalite.testing import Broker

    config = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    secret, mine, wide = f"{topic}-secret", f"{topic}-mine", f"{topic}-wide"

    def acl(name: str, principal: str, op) -> AclBinding:  # type: ignore[no-untyped-def]
        return AclBinding(
            ResourceType.TOPIC,
            name,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            op,
            AclPermissionType.ALLOW,
        )

    with Broker(tmp_path, config=config) as b:
        b.create_topic(secret, 1)
        b.create_topic(mine, 2)
        b.create_topic(wide, 3)
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        grants = [acl(secret, "User:someone-else", AclOperation.ALL)]
        grants.append(acl(mine, "User:ANONYMOUS", AclOperation.READ))
        for f in admin.create_acls(grants).values():
            f.result(30)
        kp = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            named = kp.describe_topic_partitions([wide, secret, mine])
            by = {t["name"]: t for t in named["topics"]}
            assert by[secret]["error_code"] == 29  # TOPIC_AUTHORIZATION_FAILED
            assert by[secret]["partitions"] == []
            assert getattr(by[secret]["topic_id"], "int", 0) == 0  # kafka-python: None for zero
            assert [p["partition_index"] for p in by[wide]["partitions"]] == [0, 1, 2]
            assert by[mine]["topic_authorized_operations"] == (1 << 3) | (1 << 8)  # READ, DESCRIBE
            assert by[wide]["topic_authorized_operations"] == sum(
                1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11)
            )
            listed = kp.describe_topic_partitions([])
            names = [t["name"] for t in listed["topics"]]
            assert mine in names and wide in names and secret not in names
            seen, cursor = [], None
            while True:
                page = kp.describe_topic_partitions(
                    [wide, mine], response_partition_limit=2, cursor=cursor
                )
                seen += [
                    (t["name"], p["partition_index"])
                    for t in page["topics"]
                    for p in t["partitions"]
                ]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            assert seen == [(mine, 0), (mine, 1), (wide, 0), (wide, 1), (wide, 2)]
        finally:
            kp.close()
