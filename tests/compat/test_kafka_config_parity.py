"""Config views and values as Kafka has them (issue 31). DescribeConfigs with synonyms says what Kafka says: each synonym carries its own name, unit
and value, and the sources follow Kafka's rules (DEFAULT_CONFIG, STATIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_TOPIC_CONFIG), through confluent-kafka's
describe_configs (which asks for synonyms) and kafka-python's (which keeps repeated synonym names).

The expected answers follow Kafka's DescribeConfigs (ConfigHelper): a broker setting's synonyms are
looked up in the dynamic per-broker, dynamic cluster-default, static and default layers, in that order,
over every spelling of the setting (log.retention.ms, .minutes, .hours); those ahead of the described
name are dropped. A topic setting starts with its own override, then the synonyms of its broker
setting's most specific spelling: so while only log.retention.minutes is set, a topic's retention.ms
is reported as DEFAULT_CONFIG with no synonyms, its value still the one the minutes give (Kafka does
the same).

Also: message.format.version accepted and ignored as ZooKeeper-mode Kafka 3.x does, and config values
of the wrong type refused in Kafka's words, saying what was expected.
"""

from __future__ import annotations

import json
import logging

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KResource
from kafka.admin import ConfigResourceType as KType

from kafkalite.cli.main import main
from kafkalite.testing import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

pytestmark = pytest.mark.compat

D, S = "DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"
DD, DB, T = "DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_TOPIC_CONFIG"
HOUR_MS = 3_600_000

STATIC = {"log.retention.minutes": "120", "log.roll.hours": "24"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("synonyms"), config=STATIC, num_partitions=1) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        kp = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        own = {"retention.ms": "60000", "min.insync.replicas": "1"}
        for topic in (NewTopic("syn-plain", 1, 1), NewTopic("syn-own", 1, 1, config=own)):
            admin.create_topics([topic])[topic.topic].result(30)
        yield b, admin, kp
        kp.close()


def _kp_view(kp, rtype, name: str, keys: list[str]) -> dict[str, tuple]:
    """name -> (value, source, [(synonym, value, source)...]) as kafka-python decodes the answer."""
    res = KResource(rtype, name, dict.fromkeys(keys))
    got = kp.describe_configs([res], include_synonyms=True, config_filter="all")
    configs = got[rtype.name.lower()][name]
    return {
        k: (
            c["value"],
            c["config_source"],
            [(s["name"], s["value"], s["source"]) for s in c["synonyms"]],
        )
        for k, c in configs.items()
    }


def _confluent_view(admin, rtype, name: str, keys: list[str]) -> dict[str, tuple]:
    """name -> (value, source, is_default, read_only, synonym names) as librdkafka decodes the
    answer (its synonyms are a dict by name: a repeated name shows once)."""
    res = ConfigResource(rtype, name)
    got = admin.describe_configs([res])[res].result(30)  # librdkafka asks for synonyms
    return {
        k: (
            got[k].value,
            ConfigSource(got[k].source).name,
            got[k].is_default,
            got[k].is_read_only,
            list(got[k].synonyms),
        )
        for k in keys
    }


def _check(cluster, broker_expected: dict, topic: str, topic_expected: dict) -> None:
    b, admin, kp = cluster
    node = str(b.server.broker_id)
    for rtype, ctype, name, expected in (
        (KType.BROKER, ConfigResource.Type.BROKER, node, broker_expected),
        (KType.TOPIC, ConfigResource.Type.TOPIC, topic, topic_expected),
    ):
        assert _kp_view(kp, rtype, name, list(expected)) == expected
        read_only = rtype is KType.BROKER
        confluent = _confluent_view(admin, ctype, name, list(expected))
        for key, (value, source, synonyms) in expected.items():
            ro = read_only and key.endswith(("hours", "minutes"))
            names = list(dict.fromkeys(n for n, _, _ in synonyms))
            assert confluent[key] == (value, source, source == D, ro, names), key


def _cli(bootstrap: str, *args: str) -> None:
    """`kafkalite configs` in this process (the cluster default is the resource "", which neither
    client library can name: kafka-configs.sh --entity-type brokers --entity-default)."""
    assert (
        main(["configs", "--bootstrap-server", bootstrap, "--entity-type", "brokers", *args]) == 0
    )


