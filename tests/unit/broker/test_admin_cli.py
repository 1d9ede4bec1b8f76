"""Admin APIs through the wire and the `kafkalite` CLI (topics, produce, consume) against an embedded broker."""

from __future__ import annotations

import io
import json
import sys

from kafkalite.cli.main import main
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS


def create(client, name, partitions=1, configs=None, validate_only=False):  # type: ignore[no-untyped-def]
    cls = APIS[19].request
    t = cls.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=[],
        configs=[
            cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
            for k, v in (configs or {}).items()
        ],
    )
    return client.send(cls(topics=[t], timeout_ms=1000, validate_only=validate_only)).topics[0]


def test_create_topics_errors_and_validate_only(client, topic, broker):
    assert create(client, topic, 2, validate_only=True).error_code == 0
    assert broker.server.metadata_store.get(topic) is None
    r = create(client, topic, 2, {"cleanup.policy": "compact"})
    assert r.error_code == 0 and r.num_partitions == 2
    assert r.topic_id == broker.server.metadata_store.get(topic).topic_id
    assert create(client, topic).error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert create(client, topic + "x", 0).error_code == ErrorCode.INVALID_PARTITIONS
    assert (
        create(client, topic + "y", 1, {"no.such.config": "1"}).error_code
        == ErrorCode.INVALID_CONFIG
    )
    assert (
        create(client, topic + "z", 1, {"retention.ms": "soon"}).error_code
        == ErrorCode.INVALID_CONFIG
    )
    cls = APIS[19].request
    rf = client.send(
        cls(
            topics=[
                cls.CreatableTopic(
                    name=topic + "rf",
                    num_partitions=1,
                    replication_factor=3,
                    assignments=[],
                    configs=[],
                )
            ],
            timeout_ms=1000,
        )
    ).topics[0]
    assert rf.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_describe_configs_sources(client, topic, broker):
    create(client, topic, 1, {"retention.ms": "5000"})
    cls = APIS[32].request
    res = cls.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None)
    r = client.send(
        cls(resources=[res], include_synonyms=True, include_documentation=True)
    ).results[0]
    by = {c.name: c for c in r.configs}
    assert by["retention.ms"].value == "5000" and by["retention.ms"].config_source == 1
    assert by["segment.bytes"].config_source == 5 and by["segment.bytes"].documentation
    assert next(s.source for s in by["retention.ms"].synonyms) == 1
    missing = client.send(
        cls(
            resources=[
                cls.DescribeConfigsResource(
                    resource_type=2, resource_name="nope-" + topic, configuration_keys=None
                )
            ]
        )
    ).results[0]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_configs_replaces_and_incremental_edits(client, topic, broker):
    create(client, topic, 1, {"retention.ms": "5000"})
    alt = APIS[33].request
    res = alt.AlterConfigsResource(
        resource_type=2,
        resource_name=topic,
        configs=[alt.AlterConfigsResource.AlterableConfig(name="segment.bytes", value="1000000")],
    )
    assert client.send(alt(resources=[res], validate_only=False)).responses[0].error_code == 0
    assert broker.server.metadata_store.get(topic).configs == {"segment.bytes": "1000000"}
    assert broker.server.get_log(topic, 0).config.segment_bytes == 1000000
    inc = APIS[44].request
    ops = [
        inc.AlterConfigsResource.AlterableConfig(
            name="cleanup.policy", config_operation=2, value="compact"
        ),
        inc.AlterConfigsResource.AlterableConfig(
            name="segment.bytes", config_operation=1, value=None
        ),
    ]
    r = client.send(
        inc(
            resources=[inc.AlterConfigsResource(resource_type=2, resource_name=topic, configs=ops)],
            validate_only=False,
        )
    )
    assert r.responses[0].error_code == 0
    # APPEND with no override starts from the default, as Kafka does
    assert broker.server.metadata_store.get(topic).configs == {"cleanup.policy": "delete,compact"}
    bad = [
        inc.AlterConfigsResource.AlterableConfig(name="retention.ms", config_operation=2, value="1")
    ]
    r = client.send(
        inc(
            resources=[inc.AlterConfigsResource(resource_type=2, resource_name=topic, configs=bad)],
            validate_only=False,
        )
    )
    assert r.responses[0].error_code == ErrorCode.INVALID_CONFIG


