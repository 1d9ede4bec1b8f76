"""Client quotas in cluster mode: written in Kafka's ZooKeeper layout beside SCRAM credentials, and a
quota set through one broker is in force on another at once (/config/changes notifications)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from kafkalite.cli.wire import WireClient
from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.schema import APIS
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ALTER: Any = APIS[49].request
DESCRIBE: Any = APIS[48].request
_E = ALTER.EntryData


def _set(
    bootstrap: str, entity: list[tuple[str, str | None]], key: str, value: float | None
) -> None:
    entry = _E(
        entity=[_E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[_E.OpData(key=key, value=value or 0.0, remove=value is None)],
    )
    with WireClient(bootstrap) as c:
        (result,) = c.send(ALTER(entries=[entry], validate_only=False)).entries
    assert result.error_code == 0, result.error_message


def _quotas(bootstrap: str) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    with WireClient(bootstrap) as c:
        resp = c.send(DESCRIBE(components=[], strict=False))
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def _await(bootstrap: str, expected: dict[Any, Any]) -> float:
    start = time.monotonic()
    while _quotas(bootstrap) != expected and time.monotonic() - start < 10:
        time.sleep(0.05)
    assert _quotas(bootstrap) == expected
    return time.monotonic() - start


def test_quota_set_on_one_broker_is_in_force_on_another(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    with LocalCluster(
        tmp_path / "cluster", 2, zookeeper=zookeeper, chroot=f"/{tmp_path.name}"
    ) as cluster:
        one, two = (b.bootstrap for b in cluster.brokers.values())
        _set(one, [("client-id", "etl")], "producer_byte_rate", 1048576)
        _set(one, [("user", None), ("client-id", None)], "request_percentage", 25.5)
        _set(one, [("user", "alice")], "consumer_byte_rate", 4096)
        expected = {
            (("client-id", "etl"),): {"producer_byte_rate": 1048576.0},
            (("user", None), ("client-id", None)): {"request_percentage": 25.5},
            (("user", "alice"),): {"consumer_byte_rate": 4096.0},
        }
        assert _await(two, expected) < 2.0
        raw = KazooClient(hosts=cluster.zookeeper_connect)
        raw.start(10)
        try:
            assert json.loads(raw.get("/config/clients/etl")[0]) == {
                "version": 1,
                "config": {"producer_byte_rate": "1048576"},
            }
            assert json.loads(raw.get("/config/users/<default>/clients/<default>")[0]) == {
                "version": 1,
                "config": {"request_percentage": "25.5"},
            }
        finally:
            raw.stop()
            raw.close()
        # a removal reaches the other broker too, and a restarted broker loads what is stored
        _set(two, [("user", "alice")], "consumer_byte_rate", None)
        del expected[(("user", "alice"),)]
        _await(one, expected)
        broker = next(iter(cluster.brokers.values()))
        broker.stop()
        broker.start()
        _await(broker.bootstrap, expected)
