"""Dynamic broker configs over the wire: Alter/IncrementalAlter/DescribeConfigs on BROKER "" and "<id>".

Covers precedence, errors Kafka gives, validate_only, applying to logs, and persistence across a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.config.dynamic_config import (
    CONFIG_DIR,
    read_properties,
    write_properties_atomically,
)
from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.testing import Broker

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BROKER = 4


@pytest.fixture
def fresh(tmp_path: Path) -> Any:
    with Broker(tmp_path / "data", config={"log.retention.hours": "2"}) as b:
        yield b


def incremental(client: WireClient, name: str, ops: list[tuple[str, int, str | None]], **kw: Any):  # type: ignore[no-untyped-def]
    inc = APIS[44].request
    res = inc.AlterConfigsResource(
        resource_type=BROKER,
        resource_name=name,
        configs=[
            inc.AlterConfigsResource.AlterableConfig(name=n, config_operation=o, value=v)
            for n, o, v in ops
        ],
    )
    return client.send(
        inc(resources=[res], validate_only=kw.get("validate_only", False))
    ).responses[0]


def alter(client: WireClient, name: str, configs: dict[str, str | None], validate_only=False):  # type: ignore[no-untyped-def]
    alt = APIS[33].request
    res = alt.AlterConfigsResource(
        resource_type=BROKER,
        resource_name=name,
        configs=[
            alt.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs.items()
        ],
    )
    return client.send(alt(resources=[res], validate_only=validate_only)).responses[0]


def describe(client: WireClient, name: str, resource_type: int = BROKER):  # type: ignore[no-untyped-def]
    d = APIS[32].request
    res = d.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None
    )
    return client.send(d(resources=[res], include_synonyms=True)).results[0]


def create_topic(client: WireClient, name: str, configs: dict[str, str] | None = None) -> None:
    cls = APIS[19].request
    t = cls.CreatableTopic(
        name=name,
        num_partitions=1,
        replication_factor=1,
        assignments=[],
        configs=[
            cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
            for k, v in (configs or {}).items()
        ],
    )
    assert client.send(cls(topics=[t], timeout_ms=1000)).topics[0].error_code == 0


def test_precedence_sources_and_apply_to_logs(fresh: Broker) -> None:
    with WireClient(fresh.bootstrap_servers, timeout=10) as c:
        create_topic(c, "plain")
        create_topic(c, "pinned", {"retention.ms": "777"})
        assert fresh.server.get_log("plain", 0).config.retention_ms == 2 * 3_600_000
        # cluster-wide default
        assert incremental(c, "", [("log.retention.ms", SET, "60000")]).error_code == 0
        assert fresh.server.get_log("plain", 0).config.retention_ms == 60000
        assert fresh.server.get_log("pinned", 0).config.retention_ms == 777  # topic wins
        # per-broker beats the cluster default
        assert incremental(c, "0", [("log.retention.ms", SET, "30000")]).error_code == 0
        assert fresh.server.get_log("plain", 0).config.retention_ms == 30000
        by = {e.name: e for e in describe(c, "0").configs}
        e = by["log.retention.ms"]
        assert (e.value, e.config_source, e.read_only) == ("30000", 2, False)
        assert [(s.name, s.value, s.source) for s in e.synonyms] == [
            ("log.retention.ms", "30000", 2),
            ("log.retention.ms", "60000", 3),
            ("log.retention.hours", "2", 4),
            ("log.retention.hours", "168", 5),
        ]
        assert by["broker.id"].read_only and by["log.dirs"].read_only
        assert by["log.retention.hours"].read_only and by["log.retention.hours"].config_source == 4
        assert by["log.segment.bytes"].config_source == 5
        # "" describes only the cluster-wide dynamic defaults
        default = describe(c, "").configs
        assert [(x.name, x.value, x.config_source) for x in default] == [
            ("log.retention.ms", "60000", 3)
        ]
        # the topic view names the broker synonyms and their sources
        topic = {x.name: x for x in describe(c, "plain", resource_type=2).configs}
        assert topic["retention.ms"].value == "30000"
        assert topic["retention.ms"].config_source == 2
        assert [s.source for s in topic["retention.ms"].synonyms][:3] == [2, 3, 4]
        # deleting the per-broker value falls back to the cluster default
        assert incremental(c, "0", [("log.retention.ms", DELETE, None)]).error_code == 0
        assert fresh.server.get_log("plain", 0).config.retention_ms == 60000
        # new topics get the dynamic default too
        create_topic(c, "later")
        assert fresh.server.get_log("later", 0).config.retention_ms == 60000


def test_errors_kafka_gives(fresh: Broker) -> None:
    with WireClient(fresh.bootstrap_servers, timeout=10) as c:
        r = incremental(c, "7", [("log.segment.bytes", SET, "100000")])
        assert r.error_code == ErrorCode.INVALID_REQUEST and "expected 0" in r.error_message
        r = incremental(c, "x", [("log.segment.bytes", SET, "100000")])
        assert r.error_code == ErrorCode.INVALID_REQUEST and "integer" in r.error_message
        for name in ("broker.id", "listeners", "log.dirs", "log.retention.hours"):
            r = incremental(c, "0", [(name, SET, "5")])
            assert r.error_code == ErrorCode.INVALID_REQUEST, name
            assert name in r.error_message and "dynamically" in r.error_message
        r = incremental(c, "", [("log.segment.bytes", SET, "big")])
        assert r.error_code == ErrorCode.INVALID_REQUEST and "log.segment.bytes" in r.error_message
        r = incremental(c, "", [("log.segment.bytes", SET, "3")])
        assert r.error_code == ErrorCode.INVALID_REQUEST
        r = incremental(c, "", [("log.cleanup.policy", SET, "shred")])
        assert r.error_code == ErrorCode.INVALID_REQUEST
        r = incremental(c, "", [("log.segment.bytes", APPEND, "1")])
        assert r.error_code == ErrorCode.INVALID_CONFIG
        r = incremental(c, "", [("log.segment.bytes", SET, None)])
        assert r.error_code == ErrorCode.INVALID_REQUEST
        r = alter(c, "", {"log.segment.bytes": None})
        assert r.error_code == ErrorCode.INVALID_REQUEST
        d = describe(c, "3")
        assert d.error_code == ErrorCode.INVALID_REQUEST
        # nothing of the refused changes stuck
        assert fresh.server.dynamic_config.cluster_default == {}
        assert fresh.server.dynamic_config.per_broker == {}
        # Kafka keeps custom (unknown) broker properties
        assert incremental(c, "", [("my.plugin.setting", SET, "x")]).error_code == 0
        assert fresh.server.dynamic_config.cluster_default == {"my.plugin.setting": "x"}


def test_validate_only_and_alter_replaces_whole_set(fresh: Broker) -> None:
    with WireClient(fresh.bootstrap_servers, timeout=10) as c:
        create_topic(c, "t")
        r = incremental(c, "", [("log.segment.bytes", SET, "100000")], validate_only=True)
        assert r.error_code == 0
        assert fresh.server.dynamic_config.cluster_default == {}
        assert fresh.server.get_log("t", 0).config.segment_bytes == 1024**3
        r = alter(c, "", {"log.segment.bytes": "100000"}, validate_only=True)
        assert r.error_code == 0 and fresh.server.dynamic_config.cluster_default == {}
        assert (
            alter(
                c, "", {"log.segment.bytes": "100000", "log.cleaner.min.cleanable.ratio": "0.2"}
            ).error_code
            == 0
        )
        assert fresh.server.get_log("t", 0).config.segment_bytes == 100000
        assert alter(c, "", {"log.cleaner.min.cleanable.ratio": "0.3"}).error_code == 0
        assert fresh.server.dynamic_config.cluster_default == {
            "log.cleaner.min.cleanable.ratio": "0.3"
        }
        assert fresh.server.get_log("t", 0).config.segment_bytes == 1024**3
        assert fresh.server.get_log("t", 0).config.min_cleanable_dirty_ratio == 0.3
        # list configs take APPEND / SUBTRACT, starting from the built-in default
        assert incremental(c, "0", [("log.cleanup.policy", APPEND, "compact")]).error_code == 0
        assert fresh.server.dynamic_config.per_broker == {"log.cleanup.policy": "delete,compact"}
        assert incremental(c, "0", [("log.cleanup.policy", SUBTRACT, "delete")]).error_code == 0
        assert fresh.server.get_log("t", 0).config.cleanup_policy == "compact"


def test_dynamic_configs_survive_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Broker(data) as b, WireClient(b.bootstrap_servers, timeout=10) as c:
        create_topic(c, "keep")
        assert incremental(c, "", [("log.retention.ms", SET, "45000")]).error_code == 0
        assert incremental(c, "0", [("log.segment.bytes", SET, "200000")]).error_code == 0
    files = sorted(p.name for p in (data / CONFIG_DIR).iterdir())
    assert files == ["broker-0.properties", "cluster-default.properties"]
    with Broker(data) as b, WireClient(b.bootstrap_servers, timeout=10) as c:
        lg = b.server.get_log("keep", 0)
        assert lg.config.retention_ms == 45000 and lg.config.segment_bytes == 200000
        by = {e.name: e for e in describe(c, "0").configs}
        assert by["log.retention.ms"].config_source == 3
        assert by["log.segment.bytes"].config_source == 2


def test_bad_persisted_entries_are_ignored(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_properties_atomically(
        data / CONFIG_DIR / "cluster-default.properties",
        {"broker.id": "9", "log.segment.bytes": "nope", "log.retention.ms": "1234"},
    )
    with Broker(data) as b:
        assert b.server.dynamic_config.cluster_default == {"log.retention.ms": "1234"}
        assert b.server.log_manager.default_config.retention_ms == 1234


def test_properties_round_trip_escapes(tmp_path: Path) -> None:
    props = {"a=b": "x\ny", "c:d": "back\\slash", "e": "#not comment", "f": ""}
    path = tmp_path / "p.properties"
    write_properties_atomically(path, props)
    assert read_properties(path) == props


def test_log_flush_interval_ms_is_described_with_the_scheduler_interval_behind_it(
    tmp_path: Path,
) -> None:
    """Kafka's brokerConfigSynonyms: log.flush.interval.ms, when unset, falls back to
    log.flush.scheduler.interval.ms; the synonyms ahead of the described name are dropped."""
    from kafkalite.broker.config.broker_config import BrokerConfig
    from kafkalite.broker.config.dynamic_config import DynamicBrokerConfig

    def synonyms(props: dict[str, str], name: str) -> list[tuple[str, str | None, int]]:
        static = BrokerConfig({"log.dirs": str(tmp_path), **props})
        return DynamicBrokerConfig(static, tmp_path).synonyms(name)

    most = "9223372036854775807"
    assert synonyms({}, "log.flush.interval.ms") == []
    assert synonyms({"log.flush.interval.ms": "1000"}, "log.flush.interval.ms") == [
        ("log.flush.interval.ms", "1000", 4),
        ("log.flush.scheduler.interval.ms", most, 5),
    ]
    assert synonyms({}, "log.flush.scheduler.interval.ms") == [
        ("log.flush.scheduler.interval.ms", most, 5)
    ]