def test_synonyms_and_sources_at_each_level(cluster, capsys):
    b, admin, _ = cluster

    # 1. broker defaults and server.properties (log.retention.minutes=120, log.roll.hours=24)
    broker = {
        "log.retention.ms": (None, D, []),  # unset, no default of its own
        "log.retention.minutes": ("120", S, [("log.retention.minutes", "120", S),
                                             ("log.retention.hours", "168", D)]),
        "log.retention.hours": ("168", D, [("log.retention.hours", "168", D)]),
        "log.roll.ms": (None, D, []),
        "log.roll.hours": ("24", S, [("log.roll.hours", "24", S), ("log.roll.hours", "168", D)]),
        "min.insync.replicas": ("1", D, [("min.insync.replicas", "1", D)]),
    }  # fmt: skip
    topic = {
        "retention.ms": (str(2 * HOUR_MS), D, []),
        "segment.ms": (str(24 * HOUR_MS), D, []),
        "min.insync.replicas": ("1", D, [("min.insync.replicas", "1", D)]),
    }
    _check(cluster, broker, "syn-plain", topic)

    # 2. a cluster-wide dynamic default (kafka-configs --entity-type brokers --entity-default)
    _cli(
        b.bootstrap_servers,
        "--entity-default",
        "--alter",
        "--add-config",
        f"log.retention.ms={HOUR_MS},log.roll.ms={3 * HOUR_MS},min.insync.replicas=2",
    )
    retention = [
        ("log.retention.ms", str(HOUR_MS), DD),
        ("log.retention.minutes", "120", S),
        ("log.retention.hours", "168", D),
    ]
    roll = [("log.roll.ms", str(3 * HOUR_MS), DD), *broker["log.roll.hours"][2]]
    isr = [("min.insync.replicas", "2", DD), ("min.insync.replicas", "1", D)]
    broker |= {
        "log.retention.ms": (str(HOUR_MS), DD, retention),
        "log.roll.ms": (str(3 * HOUR_MS), DD, roll),
        "min.insync.replicas": ("2", DD, isr),
    }  # minutes and hours unchanged: the dynamic ms is ahead of them
    topic = {
        "retention.ms": (str(HOUR_MS), DD, retention),
        "segment.ms": (str(3 * HOUR_MS), DD, roll),
        "min.insync.replicas": ("2", DD, isr),
    }
    _check(cluster, broker, "syn-plain", topic)
    # the cluster-default resource ("") lists what it sets, with that layer's synonyms only
    capsys.readouterr()
    _cli(b.bootstrap_servers, "--entity-default", "--describe", "--output", "json")
    (doc,) = json.loads(capsys.readouterr().out)
    (entry,) = [e for e in doc["configs"] if e["name"] == "log.retention.ms"]
    assert (entry["value"], entry["source"]) == (str(HOUR_MS), DD)
    assert entry["synonyms"] == [{"name": "log.retention.ms", "value": str(HOUR_MS), "source": DD}]
    # kafka-configs.sh's text: each synonym in its own unit
    _cli(b.bootstrap_servers, "--entity-name", "0", "--describe", "--all")
    text = capsys.readouterr().out
    assert (
        f"  log.retention.ms={HOUR_MS} sensitive=false synonyms={{{DD}:log.retention.ms={HOUR_MS}, "
        f"{S}:log.retention.minutes=120, {D}:log.retention.hours=168}}\n"
    ) in text

    # 3. this broker's own dynamic setting, ahead of the cluster default
    res = ConfigResource(
        ConfigResource.Type.BROKER,
        str(b.server.broker_id),
        incremental_configs=[
            ConfigEntry(
                "log.retention.ms", str(2 * HOUR_MS), incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)
    retention = [("log.retention.ms", str(2 * HOUR_MS), DB), *retention]
    broker["log.retention.ms"] = (str(2 * HOUR_MS), DB, retention)
    topic["retention.ms"] = (str(2 * HOUR_MS), DB, retention)
    _check(cluster, broker, "syn-plain", topic)

    # 4. a topic's own overrides come first
    own = {
        "retention.ms": ("60000", T, [("retention.ms", "60000", T), *retention]),
        "segment.ms": (str(3 * HOUR_MS), DD, roll),
        "min.insync.replicas": ("1", T, [("min.insync.replicas", "1", T), *isr]),
    }
    _check(cluster, broker, "syn-own", own)


def _create(admin, topic: str, **config: str):
    """CreateTopics' answer for one topic: None, or the KafkaError it was refused with."""
    try:
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    except confluent_kafka.KafkaException as exc:
        return exc.args[0]
    return None


def _alter(admin, rtype, name: str, **settings: str):
    res = ConfigResource(
        rtype,
        name,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in settings.items()
        ],
    )
    try:
        admin.incremental_alter_configs([res])[res].result(30)
    except confluent_kafka.KafkaException as exc:
        return exc.args[0]
    return None


def test_message_format_version_is_accepted_and_ignored_as_kafka_3_does(cluster, caplog):
    """ZooKeeper-mode Kafka 3.x: deprecated, accepted, ignored (inter.broker.protocol.version is
    3.0 or later) with a warning; a value that names no Kafka release is INVALID_CONFIG. Kafka 4
    refuses the setting (documented in docs/configuration.md)."""
    b, admin, kp = cluster
    with caplog.at_level(logging.WARNING, logger="kafkalite.broker.configs"):
        assert _create(admin, "mfv", **{"message.format.version": "2.8"}) is None
        assert (
            _alter(admin, ConfigResource.Type.TOPIC, "mfv", **{"message.format.version": "3.0-IV1"})
            is None
        )
    warned = [r.getMessage() for r in caplog.records if "message.format.version" in r.getMessage()]
    assert len(warned) == 2 and "of mfv is ignored: it is deprecated" in warned[0]
    got = _kp_view(kp, KType.TOPIC, "mfv", ["message.format.version"])
    assert got == {
        "message.format.version": (
            "3.0-IV1",
            T,
            [
                ("message.format.version", "3.0-IV1", T),
                ("log.message.format.version", "3.0-IV1", D),
            ],
        )
    }
    err = _create(admin, "mfv-bad", **{"message.format.version": "latest"})
    assert err.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "Version `latest` is not a valid version" in err.str()
    # the broker's log.message.format.version is read-only, as in Kafka (DynamicLogConfig excludes it)
    err = _alter(
        admin,
        ConfigResource.Type.BROKER,
        str(b.server.broker_id),
        **{"log.message.format.version": "2.8"},
    )
    assert err.code() == confluent_kafka.KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: log.message.format.version" in err.str()


# a setting -> the value -> what the answer says (Kafka's words and what was expected)
BAD_VALUES = [
    ("retention.ms", "abc", "Not a number of type LONG (expected a whole number)"),
    ("segment.bytes", "1.5", "Not a number of type INT (expected a whole number)"),
    ("preallocate", "yes", "Expected value to be either true or false"),
    ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE (expected a number)"),
]


@pytest.mark.parametrize(("name", "value", "why"), BAD_VALUES)
def test_a_topic_config_of_the_wrong_type_says_what_was_expected(cluster, name, value, why):
    _, admin, _ = cluster
    for err in (
        _create(admin, "bad-value", **{name: value}),
        _alter(admin, ConfigResource.Type.TOPIC, "syn-plain", **{name: value}),
    ):
        assert err is not None and err.code() == confluent_kafka.KafkaError.INVALID_CONFIG
        assert f"Invalid value {value} for configuration {name}: {why}" in err.str()
        assert "invalid literal" not in err.str()


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("log.retention.ms", "abc", "Not a number of type LONG (expected a whole number >= -1)"),
        ("log.preallocate", "maybe", "Expected value to be either true or false"),
        ("min.insync.replicas", "two", "Not a number of type INT (expected a whole number >= 1)"),
    ],
)
def test_a_dynamic_broker_config_of_the_wrong_type_says_what_was_expected(
    cluster, name, value, why
):
    b, admin, _ = cluster
    err = _alter(admin, ConfigResource.Type.BROKER, str(b.server.broker_id), **{name: value})
    assert err is not None and err.code() == confluent_kafka.KafkaError.INVALID_REQUEST
    assert f"Invalid value {value} for configuration {name}: {why}" in err.str()
