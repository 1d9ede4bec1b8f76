"""One node is a one-broker Kafka cluster (issue 31): ElectLeaders, AlterPartitionReassignments and
ListPartitionReassignments through kafka-python's and confluent-kafka's admin clients, with Kafka's answers."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTp
from kafka import errors as kerr
from kafka.admin import NewTopic as KNewTopic

from kafkalite.protocol.errors import ErrorCode

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import ElectionType, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

pytestmark = pytest.mark.compat

PREFERRED, UNCLEAN = 0, 1


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=30_000)
    yield a
    a.close()


@pytest.fixture(scope="module")
def two_partitions(admin) -> str:
    admin.create_topics([KNewTopic("one-broker-admin", 2, 1)])
    return "one-broker-admin"


@pytest.fixture(scope="module")
def node_id(admin) -> int:
    (node,) = admin.describe_cluster()["brokers"]
    return int(node["broker_id"])


def _codes(response) -> dict[tuple[str, int], int]:
    return {
        (t.topic, p.partition_id): p.error_code
        for t in response.replica_election_results
        for p in t.partition_result
    }


# (election type, partitions asked: a dict, or None for all) -> the codes Kafka answers
ELECTIONS = [
    # the preferred (only) replica already leads
    (PREFERRED, {"one-broker-admin": [0, 1]}, {0: ErrorCode.ELECTION_NOT_NEEDED, 1: 84}),
    # unclean: a live leader exists
    (UNCLEAN, {"one-broker-admin": [1]}, {1: ErrorCode.ELECTION_NOT_NEEDED}),
    # a partition that does not exist
    (PREFERRED, {"one-broker-admin": [7]}, {7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}),
    # the topic's partitions (kafka-python names them from its metadata)
    (PREFERRED, ["one-broker-admin"], {0: 84, 1: ErrorCode.ELECTION_NOT_NEEDED}),
]


@pytest.mark.parametrize(("election_type", "asked", "expected"), ELECTIONS)
def test_kafka_python_elect_leaders(admin, two_partitions, election_type, asked, expected):
    response = admin.elect_leaders(election_type, asked, raise_errors=False)
    assert response.error_code == 0
    assert _codes(response) == {(two_partitions, p): int(c) for p, c in expected.items()}


def test_kafka_python_elect_leaders_unknown_topic(admin):
    response = admin.elect_leaders(PREFERRED, {"no-such-topic": [0]}, raise_errors=False)
    assert _codes(response) == {("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    with pytest.raises(kerr.UnknownTopicOrPartitionError):
        admin.elect_leaders(PREFERRED, {"no-such-topic": [0]})
    # ELECTION_NOT_NEEDED is not an error to kafka-python
    admin.elect_leaders(PREFERRED, {"one-broker-admin": [0]})


def test_kafka_python_elect_leaders_of_every_partition(admin, two_partitions):
    """kafka-python's None names every partition it knows (internal topics too): none needs one."""
    codes = _codes(admin.elect_leaders(PREFERRED, None, raise_errors=False))
    assert {(two_partitions, 0), (two_partitions, 1), ("__consumer_offsets", 0)} <= set(codes)
    assert set(codes.values()) == {ErrorCode.ELECTION_NOT_NEEDED}


def test_kafka_python_list_partition_reassignments_is_empty(admin, two_partitions):
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments([KTp(two_partitions, 0), KTp("nope", 0)]) == {}


# (replicas asked; "me" is the one broker) -> kafka-python's error class (None: accepted)
REASSIGNMENTS = [
    ([99], kerr.InvalidReplicationAssignmentError),  # a broker that does not exist
    (["me", 99], kerr.InvalidReplicationAssignmentError),
    (["me", "me"], kerr.InvalidReplicationAssignmentError),  # duplicate replicas
    (None, kerr.NoReassignmentInProgressError),  # cancel: nothing in flight
    (["me"], None),  # the replicas it has: accepted, nothing moves
]


@pytest.mark.parametrize(("replicas", "expected"), REASSIGNMENTS)
def test_kafka_python_alter_partition_reassignments(
    admin, two_partitions, node_id, replicas, expected
):
    target = None if replicas is None else [node_id if r == "me" else r for r in replicas]
    tp = KTp(two_partitions, 1)
    assert admin.alter_partition_reassignments({tp: target}) == {tp: expected}
    assert admin.list_partition_reassignments() == {}


def test_kafka_python_reassignment_of_unknown_partition(admin, node_id):
    tp, cancel = KTp("no-such-topic", 0), KTp("no-such-topic", 1)
    assert admin.alter_partition_reassignments({tp: [node_id], cancel: None}) == {
        tp: kerr.UnknownTopicOrPartitionError,
        cancel: kerr.NoReassignmentInProgressError,  # Kafka checks the cancel first
    }


def test_confluent_elect_leaders(broker, two_partitions):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tps = [TopicPartition(two_partitions, 0), TopicPartition(two_partitions, 9)]
    result = admin.elect_leaders(ElectionType.PREFERRED, tps).result(30)
    codes = {(tp.topic, tp.partition): err.code() for tp, err in result.items()}
    assert codes == {
        (two_partitions, 0): confluent_kafka.KafkaError.ELECTION_NOT_NEEDED,
        (two_partitions, 9): confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    # every partition: none needed an election, so none is named
    assert admin.elect_leaders(ElectionType.UNCLEAN, None).result(30) == {}


def test_delegation_token_apis_answer_as_kafka_with_tokens_disabled(broker):
    """A one-broker Kafka serves the delegation-token APIs; on a PLAINTEXT connection every one is
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (no client library here has them: the wire client asks)."""
    from kafkalite.cli.wire import WireClient
    from kafkalite.protocol.messages import delegation_tokens as dt

    with WireClient(broker.bootstrap_servers, timeout=10) as c:
        refused = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        create = c.send(dt.CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1))
        assert (create.error_code, create.principal_name, create.hmac) == (
            refused,
            "ANONYMOUS",
            b"",
        )
        renew = c.send(dt.RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=1000))
        expire = c.send(dt.ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period_ms=-1))
        assert renew.error_code == expire.error_code == refused
        described = c.send(dt.DescribeDelegationTokenRequest(owners=None))
        assert (described.error_code, described.tokens) == (refused, [])
