"""Per-group configs: Kafka's checks on group and broker settings, the data-dir store, the manager, and
Alter/IncrementalAlter/DescribeConfigs on GROUP resources over the wire (atomic refusals, restart).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.config.config_types import SOURCE_DEFAULT, SOURCE_GROUP, SOURCE_STATIC_BROKER
from kafkalite.broker.config.group_config_defs import (
    GROUP_CONFIG_DEFS,
    group_config_defaults,
    group_configs_error,
    parse_iso_duration_ms,
)
from kafkalite.broker.config.group_configs import (
    GROUP_CONFIG_DIR,
    GroupConfigManager,
    LocalGroupConfigStore,
    group_file_stem,
)
from kafkalite.cli.wire import WireClient
from kafkalite.cluster import zk_data as zd
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.testing import Broker

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
INVALID_CONFIG = int(ErrorCode.INVALID_CONFIG)


# -- Kafka's checks, as pure functions ---------------------------------------------------------------


def test_defaults_come_from_the_broker_settings() -> None:
    d = group_config_defaults({})
    assert d == {
        "consumer.heartbeat.interval.ms": "5000",
        "consumer.session.timeout.ms": "45000",
        "errors.deadletterqueue.topic.name": "",
        "share.auto.offset.reset": "latest",
        "share.delivery.count.limit": "5",
        "share.heartbeat.interval.ms": "5000",
        "share.isolation.level": "read_uncommitted",
        "share.record.lock.duration.ms": "30000",
        "share.session.timeout.ms": "45000",
    }
    assert set(d) == set(GROUP_CONFIG_DEFS)
    d = group_config_defaults(
        {"group.share.delivery.count.limit": "7", "group.share.record.lock.duration.ms": "20000"}
    )
    assert d["share.delivery.count.limit"] == "7"
    assert d["share.record.lock.duration.ms"] == "20000"


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"share.record.lock.duration.ms": "15000"},
        {"share.record.lock.duration.ms": "60000"},
        {"share.delivery.count.limit": "2"},
        {"share.delivery.count.limit": "10"},
        {"share.auto.offset.reset": "earliest"},
        {"share.auto.offset.reset": "LATEST"},
        {"share.auto.offset.reset": "by_duration:PT1H"},
        {"share.auto.offset.reset": "by_duration:P1DT2H30M"},
        {"share.auto.offset.reset": "by_duration:PT0.5S"},
        {"share.auto.offset.reset": "by_duration:P0D"},
        {"share.isolation.level": "read_committed"},
        {"errors.deadletterqueue.topic.name": "dlq"},
        {"errors.deadletterqueue.topic.name": ""},
        {"share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "15000"},
        {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"},
    ],
)
def test_valid_group_configs(overrides: dict[str, str]) -> None:
    assert group_configs_error(overrides, {}) is None


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"share.lock.duration": "1"}, "Unknown group config name: share.lock.duration"),
        ({"retention.ms": "1"}, "Unknown group config name: retention.ms"),
        (
            {"share.record.lock.duration.ms": "14999"},
            "share.record.lock.duration.ms must be greater than or equal to "
            "group.share.min.record.lock.duration.ms",
        ),
        (
            {"share.record.lock.duration.ms": "60001"},
            "share.record.lock.duration.ms must be less than or equal to "
            "group.share.max.record.lock.duration.ms",
        ),
        ({"share.record.lock.duration.ms": "999"}, "Value must be at least 1000"),
        ({"share.record.lock.duration.ms": "ten"}, "Not a number of type INT"),
        ({"share.delivery.count.limit": "1"}, "Value must be at least 2"),
        ({"share.delivery.count.limit": "11"}, "Value must be no more than 10"),
        ({"share.session.timeout.ms": "44999"}, "group.share.min.session.timeout.ms"),
        ({"share.heartbeat.interval.ms": "15001"}, "group.share.max.heartbeat.interval.ms"),
        ({"consumer.session.timeout.ms": "60001"}, "group.consumer.max.session.timeout.ms"),
        ({"consumer.heartbeat.interval.ms": "4999"}, "group.consumer.min.heartbeat.interval.ms"),
        ({"share.auto.offset.reset": "none"}, "expected latest, earliest or by_duration:"),
        ({"share.auto.offset.reset": "by_duration:1h"}, "ISO-8601 duration"),
        ({"share.auto.offset.reset": "by_duration:P1Y"}, "ISO-8601 duration"),
        ({"share.auto.offset.reset": "by_duration:PT"}, "ISO-8601 duration"),
        ({"share.auto.offset.reset": "by_duration:"}, "ISO-8601 duration"),
        ({"share.auto.offset.reset": "by_duration:-PT1H"}, "must not be negative"),
        ({"share.isolation.level": "READ_COMMITTED"}, "read_uncommitted, read_committed"),
        ({"errors.deadletterqueue.topic.name": "__consumer_offsets"}, "internal topic"),
        ({"errors.deadletterqueue.topic.name": "__share_group_state"}, "internal topic"),
        ({"errors.deadletterqueue.topic.name": "bad name"}, "contains characters"),
        ({"errors.deadletterqueue.topic.name": ".."}, "cannot be '..'"),
        ({"errors.deadletterqueue.topic.name": "x" * 250}, "longer than 249"),
    ],
)
def test_refused_group_configs(overrides: dict[str, str], needle: str) -> None:
    why = group_configs_error(overrides, {})
    assert why is not None and needle in why, why


def test_bounds_follow_the_broker_settings() -> None:
    broker = {
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.record.lock.duration.ms": "2000",
        "group.share.max.record.lock.duration.ms": "30000",
    }
    assert group_configs_error({"share.record.lock.duration.ms": "1000"}, broker) is None
    assert group_configs_error({"share.record.lock.duration.ms": "40000"}, broker) is not None
    # a heartbeat not shorter than the session, counting the broker's default for the other
    why = group_configs_error(
        {"share.heartbeat.interval.ms": "15000"}, {"group.share.max.session.timeout.ms": "60000"}
    )
    assert why is None
    why = group_configs_error(
        {"share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "45000"},
        {"group.share.max.heartbeat.interval.ms": "50000"},
    )
    assert why is not None and "must be greater than share.heartbeat.interval.ms" in why


def test_iso_durations_as_java_reads_them() -> None:
    assert parse_iso_duration_ms("PT1H") == 3_600_000
    assert parse_iso_duration_ms("P1D") == 86_400_000
    assert parse_iso_duration_ms("P1DT2H30M") == 95_400_000
    assert parse_iso_duration_ms("PT0.25S") == 250
    assert parse_iso_duration_ms("pt15m") == 900_000
    assert parse_iso_duration_ms("-PT1S") == -1000
    for bad in ("", "P", "PT", "1H", "P1W", "P1M", "PT1.5H", "P1DT"):
        with pytest.raises(ValueError):
            parse_iso_duration_ms(bad)


def test_broker_group_settings_are_checked_at_startup() -> None:
    BrokerConfig({"group.share.record.lock.duration.ms": "15000"})
    for bad, needle in [
        ({"group.share.delivery.count.limit": "11"}, "Value must be no more than 10"),
        ({"group.share.delivery.count.limit": "1"}, "Value must be at least 2"),
        ({"group.share.max.size": "5"}, "Value must be at least 10"),
        ({"group.share.partition.max.record.locks": "20000"}, "no more than 10000"),
        ({"group.share.min.record.lock.duration.ms": "40000"}, "no more than 30000"),
        ({"group.share.record.lock.duration.ms": "10000"}, "group.share.min.record.lock"),
        ({"group.share.record.lock.duration.ms": "61000"}, "group.share.max.record.lock"),
        ({"group.share.heartbeat.interval.ms": "16000"}, "group.share.max.heartbeat"),
        ({"group.consumer.session.timeout.ms": "6000"}, "group.consumer.min.session"),
        ({"share.coordinator.state.topic.num.partitions": "0"}, "Value must be at least 1"),
    ]:
        with pytest.raises(ConfigError, match=needle):
            BrokerConfig(bad)
    cfg = BrokerConfig(
        {
            "group.consumer.session.timeout.ms": "6000",
            "group.consumer.min.session.timeout.ms": "6000",
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "500",
        }
    )
    assert cfg.get("group.share.partition.max.record.locks") == 2000
    assert cfg.get("share.coordinator.state.topic.replication.factor") == 3


# -- the data-dir store and the manager --------------------------------------------------------------


@pytest.mark.parametrize("group_id", ["g", "a/b", "..", ".", "ü-grp", "with space", "x" * 300, ""])
def test_group_ids_are_escaped_into_safe_file_names(tmp_path: Path, group_id: str) -> None:
    store = LocalGroupConfigStore(tmp_path / GROUP_CONFIG_DIR)
    stem = group_file_stem(group_id)
    assert "/" not in stem and stem not in ("", ".", "..") and len(stem.encode()) <= 200
    assert store.write(group_id, {"share.auto.offset.reset": "earliest"}, -1)
    assert store.path(group_id).parent == tmp_path / GROUP_CONFIG_DIR
    assert store.load_all() == {group_id: {"share.auto.offset.reset": "earliest"}}
    assert store.read(group_id)[0] == {"share.auto.offset.reset": "earliest"}
    assert store.write(group_id, {}, 0)  # no overrides: no file
    assert store.load_all() == {} and store.read(group_id) == ({}, -1)


def _set(**configs: str) -> Any:
    def edit(current: dict[str, str]) -> tuple[dict[str, str] | None, str | None]:
        current.update({k.replace("_", "."): v for k, v in configs.items()})
        return current, None

    return edit


def test_manager_alters_atomically_and_survives_a_restart(tmp_path: Path) -> None:
    directory = tmp_path / GROUP_CONFIG_DIR
    broker_props = {"group.share.delivery.count.limit": "4"}

    async def run() -> None:
        m = GroupConfigManager(broker_props, LocalGroupConfigStore(directory))
        await m.load()
        assert m.share_config("g").delivery_count_limit == 4
        assert m.share_config("g").dlq_topic is None
        code, msg = await m.alter("g", _set(**{"share.auto.offset.reset": "by_duration:pt1h"}))
        assert (code, msg) == (0, None)
        code, _ = await m.alter("g", _set(**{"errors.deadletterqueue.topic.name": "dlq"}))
        assert code == 0
        # one bad value refuses the whole change; what was stored stays
        code, msg = await m.alter(
            "g",
            _set(**{"share.isolation.level": "read_committed", "share.delivery.count.limit": "42"}),
        )
        assert code == INVALID_CONFIG and msg is not None and "share.delivery.count.limit" in msg
        code, _ = await m.alter(
            "g", _set(**{"share.isolation.level": "read_committed"}), validate_only=True
        )
        assert code == 0
        assert m.overrides("g") == {
            "share.auto.offset.reset": "by_duration:pt1h",
            "errors.deadletterqueue.topic.name": "dlq",
        }
        code, msg = await m.alter("", _set())
        assert code == int(ErrorCode.INVALID_REQUEST)

        again = GroupConfigManager(broker_props, LocalGroupConfigStore(directory))
        await again.load()
        sc = again.share_config("g")
        assert sc.auto_offset_reset == "by_duration:PT1H"
        assert sc.auto_offset_reset_duration_ms == 3_600_000
        assert sc.dlq_topic == "dlq"
        assert sc.isolation_level == "read_uncommitted" and not sc.read_committed
        assert sc.delivery_count_limit == 4 and sc.record_lock_duration_ms == 30000
        assert sc.session_timeout_ms == 45000 and sc.heartbeat_interval_ms == 5000
        assert again.effective("other") == group_config_defaults(broker_props)
        assert again.groups() == ["g"]

    asyncio.run(run())


def test_manager_drops_unusable_stored_entries(tmp_path: Path) -> None:
    directory = tmp_path / GROUP_CONFIG_DIR
    directory.mkdir()
    (directory / "g.properties").write_text(
        "share.delivery.count.limit=many\nnot.a.config=1\nshare.isolation.level=read_committed\n"
    )

    async def run() -> None:
        m = GroupConfigManager({}, LocalGroupConfigStore(directory))
        await m.load()
        assert m.overrides("g") == {"share.isolation.level": "read_committed"}
        assert m.share_config("g").read_committed

    asyncio.run(run())


def test_describe_entries_and_sources(tmp_path: Path) -> None:
    async def run() -> None:
        m = GroupConfigManager(
            {"group.share.record.lock.duration.ms": "20000"},
            LocalGroupConfigStore(tmp_path / GROUP_CONFIG_DIR),
        )
        await m.load()
        await m.alter("g", _set(**{"share.delivery.count.limit": "3"}))
        entries = {e.name: e for e in m.describe("g")}
        assert set(entries) == set(GROUP_CONFIG_DEFS)
        dcl = entries["share.delivery.count.limit"]
        assert (dcl.value, dcl.source, dcl.read_only) == ("3", SOURCE_GROUP, False)
        assert dcl.synonyms == [
            ("share.delivery.count.limit", "3", SOURCE_GROUP),
            ("group.share.delivery.count.limit", "5", SOURCE_DEFAULT),
        ]
        lock = entries["share.record.lock.duration.ms"]
        assert (lock.value, lock.source) == ("20000", SOURCE_DEFAULT)
        assert lock.synonyms == [
            ("group.share.record.lock.duration.ms", "20000", SOURCE_STATIC_BROKER)
        ]
        reset = entries["share.auto.offset.reset"]
        assert (reset.value, reset.source, reset.config_type) == ("latest", SOURCE_DEFAULT, 2)
        assert entries["share.session.timeout.ms"].config_type == 3

    asyncio.run(run())


def test_zookeeper_paths_of_group_configs() -> None:
    assert zd.group_config_path("g") == "/config/groups/g"
    assert zd.group_config_path("a/b") == "/config/groups/a%2Fb"
    assert zd.parse_group_entity_path(zd.group_entity_path("a/b c")) == "a/b c"
    assert zd.parse_group_entity_path("topics/t") is None
    assert zd.parse_group_entity_path("groups/") is None
    assert zd.decode_config("/config/groups/g", zd.encode_config({"k": "v"})) == {"k": "v"}
    assert zd.encode_config({"k": "v"}) == b'{"version":1,"config":{"k":"v"}}'


# -- over the wire -----------------------------------------------------------------------------------


def incremental(client: WireClient, group: str, ops: list[tuple[str, int, str | None]], **kw: Any):  # type: ignore[no-untyped-def]
    inc = APIS[44].request
    res = inc.AlterConfigsResource(
        resource_type=GROUP,
        resource_name=group,
        configs=[
            inc.AlterConfigsResource.AlterableConfig(name=n, config_operation=o, value=v)
            for n, o, v in ops
        ],
    )
    return client.send(
        inc(resources=[res], validate_only=kw.get("validate_only", False))
    ).responses[0]


def alter(client: WireClient, group: str, configs: dict[str, str | None]):  # type: ignore[no-untyped-def]
    alt = APIS[33].request
    res = alt.AlterConfigsResource(
        resource_type=GROUP,
        resource_name=group,
        configs=[
            alt.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs.items()
        ],
    )
    return client.send(alt(resources=[res], validate_only=False)).responses[0]


def describe(client: WireClient, group: str, synonyms: bool = True):  # type: ignore[no-untyped-def]
    req = APIS[32].request
    res = req.DescribeConfigsResource(
        resource_type=GROUP, resource_name=group, configuration_keys=None
    )
    return client.send(
        req(resources=[res], include_synonyms=synonyms, include_documentation=True)
    ).results[0]


def test_group_configs_over_the_wire(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Broker(data) as b, WireClient(b.bootstrap_servers, timeout=10) as c:
        r = describe(c, "g1")
        assert r.error_code == 0
        got = {e.name: e for e in r.configs}
        assert set(got) == set(GROUP_CONFIG_DEFS)
        assert all(e.config_source == SOURCE_DEFAULT and not e.read_only for e in got.values())
        assert got["share.auto.offset.reset"].documentation

        r = incremental(
            c,
            "g1",
            [
                ("share.auto.offset.reset", SET, "earliest"),
                ("errors.deadletterqueue.topic.name", SET, "dlq"),
            ],
        )
        assert (r.error_code, r.error_message) == (0, None)
        # atomic: one bad value refuses the whole resource
        r = incremental(
            c,
            "g1",
            [
                ("share.isolation.level", SET, "read_committed"),
                ("share.record.lock.duration.ms", SET, "5000"),
            ],
        )
        assert r.error_code == INVALID_CONFIG
        assert "group.share.min.record.lock.duration.ms" in r.error_message
        r = incremental(c, "g1", [("share.auto.offset.reset", APPEND, "latest")])
        assert r.error_code == INVALID_CONFIG and "LIST" in r.error_message
        r = incremental(c, "g1", [("no.such.config", DELETE, None)])
        assert r.error_code == INVALID_CONFIG and "Unknown group config name" in r.error_message
        r = incremental(
            c, "g1", [("share.isolation.level", SET, "read_committed")], validate_only=True
        )
        assert r.error_code == 0
        r = incremental(c, "", [("share.isolation.level", SET, "read_committed")])
        assert r.error_code == int(ErrorCode.INVALID_REQUEST)
        assert describe(c, "").error_code == int(ErrorCode.INVALID_REQUEST)

        got = {e.name: e for e in describe(c, "g1").configs}
        assert got["share.auto.offset.reset"].value == "earliest"
        assert got["share.auto.offset.reset"].config_source == SOURCE_GROUP
        assert got["share.auto.offset.reset"].synonyms[0].source == SOURCE_GROUP
        assert got["errors.deadletterqueue.topic.name"].value == "dlq"
        assert got["share.isolation.level"].value == "read_uncommitted"
        assert b.server.group_configs.share_config("g1").auto_offset_reset == "earliest"
        assert (data / GROUP_CONFIG_DIR / "g1.properties").is_file()

        # legacy AlterConfigs replaces the whole set; null values are refused
        r = alter(c, "g2", {"share.delivery.count.limit": "3"})
        assert r.error_code == 0
        r = alter(c, "g2", {"share.delivery.count.limit": None})
        assert r.error_code == INVALID_CONFIG
        r = alter(c, "g2", {"share.isolation.level": "read_committed"})
        assert r.error_code == 0
        assert b.server.group_configs.overrides("g2") == {"share.isolation.level": "read_committed"}

        r = incremental(c, "g2", [("share.isolation.level", DELETE, None)])
        assert r.error_code == 0 and b.server.group_configs.overrides("g2") == {}
        assert not (data / GROUP_CONFIG_DIR / "g2.properties").exists()

    with Broker(data) as b, WireClient(b.bootstrap_servers, timeout=10) as c:
        got = {e.name: e for e in describe(c, "g1", synonyms=False).configs}
        assert got["share.auto.offset.reset"].value == "earliest"
        assert got["share.auto.offset.reset"].synonyms == []
        assert got["errors.deadletterqueue.topic.name"].config_source == SOURCE_GROUP