def test_delete_topic_partitions_records_cluster_logdirs(client, topic, broker):
    create(client, topic, 2)
    cp = APIS[37].request
    r = client.send(
        cp(
            topics=[cp.CreatePartitionsTopic(name=topic, count=1, assignments=None)],
            timeout_ms=1000,
            validate_only=False,
        )
    )
    assert r.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    r = client.send(
        cp(
            topics=[cp.CreatePartitionsTopic(name=topic, count=3, assignments=None)],
            timeout_ms=1000,
            validate_only=False,
        )
    )
    assert r.results[0].error_code == 0 and broker.server.metadata_store.get(topic).partitions == 3
    dc = client.send(APIS[60].request(include_cluster_authorized_operations=False))
    assert dc.cluster_id == broker.cluster_id and dc.brokers[0].port == broker.port
    ld = client.send(APIS[35].request(topics=None))
    names = {t.name for res in ld.results for t in res.topics}
    assert topic in names
    dt = APIS[20].request
    r = client.send(dt(topics=[dt.DeleteTopicState(name=topic)], timeout_ms=1000), version=6)
    assert r.responses[0].error_code == 0 and r.responses[0].topic_id is not None
    assert broker.server.metadata_store.get(topic) is None
    r = client.send(dt(topic_names=[topic], timeout_ms=1000), version=3)
    assert r.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_auto_creation_rules(client, topic, tmp_path):
    md = APIS[3].request
    r = client.send(
        md(topics=[md.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    )
    assert r.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    r = client.send(
        md(topics=[md.MetadataRequestTopic(name="bad topic")], allow_auto_topic_creation=True)
    )
    assert r.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    r = client.send(
        md(topics=[md.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True), version=12
    )
    t = r.topics[0]
    assert t.error_code == 0 and t.topic_id.int != 0 and t.partitions[0].isr_nodes == [0]
    assert r.cluster_id and r.controller_id == 0
    from kafkalite.cli.wire import WireClient
    from kafkalite.testing import Broker

    with (
        Broker(tmp_path, auto_create_topics_enable=False, num_partitions=3) as b,
        WireClient(b.bootstrap_servers) as c,
    ):
        r = c.send(md(topics=[md.MetadataRequestTopic(name="x")], allow_auto_topic_creation=True))
        assert r.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        b.create_topic("y", 3)
        assert [len(t.partitions) for t in c.send(md(topics=None)).topics if t.name == "y"] == [3]


def test_cli_topics_produce_consume(broker, topic, capsys, monkeypatch):
    bs = broker.bootstrap_servers
    assert (
        main(
            [
                "topics",
                "--bootstrap-server",
                bs,
                "create",
                topic,
                "--partitions",
                "2",
                "--config",
                "retention.ms=60000",
            ]
        )
        == 0
    )
    assert main(["topics", "--bootstrap-server", bs, "list"]) == 0
    assert topic in capsys.readouterr().out.split()
    assert main(["topics", "--bootstrap-server", bs, "describe", topic]) == 0
    assert "retention.ms" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO("a:1\nb:2\na:3\n"))
    assert (
        main(
            [
                "produce",
                "--bootstrap-server",
                bs,
                "--topic",
                topic,
                "--key-separator",
                ":",
                "--header",
                "h=v",
                "--compression",
                "lz4",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(
            [
                "consume",
                "--bootstrap-server",
                bs,
                "--topic",
                topic,
                "--from-beginning",
                "--max-messages",
                "3",
                "--format",
                "json",
            ]
        )
        == 0
    )
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((d["key"], d["value"]) for d in docs) == [("a", "1"), ("a", "3"), ("b", "2")]
    assert all(d["headers"] == [["h", "v"]] for d in docs)
    a_vals = [d["value"] for d in docs if d["key"] == "a"]
    assert a_vals == ["1", "3"]
    assert (
        main(
            [
                "topics",
                "--bootstrap-server",
                bs,
                "alter",
                topic,
                "--partitions",
                "4",
                "--config",
                "retention.ms=1000",
            ]
        )
        == 0
    )
    assert broker.server.metadata_store.get(topic).partitions == 4
    assert main(["topics", "--bootstrap-server", bs, "delete", topic]) == 0
    assert main(["topics", "--bootstrap-server", bs, "delete", topic]) == 2
    assert "UNKNOWN_TOPIC_OR_PARTITION" in capsys.readouterr().err
    assert main(["topics", "--bootstrap-server", "127.0.0.1:1", "list"]) == 2
    assert "cannot connect" in capsys.readouterr().err
