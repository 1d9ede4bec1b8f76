"""ip quota entities at rest: Kafka's /config/ips/<ip> znodes and `ips/<ip>` change notifications
(through an in-memory ZooKeeper), and the single-node file kept across a reload."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.metadata import LocalMetadataStore
from kafkalite.cluster.quota_data import decode_quota_file, describe_entity, encode_quota_file
from kafkalite.cluster.zk import KafkaZkClient
from kafkalite.cluster.zk_metadata_store import ZkMetadataStore
from kafkalite.security.quota import DEFAULT_ENTITY, QuotaEntity

D = DEFAULT_ENTITY
RATE = "connection_creation_rate"


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (QuotaEntity(ip="10.0.0.1"), "ips/10.0.0.1"),
        (QuotaEntity(ip=D), "ips/<default>"),
        (QuotaEntity(ip="::1"), "ips/%3A%3A1"),  # sanitized as Kafka writes entity names
    ],
)
def test_kafka_ip_entity_paths(entity: QuotaEntity, path: str) -> None:
    assert zd.quota_entity_path(entity) == path
    assert zd.quota_entity_config_path(entity) == f"/config/{path}"
    assert zd.parse_quota_entity_path(path) == entity


def test_quota_file_keeps_ip_entities_and_reads_old_files() -> None:
    quotas = {
        QuotaEntity(ip="10.0.0.1"): {RATE: 5.0},
        QuotaEntity(ip=D): {RATE: 100.0},
        QuotaEntity("alice", None): {"producer_byte_rate": 1024.0},
    }
    text = encode_quota_file(quotas)
    assert '"connection_creation_rate": "5"' in text  # Kafka's INT, as it writes it
    assert decode_quota_file(text) == quotas
    # a file written before ip entities existed has no "ip" key and reads the same
    old = encode_quota_file({QuotaEntity("alice", None): {"producer_byte_rate": 1024.0}})
    assert '"ip"' not in old
    assert decode_quota_file(old) == {QuotaEntity("alice", None): {"producer_byte_rate": 1024.0}}
    assert describe_entity(QuotaEntity(ip=D)) == "ip=<default>"


def test_local_store_keeps_ip_quotas_across_a_reload(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    store.load()
    ip = QuotaEntity(ip="10.0.0.1")
    assert store.alter_client_quotas(ip, {RATE: 7.0}) == {RATE: 7.0}
    store.alter_client_quotas(QuotaEntity(ip=D), {RATE: 50.0})
    again = LocalMetadataStore(tmp_path)
    again.load()
    assert again.client_quotas() == {ip: {RATE: 7.0}, QuotaEntity(ip=D): {RATE: 50.0}}
    assert again.alter_client_quotas(ip, {}, {RATE}) == {}
    assert again.entity_client_quotas(ip) == {}


class MemoryZk:
    """Just enough of kazoo's client for the config znodes: get, get_children, create, set."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.seq = 0

    def _parents(self, path: str) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            self.nodes.setdefault("/" + "/".join(parts[:i]), (b"", 0))

    def get(self, path: str) -> tuple[bytes, Any]:
        if path not in self.nodes:
            raise NoNodeError(path)
        data, version = self.nodes[path]
        return data, SimpleNamespace(version=version)

    def get_children(self, path: str) -> list[str]:
        if path not in self.nodes:
            raise NoNodeError(path)
        prefix = path.rstrip("/") + "/"
        return [
            p[len(prefix) :]
            for p in self.nodes
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        ]

    def create(
        self, path: str, data: bytes = b"", makepath: bool = False, sequence: bool = False
    ) -> str:
        if sequence:
            path, self.seq = f"{path}{self.seq:010d}", self.seq + 1
        if path in self.nodes:
            raise NodeExistsError(path)
        if makepath:
            self._parents(path)
        self.nodes[path] = (data, 0)
        return path

    def set(self, path: str, data: bytes, version: int = -1) -> None:
        if path not in self.nodes:
            raise NoNodeError(path)
        if version not in (-1, self.nodes[path][1]):
            raise BadVersionError(path)
        self.nodes[path] = (data, self.nodes[path][1] + 1)


def test_zookeeper_store_writes_config_ips_and_notifies_every_broker() -> None:
    client = KafkaZkClient("127.0.0.1:1")  # never started: its kazoo client is replaced
    memory = MemoryZk()
    client.zk = memory  # type: ignore[assignment]
    store = ZkMetadataStore(client, 1)
    ip, default = QuotaEntity(ip="10.0.0.1"), QuotaEntity(ip=D)
    assert store.alter_client_quotas(ip, {RATE: 5.0}) == {RATE: 5.0}
    store.alter_client_quotas(default, {RATE: 20.0})
    store.alter_client_quotas(QuotaEntity("alice", None), {"producer_byte_rate": 1024.0})
    # the znode as Kafka writes it, and the notification another broker reloads the entity from
    assert zd.decode_config("/config/ips/10.0.0.1", memory.nodes["/config/ips/10.0.0.1"][0]) == {
        RATE: "5"
    }
    changes = sorted(p for p in memory.nodes if p.startswith("/config/changes/"))
    entity_paths = [zd.decode_config_change(p, memory.nodes[p][0]) for p in changes]
    assert entity_paths[:2] == ["ips/10.0.0.1", "ips/<default>"]
    assert [zd.parse_quota_entity_path(p) for p in entity_paths[:2]] == [ip, default]
    # what a broker starting up (or reloading one entity) reads back
    assert store.client_quotas() == {
        ip: {RATE: 5.0},
        default: {RATE: 20.0},
        QuotaEntity("alice", None): {"producer_byte_rate": 1024.0},
    }
    assert store.entity_client_quotas(default) == {RATE: 20.0}
    assert store.alter_client_quotas(ip, {}, {RATE}) == {}
    assert ip not in store.client_quotas()
