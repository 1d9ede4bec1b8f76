"""ACLs in cluster mode: stored in Kafka's ZooKeeper layout, and an ACL created through one broker is
enforced by the others within a second (change notifications under /kafka-acl-changes)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from kafkalite.cli.wire import WireClient
from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CONFIG = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


def _acl(rtype: Any, name: str, op: Any, principal: str = "User:ANONYMOUS") -> AclBinding:
    return AclBinding(
        rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


def _metadata_error(bootstrap: str, topic: str) -> int:
    """A Metadata request to exactly this broker (no client-side routing)."""
    req: Any = APIS[3].request
    with WireClient(bootstrap) as c:
        resp = c.send(
            req(
                topics=[req.MetadataRequestTopic(name=topic, topic_id=None)],
                allow_auto_topic_creation=False,
            ),
            version=9,
        )
    return int(resp.topics[0].error_code)


def test_acl_created_on_one_broker_is_enforced_by_another(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    with LocalCluster(
        tmp_path / "cluster", 2, zookeeper=zookeeper, chroot=f"/{tmp_path.name}", config=CONFIG
    ) as cluster:
        one, two = (b.bootstrap for b in cluster.brokers.values())
        admin = AdminClient({"bootstrap.servers": one})
        topic = "guarded"
        for f in admin.create_topics(
            [__import__("confluent_kafka.admin").admin.NewTopic(topic, 1, 2)]
        ).values():
            f.result(30)
        deadline = time.monotonic() + 30
        while _metadata_error(two, topic) != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _metadata_error(two, topic) == 0
        # cluster operations stay allowed for the brokers (they are User:ANONYMOUS too)
        cluster_ops = [
            _acl(ResourceType.BROKER, "kafka-cluster", op)
            for op in (AclOperation.ALTER, AclOperation.CLUSTER_ACTION, AclOperation.CREATE)
        ]
        guard = _acl(ResourceType.TOPIC, topic, AclOperation.READ, "User:someone-else")
        for f in admin.create_acls([*cluster_ops, guard]).values():
            f.result(30)
        start = time.monotonic()
        while _metadata_error(two, topic) == 0 and time.monotonic() - start < 5:
            time.sleep(0.05)
        assert _metadata_error(two, topic) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert time.monotonic() - start < 1.0

        raw = KazooClient(hosts=cluster.zookeeper_connect)
        raw.start(10)
        try:
            doc = json.loads(raw.get(f"/kafka-acl/Topic/{topic}")[0])
            assert doc == {
                "version": 1,
                "acls": [
                    {
                        "principal": "User:someone-else",
                        "permissionType": "Allow",
                        "operation": "Read",
                        "host": "*",
                    }
                ],
            }
            assert raw.get_children("/kafka-acl-changes")
        finally:
            raw.stop()
            raw.close()
