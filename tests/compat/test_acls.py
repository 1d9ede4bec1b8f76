"""ACL authorization with a real client: one embedded broker with Kafka's authorizer configured.

Authentication is not built yet, so every connection is User:ANONYMOUS. The module's broker allows
everything on resources without ACLs (`allow.everyone.if.no.acl.found=true`), then puts an ACL for
another user on every topic, group and transactional id (`*`) and gives ANONYMOUS a few cluster
operations (never CREATE or ALTER_CONFIGS): a resource ANONYMOUS has no ACL for is refused. Each test
checks one API is refused with Kafka's error and changes nothing, then allowed once ACLs created
through confluent-kafka's admin API grant it — at once, and after a restart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafkalite.testing import Broker

ME = "User:ANONYMOUS"
OTHER = "User:someone-else"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
CONFIG = {
    "authorizer.class.name": AUTHORIZER,
    "allow.everyone.if.no.acl.found": "true",
    "num.partitions": "1",
}
CLUSTER_OPS = (
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
)


def _acl(rtype: Any, name: str, op: Any, principal: str = ME, perm: Any = None) -> AclBinding:
    return AclBinding(
        rtype,
        name,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        op,
        perm or AclPermissionType.ALLOW,
    )


def _wait_all(futures: dict[Any, Any]) -> list[Any]:
    return [f.result(30) for f in futures.values()]


def setup_acls(admin: AdminClient) -> None:
    bindings = [_acl(ResourceType.BROKER, "kafka-cluster", op) for op in CLUSTER_OPS]
    bindings += [
        _acl(rt, "*", AclOperation.ALL, OTHER)
        for rt in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
    ]
    _wait_all(admin.create_acls(bindings))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("acl"), config=CONFIG) as b:
        setup_acls(AdminClient({"bootstrap.servers": b.bootstrap_servers}))
        yield b


@pytest.fixture
def admin(secured: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": secured.bootstrap_servers})


@pytest.fixture
def name() -> str:
    return f"acl-{uuid.uuid4().hex[:10]}"


def grant(admin: AdminClient, rtype: Any, name: str, *ops: Any) -> None:
    _wait_all(admin.create_acls([_acl(rtype, name, op) for op in ops]))


def revoke(admin: AdminClient, rtype: Any, name: str) -> None:
    f = AclBindingFilter(
        rtype,
        name,
        ResourcePatternType.LITERAL,
        ME,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    _wait_all(admin.delete_acls([f]))


def error_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), exc
    err: KafkaError = exc.args[0]
    return int(err.code())


def leo(broker: Broker, topic: str) -> int:
    lg = broker.server.get_log(topic, 0)
    return int(lg.log_end_offset)


def produce(broker: Broker, topic: str, **conf: Any) -> KafkaError | None:
    p = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 3000, **conf}
    )
    result: list[KafkaError | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: result.append(err))
    p.flush(10)
    return result[0] if result else KafkaError(KafkaError._TIMED_OUT)


# -- the ACL APIs ---------------------------------------------------------------------------------------


def test_acls_created_described_and_deleted(admin: AdminClient, name: str) -> None:
    grant(admin, ResourceType.TOPIC, name, AclOperation.READ)
    f = AclBindingFilter(
        ResourceType.TOPIC,
        name,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = admin.describe_acls(f).result(10)
    assert [(b.name, b.principal, b.operation) for b in found] == [(name, ME, AclOperation.READ)]
    deleted = _wait_all(admin.delete_acls([f]))[0]
    assert [b.name for b in deleted] == [name]
    assert admin.describe_acls(f).result(10) == []


def test_acl_apis_answer_security_disabled_without_authorizer(tmp_path: Path) -> None:
    with Broker(tmp_path) as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        with pytest.raises(KafkaException) as info:
            _wait_all(a.create_acls([_acl(ResourceType.TOPIC, "t", AclOperation.READ)]))
        assert error_code(info.value) == KafkaError.SECURITY_DISABLED


def test_unknown_authorizer_fails_startup(tmp_path: Path) -> None:
    from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
    from kafkalite.broker.server import BrokerServer

    cfg = BrokerConfig({"log.dirs": str(tmp_path), "authorizer.class.name": "com.example.Mine"})
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name=com\.example\.Mine"):
        BrokerServer(cfg)


# -- enforcement, API by API ---------------------------------------------------------------------------


def test_produce_needs_write(secured: Broker, admin: AdminClient, name: str) -> None:
    secured.create_topic(name)
    grant(admin, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    err = produce(secured, name)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert leo(secured, name) == 0
    grant(admin, ResourceType.TOPIC, name, AclOperation.WRITE)
    assert produce(secured, name) is None
    assert leo(secured, name) == 1


def test_idempotent_produce_needs_idempotent_write_or_a_topic_write(
    secured: Broker, admin: AdminClient, name: str
) -> None:
    secured.create_topic(name)
    grant(admin, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    # the producer's InitProducerId is refused: no IDEMPOTENT_WRITE, no WRITE on any topic
    err = produce(secured, name, **{"enable.idempotence": True})
    assert err is not None
    assert leo(secured, name) == 0
    grant(admin, ResourceType.TOPIC, name, AclOperation.WRITE)
    assert produce(secured, name, **{"enable.idempotence": True}) is None
    assert leo(secured, name) == 1


def test_transactional_producer_needs_write_on_its_id(
    secured: Broker, admin: AdminClient, name: str
) -> None:
    conf = {"bootstrap.servers": secured.bootstrap_servers, "transactional.id": name}
    with pytest.raises(KafkaException) as info:
        Producer(conf).init_transactions(10)
    assert error_code(info.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(admin, ResourceType.TRANSACTIONAL_ID, name, AclOperation.WRITE)
    Producer(conf).init_transactions(20)


def test_fetch_needs_read(secured: Broker, admin: AdminClient, name: str) -> None:
    """Raw Fetch v12 (a client library would look up a group coordinator as well)."""
    from kafkalite.cli.wire import WireClient
    from kafkalite.protocol.schema import APIS

    secured.create_topic(name)
    grant(admin, ResourceType.TOPIC, name, AclOperation.WRITE)
    assert produce(secured, name) is None
    revoke(admin, ResourceType.TOPIC, name)
    F: Any = APIS[1].request

    def fetch() -> Any:
        req = F(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            session_id=0,
            session_epoch=-1,
            topics=[
                F.FetchTopic(
                    topic=name,
                    partitions=[
                        F.FetchTopic.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
        )
        with WireClient(secured.bootstrap_servers) as c:
            return c.send(req, version=12).responses[0].partitions[0]

    denied = fetch()
    assert denied.error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED and not denied.records
    grant(admin, ResourceType.TOPIC, name, AclOperation.READ)
    allowed = fetch()
    assert allowed.error_code == 0 and allowed.records


def test_metadata_hides_and_refuses_topics(secured: Broker, admin: AdminClient, name: str) -> None:
    secured.create_topic(name)
    assert name not in admin.list_topics(timeout=10).topics
    named = admin.list_topics(topic=name, timeout=10).topics[name]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(admin, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    assert name in admin.list_topics(timeout=10).topics
    assert admin.list_topics(topic=name, timeout=10).topics[name].error is None


def test_auto_creation_needs_create(secured: Broker, admin: AdminClient, name: str) -> None:
    grant(admin, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    md = admin.list_topics(topic=name, timeout=10).topics[name]
    assert md.error is not None and md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert name not in secured.topics()
    grant(admin, ResourceType.TOPIC, name, AclOperation.CREATE)
    admin.list_topics(topic=name, timeout=10)
    assert name in secured.topics()


def test_create_topics_needs_create(secured: Broker, admin: AdminClient, name: str) -> None:
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.create_topics([NewTopic(name, 1, 1)]))
    assert error_code(info.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert name not in secured.topics()
    grant(admin, ResourceType.TOPIC, name, AclOperation.CREATE)
    _wait_all(admin.create_topics([NewTopic(name, 1, 1)]))
    assert name in secured.topics()


def test_delete_topics_needs_delete(secured: Broker, admin: AdminClient, name: str) -> None:
    secured.create_topic(name)
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.delete_topics([name]))
    assert error_code(info.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert name in secured.topics()
    grant(admin, ResourceType.TOPIC, name, AclOperation.DELETE)
    _wait_all(admin.delete_topics([name]))
    assert name not in secured.topics()


def test_create_partitions_needs_alter(secured: Broker, admin: AdminClient, name: str) -> None:
    secured.create_topic(name)
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.create_partitions([NewPartitions(name, 2)]))
    assert error_code(info.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert secured.server.metadata_store.get(name).partitions == 1
    grant(admin, ResourceType.TOPIC, name, AclOperation.ALTER)
    _wait_all(admin.create_partitions([NewPartitions(name, 2)]))
    assert secured.server.metadata_store.get(name).partitions == 2


def test_delete_records_needs_delete(secured: Broker, admin: AdminClient, name: str) -> None:
    secured.create_topic(name)
    grant(admin, ResourceType.TOPIC, name, AclOperation.WRITE)
    assert produce(secured, name) is None
    tp = TopicPartition(name, 0, 1)
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.delete_records([tp]))
    assert error_code(info.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert secured.server.get_log(name, 0).log_start_offset == 0
    grant(admin, ResourceType.TOPIC, name, AclOperation.DELETE)
    _wait_all(admin.delete_records([tp]))
    assert secured.server.get_log(name, 0).log_start_offset == 1


def test_configs_need_describe_configs_and_alter_configs(
    secured: Broker, admin: AdminClient, name: str
) -> None:
    secured.create_topic(name)
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.describe_configs([res]))
    assert error_code(info.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(admin, ResourceType.TOPIC, name, AclOperation.DESCRIBE_CONFIGS)
    _wait_all(admin.describe_configs([res]))
    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "1234", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.incremental_alter_configs([change]))
    assert error_code(info.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "retention.ms" not in secured.server.metadata_store.get(name).configs
    grant(admin, ResourceType.TOPIC, name, AclOperation.ALTER_CONFIGS)
    _wait_all(admin.incremental_alter_configs([change]))
    assert secured.server.metadata_store.get(name).configs["retention.ms"] == "1234"


def test_group_configs_need_describe_configs_and_alter_configs(
    secured: Broker, admin: AdminClient, name: str
) -> None:
    res = ConfigResource(ResourceType.GROUP, name)
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.describe_configs([res]))
    assert error_code(info.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(admin, ResourceType.GROUP, name, AclOperation.DESCRIBE_CONFIGS)
    _wait_all(admin.describe_configs([res]))
    change = ConfigResource(
        ResourceType.GROUP,
        name,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.incremental_alter_configs([change]))
    assert error_code(info.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert secured.server.group_configs.overrides(name) == {}
    grant(admin, ResourceType.GROUP, name, AclOperation.ALTER_CONFIGS)
    _wait_all(admin.incremental_alter_configs([change]))
    assert secured.server.group_configs.overrides(name) == {"share.auto.offset.reset": "earliest"}


def test_group_offsets_need_group_and_topic_read(
    secured: Broker, admin: AdminClient, name: str
) -> None:
    secured.create_topic(name)
    group = f"g-{name}"
    commit = [ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0, 7)])]
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.alter_consumer_group_offsets(commit))
    assert error_code(info.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(admin, ResourceType.GROUP, group, AclOperation.READ)
    result = _wait_all(admin.alter_consumer_group_offsets(commit))[0]
    err = result.topic_partitions[0].error
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    fetch = [ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0)])]
    fetched = _wait_all(admin.list_consumer_group_offsets(fetch))[0].topic_partitions[0]
    assert fetched.error is not None  # DESCRIBE on the topic is missing too
    grant(admin, ResourceType.TOPIC, name, AclOperation.READ)
    _wait_all(admin.alter_consumer_group_offsets(commit))
    fetched = _wait_all(admin.list_consumer_group_offsets(fetch))[0].topic_partitions[0]
    assert fetched.error is None and fetched.offset == 7


def test_groups_need_describe_and_delete(secured: Broker, admin: AdminClient, name: str) -> None:
    secured.create_topic(name)
    group = f"g-{name}"
    grant(admin, ResourceType.GROUP, group, AclOperation.READ)
    grant(admin, ResourceType.TOPIC, name, AclOperation.READ)
    commit = [ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0, 3)])]
    _wait_all(admin.alter_consumer_group_offsets(commit))
    revoke(admin, ResourceType.GROUP, group)
    # ListGroups: ANONYMOUS holds ALTER (so DESCRIBE) on the cluster here and sees every group
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.describe_consumer_groups([group]))
    assert error_code(info.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as info:
        _wait_all(admin.delete_consumer_groups([group]))
    assert error_code(info.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(admin, ResourceType.GROUP, group, AclOperation.DESCRIBE, AclOperation.DELETE)
    _wait_all(admin.describe_consumer_groups([group]))
    _wait_all(admin.delete_consumer_groups([group]))


def test_joining_a_group_needs_read(secured: Broker, admin: AdminClient, name: str) -> None:
    secured.create_topic(name)
    group = f"g-{name}"
    grant(admin, ResourceType.TOPIC, name, AclOperation.READ)
    c = Consumer(
        {
            "bootstrap.servers": secured.bootstrap_servers,
            "group.id": group,
            "session.timeout.ms": 6000,
        }
    )
    try:
        c.subscribe([name])
        deadline = time.monotonic() + 10
        err = None
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                err = m.error()
        assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()


def test_acls_survive_a_restart(tmp_path: Path, name: str) -> None:
    with Broker(tmp_path, config=CONFIG) as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        setup_acls(a)
        grant(a, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    with Broker(tmp_path, config=CONFIG) as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        b.create_topic(name)
        b.create_topic(name + "-hidden")
        topics = a.list_topics(timeout=10).topics
        assert name in topics and name + "-hidden" not in topics


def test_authorized_operations_through_confluent_admin(
    secured: Broker, admin: AdminClient, name: str
) -> None:
    """KIP-430: describe_topics / describe_cluster / describe_consumer_groups with
    include_authorized_operations report what the principal may do, implied operations included."""
    from confluent_kafka import TopicCollection

    secured.create_topic(name)
    grant(admin, ResourceType.TOPIC, name, AclOperation.READ)
    (topic,) = [
        f.result(30)
        for f in admin.describe_topics(
            TopicCollection([name]), include_authorized_operations=True
        ).values()
    ]
    assert set(topic.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster.authorized_operations) == set(CLUSTER_OPS)
    grant(admin, ResourceType.GROUP, name, AclOperation.DELETE)
    (group,) = [
        f.result(30)
        for f in admin.describe_consumer_groups([name], include_authorized_operations=True).values()
    ]
    assert set(group.authorized_operations) == {AclOperation.DELETE, AclOperation.DESCRIBE}
    # not asked for: not reported
    (plain,) = [f.result(30) for f in admin.describe_topics(TopicCollection([name])).values()]
    assert not plain.authorized_operations


def test_share_group_offsets_need_group_and_topic_acls(
    secured: Broker, admin: AdminClient, name: str
) -> None:
    """DescribeShareGroupOffsets: DESCRIBE on the group and topics; Alter/DeleteShareGroupOffsets:
    READ on both (raw requests: the client libraries have no share-group admin calls)."""
    from kafkalite.cli.wire import WireClient
    from kafkalite.protocol.schema import APIS

    secured.create_topic(name)
    group = f"g-{name}"
    D: Any = APIS[90].request
    A: Any = APIS[91].request
    X: Any = APIS[92].request
    DG = D.DescribeShareGroupOffsetsRequestGroup
    AT = A.AlterShareGroupOffsetsRequestTopic

    def call() -> tuple[Any, Any, Any]:
        with WireClient(secured.bootstrap_servers) as c:
            altered = c.send(
                A(group_id=group, topics=[AT(topic_name=name, partitions=[
                    AT.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)
                ])]),
                version=0,
            )  # fmt: skip
            described = c.send(
                D(groups=[DG(group_id=group, topics=[
                    DG.DescribeShareGroupOffsetsRequestTopic(topic_name=name, partitions=[0])
                ])]),
                version=0,
            ).groups[0]  # fmt: skip
            deleted = c.send(
                X(group_id=group, topics=[X.DeleteShareGroupOffsetsRequestTopic(topic_name=name)]),
                version=0,
            )
            return altered, described, deleted

    altered, described, deleted = call()
    assert altered.error_code == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert described.error_code == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert deleted.error_code == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(admin, ResourceType.GROUP, group, AclOperation.READ)  # READ implies DESCRIBE
    altered, described, deleted = call()
    assert altered.error_code == 0
    assert altered.responses[0].partitions[0].error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert described.error_code == 0
    assert described.topics[0].partitions[0].error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert deleted.error_code == 0
    assert deleted.responses[0].error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(admin, ResourceType.TOPIC, name, AclOperation.READ)
    altered, described, deleted = call()
    assert altered.responses[0].partitions[0].error_code == 0
    part = described.topics[0].partitions[0]
    assert (part.error_code, part.start_offset) == (0, 0)
    assert deleted.responses[0].error_code == 0
