"""Client quotas at rest: Kafka's znode paths and change notifications, the data-dir file, and the
local store keeping them across a reload."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.metadata import LocalMetadataStore, MetadataError
from kafkalite.cluster.quota_data import (
    QuotaDataError,
    apply_quota_changes,
    decode_quota_file,
    encode_quota_file,
    quotas_from_config,
)
from kafkalite.security.quota import DEFAULT_ENTITY, QuotaEntity

D = DEFAULT_ENTITY


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (QuotaEntity("alice", None), "users/alice"),
        (QuotaEntity("alice", "app-1"), "users/alice/clients/app-1"),
        (QuotaEntity(D, D), "users/<default>/clients/<default>"),
        (QuotaEntity(None, "my app/x"), "clients/my%20app%2Fx"),
        (QuotaEntity(None, D), "clients/<default>"),
        (QuotaEntity("CN=a,O=b", None), "users/CN%3Da%2CO%3Db"),
    ],
)
def test_kafka_entity_paths(entity: QuotaEntity, path: str) -> None:
    assert zd.quota_entity_path(entity) == path
    assert zd.quota_entity_config_path(entity) == f"/config/{path}"
    assert zd.parse_quota_entity_path(path) == entity


def test_an_empty_parent_znode_is_an_empty_config() -> None:
    assert zd.decode_config("/config/users/<default>", b"") == {}
    assert zd.decode_config("/config/users/<default>", None) == {}


def test_other_entity_paths_are_not_quotas() -> None:
    for path in ("topics/t", "brokers/1", "users/", "users/a/clients/", "users/a/x/b", "ips/"):
        assert zd.parse_quota_entity_path(path) is None


def test_config_keys_beside_scram() -> None:
    config = {"SCRAM-SHA-256": "salt=...", "producer_byte_rate": "1024"}
    assert quotas_from_config(config) == {"producer_byte_rate": 1024.0}
    new = apply_quota_changes(config, {"request_percentage": 50.0}, {"producer_byte_rate"})
    assert new == {"SCRAM-SHA-256": "salt=...", "request_percentage": "50.0"}
    with pytest.raises(QuotaDataError):
        quotas_from_config({"producer_byte_rate": "fast"})
    with pytest.raises(QuotaDataError):
        quotas_from_config({"producer_byte_rate": "-1"})


def test_file_round_trip_and_garbage() -> None:
    quotas = {
        QuotaEntity("alice", D): {"producer_byte_rate": 1024.0},
        QuotaEntity(None, "app"): {"request_percentage": 12.5, "consumer_byte_rate": 2048.0},
    }
    assert decode_quota_file(encode_quota_file(quotas)) == quotas
    for garbage in ("", "[]", '{"entities": [1]}', '{"entities": [{"config": {}}]}'):
        with pytest.raises(QuotaDataError):
            decode_quota_file(garbage)


def test_local_store_keeps_quotas(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    store.load()
    alice = QuotaEntity("alice", None)
    assert store.alter_client_quotas(alice, {"producer_byte_rate": 100.0}) == {
        "producer_byte_rate": 100.0
    }
    store.alter_client_quotas(QuotaEntity(None, D), {"consumer_byte_rate": 5.0})
    again = LocalMetadataStore(tmp_path)
    again.load()
    assert again.client_quotas() == store.client_quotas()
    assert again.alter_client_quotas(alice, {}, {"producer_byte_rate"}) == {}
    assert again.entity_client_quotas(alice) == {}
    (tmp_path / "kafkalite-client-quotas.json").write_text("{not json")
    with pytest.raises(MetadataError, match=r"kafkalite-client-quotas\.json"):
        LocalMetadataStore(tmp_path).load()
