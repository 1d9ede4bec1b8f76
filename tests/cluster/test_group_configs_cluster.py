"""Group configs in cluster mode: /config/groups/<group id> in Kafka's config JSON with a /config/changes
notification, compare-and-set writes, and a change made through one broker seen by another at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from kafkalite.broker.config.group_configs import GroupConfigManager, ZkGroupConfigStore
from kafkalite.cli.wire import WireClient
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.zk import KafkaZkClient
from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.zkserver import ZooKeeperServer

pytestmark = pytest.mark.cluster

GROUP = 32
SET = 0
INC: Any = APIS[44].request
DESCRIBE: Any = APIS[32].request
DLQ = "errors.deadletterqueue.topic.name"


def _client(connect: str) -> KafkaZkClient:
    c = KafkaZkClient(connect, session_timeout_ms=6000, connection_timeout_ms=5000)
    c.start()
    return c


def _set(configs: dict[str, str]) -> Any:
    def edit(current: dict[str, str]) -> tuple[dict[str, str] | None, str | None]:
        current.update(configs)
        return current, None

    return edit


def test_group_configs_in_zookeeper(zk_connect: str) -> None:
    a, b = _client(zk_connect), _client(zk_connect)
    try:

        async def run() -> None:
            one = GroupConfigManager({}, ZkGroupConfigStore(a))
            two = GroupConfigManager({}, ZkGroupConfigStore(b))
            await one.load()
            await two.load()
            seen = a.configs.config_changes()
            assert await one.alter("g/1", _set({"share.auto.offset.reset": "earliest"})) == (
                0,
                None,
            )
            fresh = sorted(a.configs.config_changes() - seen)
            assert a.configs.config_change_entities(fresh) == ["groups/g%2F1"]
            # the other broker's store is read on notification; its write keeps the first one's key
            await two.reload(["g/1"])
            assert two.overrides("g/1") == {"share.auto.offset.reset": "earliest"}
            assert await two.alter("g/1", _set({"share.delivery.count.limit": "3"})) == (0, None)
            code, _ = await one.alter("g/1", _set({"share.delivery.count.limit": "30"}))
            assert code == int(ErrorCode.INVALID_CONFIG)
            assert await one.alter("g/1", _set({"share.isolation.level": "read_committed"})) == (
                0,
                None,
            )
            assert one.overrides("g/1") == {
                "share.auto.offset.reset": "earliest",
                "share.delivery.count.limit": "3",
                "share.isolation.level": "read_committed",
            }
            fresh_load = GroupConfigManager({}, ZkGroupConfigStore(b))
            await fresh_load.load()
            assert fresh_load.share_config("g/1").delivery_count_limit == 3

        asyncio.run(run())
        config, version = a.configs.group_config("g/1")
        assert version >= 2 and config["share.isolation.level"] == "read_committed"
        raw = KazooClient(hosts=zk_connect)
        raw.start(10)
        try:
            assert json.loads(raw.get(zd.group_config_path("g/1"))[0]) == {
                "version": 1,
                "config": {
                    "share.auto.offset.reset": "earliest",
                    "share.delivery.count.limit": "3",
                    "share.isolation.level": "read_committed",
                },
            }
        finally:
            raw.stop()
            raw.close()
    finally:
        a.close()
        b.close()


def _inc(bootstrap: str, group: str, configs: dict[str, str]) -> Any:
    res = INC.AlterConfigsResource(
        resource_type=GROUP,
        resource_name=group,
        configs=[
            INC.AlterConfigsResource.AlterableConfig(name=k, config_operation=SET, value=v)
            for k, v in configs.items()
        ],
    )
    with WireClient(bootstrap, timeout=10) as c:
        return c.send(INC(resources=[res], validate_only=False)).responses[0]


def _describe(bootstrap: str, group: str) -> dict[str, str]:
    res = DESCRIBE.DescribeConfigsResource(
        resource_type=GROUP, resource_name=group, configuration_keys=None
    )
    with WireClient(bootstrap, timeout=10) as c:
        (result,) = c.send(DESCRIBE(resources=[res], include_synonyms=False)).results
    assert result.error_code == 0, result.error_message
    return {e.name: e.value for e in result.configs}


@pytest.mark.slow
def test_group_config_set_on_one_broker_is_seen_by_another(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    with LocalCluster(
        tmp_path / "cluster", 2, zookeeper=zookeeper, chroot=f"/{tmp_path.name}"
    ) as cluster:
        one, two = (b.bootstrap for b in cluster.brokers.values())
        r = _inc(one, "g", {"share.auto.offset.reset": "earliest", DLQ: "dlq"})
        assert (r.error_code, r.error_message) == (0, None)
        start = time.monotonic()
        while _describe(two, "g")[DLQ] != "dlq" and time.monotonic() - start < 10:
            time.sleep(0.05)
        seen = _describe(two, "g")
        assert seen["share.auto.offset.reset"] == "earliest" and seen[DLQ] == "dlq"
        assert time.monotonic() - start < 2.0
        r = _inc(two, "g", {DLQ: "__consumer_offsets"})
        assert r.error_code == int(ErrorCode.INVALID_CONFIG) and "internal" in r.error_message
        assert _describe(one, "g")[DLQ] == "dlq"
