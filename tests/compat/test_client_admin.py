"""KafkaAdminClient against kafkalite and Tansu: topics, partitions, configs, records, groups, cluster."""

from __future__ import annotations

import time

import pytest
from test_client_support import any_broker, new_topic_name  # noqa: F401

from kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaError, KafkaProducer, NewTopic
from kafkalite.client import TopicPartition as TP
from kafkalite.client.admin import RESOURCE_TOPIC

pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]


def test_topics_partitions_configs(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    name = new_topic_name("adm")
    with KafkaAdminClient(bootstrap_servers=bs) as admin:
        admin.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "3600000"})])
        assert name in admin.list_topics()
        [desc] = admin.describe_topics([name])
        assert [p.partition for p in desc.partitions] == [0, 1]
        with pytest.raises(KafkaError):
            admin.create_topics([NewTopic(name, 1, 1)])  # already exists
        info = admin.describe_cluster()
        assert info["brokers"]
        if any_broker.kind == "tansu":
            pytest.xfail(
                "Tansu: no CreatePartitions (API 37), DescribeConfigs answers no entries, "
                "DeleteRecords closes the connection"
            )
        admin.create_partitions({name: 3})
        [desc] = admin.describe_topics([name])
        assert len(desc.partitions) == 3
        cfgs = admin.describe_configs([(RESOURCE_TOPIC, name)])[(RESOURCE_TOPIC, name)]
        assert cfgs["retention.ms"].value == "3600000"
        admin.alter_configs({(RESOURCE_TOPIC, name): {"retention.ms": "7200000"}})
        cfgs = admin.describe_configs([(RESOURCE_TOPIC, name)], ["retention.ms"])[
            (RESOURCE_TOPIC, name)
        ]
        assert cfgs["retention.ms"].value == "7200000"
        with KafkaProducer(bootstrap_servers=bs) as p:
            for i in range(10):
                p.send(name, b"%d" % i, partition=0)
            p.flush(10)
        assert admin.delete_records({TP(name, 0): 4}) == {TP(name, 0): 4}
        with KafkaConsumer(bootstrap_servers=bs) as c:
            assert c.beginning_offsets([TP(name, 0)]) == {TP(name, 0): 4}
        admin.delete_topics([name])
        assert name not in admin.list_topics()


def test_groups(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = new_topic_name("admg")
    group = new_topic_name("grp")
    with KafkaAdminClient(bootstrap_servers=bs) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        with KafkaProducer(bootstrap_servers=bs) as p:
            for i in range(6):
                p.send(topic, b"%d" % i, partition=i % 2)
            p.flush(10)
        c = KafkaConsumer(
            topic,
            bootstrap_servers=bs,
            group_id=group,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        try:
            n = 0
            deadline = time.monotonic() + 30
            while n < 6 and time.monotonic() < deadline:
                n += sum(len(v) for v in c.poll(200).values())
            c.commit()
            assert group in [g for g, _, _ in admin.list_groups()]
            [g] = admin.describe_groups([group])
            assert g.protocol_type == "consumer" and len(g.members) == 1
            if (
                any_broker.kind != "tansu"
            ):  # Tansu defect: DescribeGroups has empty member_assignment
                assert sorted(g.members[0].assignment) == [TP(topic, 0), TP(topic, 1)]
        finally:
            c.close()
        offs = admin.list_consumer_group_offsets(group, [TP(topic, 0), TP(topic, 1)])
        assert {tp: o.offset for tp, o in offs.items()} == {TP(topic, 0): 3, TP(topic, 1): 3}
        admin.alter_consumer_group_offsets(group, {TP(topic, 0): 1})
        offs = admin.list_consumer_group_offsets(group, [TP(topic, 0)])
        assert offs[TP(topic, 0)].offset == 1
        admin.delete_groups([group])
        assert group not in [g for g, _, _ in admin.list_groups()]


def test_describing_an_unknown_topic_creates_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Like Kafka's AdminClient: asking about a topic is not a reason to create it."""
    from kafkalite.testing import Broker

    with (
        Broker(tmp_path) as b,
        KafkaAdminClient(bootstrap_servers=b.bootstrap_servers) as admin,
    ):
        with pytest.raises(KafkaError) as err:
            admin.describe_topics(["never-created"])
        assert "UNKNOWN_TOPIC_OR_PARTITION" in str(err.value)
        assert "never-created" not in admin.list_topics()
