"""ACL storage formats: Kafka's ZooKeeper JSON and paths (AclAuthorizer's ZK mode), change notifications,
and the single-node file kept by LocalMetadataStore (atomic, reloaded at start)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkalite.cluster import acl_data as ad
from kafkalite.cluster.metadata import LocalMetadataStore, MetadataError
from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
DENY_IW = AccessControlEntry(
    "User:bob", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.DENY
)


def test_zk_paths_are_kafkas() -> None:
    topic = ResourcePattern(ResourceType.TOPIC, "orders")
    txn = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "app-", PatternType.PREFIXED)
    assert ad.resource_path(topic) == "/kafka-acl/Topic/orders"
    assert ad.resource_path(txn) == "/kafka-acl-extended/prefixed/TransactionalId/app-"
    assert ad.change_path(PatternType.LITERAL) == "/kafka-acl-changes"
    assert ad.change_path(PatternType.PREFIXED) == "/kafka-acl-extended-changes"


def test_zk_acl_json_is_kafkas() -> None:
    doc = json.loads(ad.encode_acls([READ, DENY_IW]))
    assert doc["version"] == 1
    assert sorted(doc["acls"], key=lambda d: d["principal"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {
            "principal": "User:bob",
            "permissionType": "Deny",
            "operation": "IdempotentWrite",
            "host": "10.0.0.1",
        },
    ]
    assert ad.decode_acls("/p", ad.encode_acls([READ, DENY_IW])) == {READ, DENY_IW}


def test_zk_acl_json_written_by_kafka_decodes() -> None:
    data = (
        b'{"version":1,"acls":[{"principal":"User:*","permissionType":"Allow",'
        b'"operation":"DescribeConfigs","host":"*"}]}'
    )
    (entry,) = ad.decode_acls("/kafka-acl/Cluster/kafka-cluster", data)
    assert entry.operation is AclOperation.DESCRIBE_CONFIGS and entry.principal == "User:*"


@pytest.mark.parametrize(
    "data", [b"nope", b'{"version":2,"acls":[]}', b'{"version":1,"acls":[{"principal":"x"}]}']
)
def test_bad_zk_acl_json_is_an_error(data: bytes) -> None:
    with pytest.raises(ad.AclDataError):
        ad.decode_acls("/kafka-acl/Topic/t", data)


def test_change_notifications() -> None:
    literal = ResourcePattern(ResourceType.GROUP, "g:1")
    assert ad.encode_change(literal) == b"GROUP:g:1"
    assert ad.decode_change(PatternType.LITERAL, b"Group:g:1") == literal  # older Kafka's casing
    prefixed = ResourcePattern(ResourceType.TOPIC, "pre", PatternType.PREFIXED)
    assert json.loads(ad.encode_change(prefixed)) == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "pre",
        "patternType": "PREFIXED",
    }
    assert ad.decode_change(PatternType.PREFIXED, ad.encode_change(prefixed)) == prefixed
    with pytest.raises(ad.AclDataError):
        ad.decode_change(PatternType.LITERAL, b"no-separator")


def test_local_store_keeps_acls_in_their_own_file(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    store.load()
    topic = ResourcePattern(ResourceType.TOPIC, "t")
    prefix = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)
    assert store.update_acls(topic, [READ]) == {READ}
    store.update_acls(prefix, [READ, DENY_IW])
    store.update_acls(prefix, (), [READ])
    assert not list(tmp_path.glob("*.tmp"))
    doc = json.loads((tmp_path / ad.ACL_FILE).read_text())
    assert doc["version"] == 1 and len(doc["resources"]) == 2

    again = LocalMetadataStore(tmp_path)
    again.load()
    assert set(again.acls()) == {AclBinding(topic, READ), AclBinding(prefix, DENY_IW)}
    assert again.acls_of(prefix) == {DENY_IW}
    again.update_acls(topic, (), [READ])  # the last entry gone: the pattern goes too
    again.load()
    assert again.acls_of(topic) == set() and len(again.acls()) == 1


def test_a_damaged_acl_file_fails_loading(tmp_path: Path) -> None:
    (tmp_path / ad.ACL_FILE).write_text("{broken")
    with pytest.raises(MetadataError, match=ad.ACL_FILE):
        LocalMetadataStore(tmp_path).load()
