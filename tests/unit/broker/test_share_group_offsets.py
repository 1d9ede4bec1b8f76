"""KIP-932 offset administration over the wire against an embedded broker: DescribeShareGroupOffsets after
acknowledgements, AlterShareGroupOffsets refused while a member is in the group and honoured by the next
ShareFetch once it is empty, DeleteShareGroupOffsets followed by a fresh initialization, and the errors.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.builder import build_batch
from kafkalite.testing import Broker

E = ErrorCode
HB: Any = APIS[76].request
FETCH: Any = APIS[78].request
ACK: Any = APIS[79].request
DESCRIBE: Any = APIS[90].request
ALTER: Any = APIS[91].request
DELETE: Any = APIS[92].request

CONFIG = {
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": "3",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("share-offsets"), config=CONFIG) as b:
        yield b


@pytest.fixture
def wire(broker: Broker) -> Iterator[WireClient]:
    with WireClient(broker.bootstrap_servers, timeout=15) as c:
        yield c


# ---------------------------------------------------------------------------
# helpers


def produce(c: WireClient, topic: str, n: int) -> None:
    P: Any = APIS[0].request
    T = P.TopicProduceData
    blob = build_batch([(None, f"v{i}".encode()) for i in range(n)])
    r = c.send(
        P(
            transactional_id=None,
            acks=-1,
            timeout_ms=10000,
            topic_data=[
                T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=blob)])
            ],
        ),
        version=9,
    )
    assert r.responses[0].partition_responses[0].error_code == 0


def earliest(c: WireClient, group: str) -> None:
    R: Any = APIS[44].request
    res = R.AlterConfigsResource
    r = c.send(
        R(
            resources=[
                res(
                    resource_type=32,
                    resource_name=group,
                    configs=[
                        res.AlterableConfig(
                            name="share.auto.offset.reset", config_operation=0, value="earliest"
                        )
                    ],
                )
            ],
            validate_only=False,
        ),
        version=1,
    )
    assert r.responses[0].error_code == 0


def setup(b: Broker, c: WireClient, n: int = 10) -> tuple[str, str, uuid.UUID]:
    topic, group = f"so-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    b.create_topic(topic, 1)
    earliest(c, group)
    produce(c, topic, n)
    return topic, group, c.metadata([topic]).topics[0].topic_id


def join(c: WireClient, group: str, topic: str) -> str:
    r = c.send(
        HB(group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
           subscribed_topic_names=[topic]),
        version=1,
    )  # fmt: skip
    assert r.error_code == 0, r
    return str(r.member_id)


def leave(c: WireClient, group: str, member: str) -> None:
    """Close the member's share session (releasing what it holds), then leave the group."""
    r = c.send(ACK(group_id=group, member_id=member, share_session_epoch=-1, topics=[]), version=1)
    assert r.error_code == 0, r
    hb = c.send(
        HB(group_id=group, member_id=member, member_epoch=-1, rack_id=None,
           subscribed_topic_names=None),
        version=1,
    )  # fmt: skip
    assert hb.error_code == 0, hb


def fetch(
    c: WireClient, group: str, member: str, epoch: int, tid: uuid.UUID, acks: Any = ()
) -> list[tuple[int, int, int]]:
    T = FETCH.FetchTopic
    part = T.FetchPartition(
        partition_index=0,
        acknowledgement_batches=[
            T.FetchPartition.AcknowledgementBatch(
                first_offset=a, last_offset=b, acknowledge_types=[t]
            )
            for a, b, t in acks
        ],
    )
    r = c.send(
        FETCH(
            group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=500,
            min_bytes=1, max_bytes=1 << 20, max_records=4, batch_size=4,
            share_acquire_mode=1, is_renew_ack=False,  # RECORD_LIMIT: exactly 4
            topics=[T(topic_id=tid, partitions=[part])], forgotten_topics_data=[],
        ),
        version=2,
    )  # fmt: skip
    assert r.error_code == 0, r
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in r.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def describe(c: WireClient, group: str, topics: dict[str, list[int]] | None) -> Any:
    G = DESCRIBE.DescribeShareGroupOffsetsRequestGroup
    listed = (
        None
        if topics is None
        else [
            G.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in topics.items()
        ]
    )
    r = c.send(DESCRIBE(groups=[G(group_id=group, topics=listed)]), version=0)
    assert len(r.groups) == 1 and r.groups[0].group_id == group
    return r.groups[0]


def offsets(g: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, error code)."""
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.error_code)
        for t in g.topics
        for p in t.partitions
    }


def alter(c: WireClient, group: str, topic: str, starts: dict[int, int]) -> Any:
    T = ALTER.AlterShareGroupOffsetsRequestTopic
    return c.send(
        ALTER(
            group_id=group,
            topics=[
                T(
                    topic_name=topic,
                    partitions=[
                        T.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                        for p, o in starts.items()
                    ],
                )
            ],
        ),
        version=0,
    )


def delete(c: WireClient, group: str, topics: list[str]) -> Any:
    T = DELETE.DeleteShareGroupOffsetsRequestTopic
    return c.send(DELETE(group_id=group, topics=[T(topic_name=t) for t in topics]), version=0)


# ---------------------------------------------------------------------------
# tests


def test_describe_alter_delete_round(broker: Broker, wire: WireClient) -> None:
    topic, group, tid = setup(broker, wire, 10)
    # not a share group yet
    assert describe(wire, group, None).error_code == E.GROUP_ID_NOT_FOUND

    a = join(wire, group, topic)
    assert fetch(wire, group, a, 0, tid) == [(0, 3, 1)]
    # accept 0-3: the share-partition start offset moves to 4; 4-7 are acquired next
    assert fetch(wire, group, a, 1, tid, acks=[(0, 3, 1)]) == [(4, 7, 1)]
    d = describe(wire, group, {topic: [0]})
    assert d.error_code == 0
    assert offsets(d) == {(topic, 0): (4, 0)}
    assert d.topics[0].topic_id == tid and d.topics[0].partitions[0].leader_epoch >= 0
    assert offsets(describe(wire, group, None)) == {(topic, 0): (4, 0)}

    # a member is in the group: Kafka refuses both changes
    r = alter(wire, group, topic, {0: 8})
    assert r.error_code == E.NON_EMPTY_GROUP
    assert r.responses[0].partitions[0].error_code == E.NON_EMPTY_GROUP
    assert delete(wire, group, [topic]).error_code == E.NON_EMPTY_GROUP

    # once it has left (its 4-7 released), the start offset can be set
    leave(wire, group, a)
    r = alter(wire, group, topic, {0: 8})
    assert r.error_code == 0
    assert [(t.topic_name, t.topic_id) for t in r.responses] == [(topic, tid)]
    assert [(p.partition_index, p.error_code) for p in r.responses[0].partitions] == [(0, 0)]
    assert offsets(describe(wire, group, {topic: [0]})) == {(topic, 0): (8, 0)}

    # the next member starts at the new offset: nothing before 8 is delivered again
    b = join(wire, group, topic)
    assert fetch(wire, group, b, 0, tid) == [(8, 9, 1)]
    leave(wire, group, b)

    # delete: the state is gone, and the next fetch initializes again (earliest)
    r = delete(wire, group, [topic])
    assert r.error_code == 0
    assert [(t.topic_name, t.topic_id, t.error_code) for t in r.responses] == [(topic, tid, 0)]
    assert offsets(describe(wire, group, {topic: [0]})) == {(topic, 0): (-1, 0)}
    assert describe(wire, group, None).topics == []
    c = join(wire, group, topic)
    assert fetch(wire, group, c, 0, tid) == [(0, 3, 1)]
    assert offsets(describe(wire, group, {topic: [0]})) == {(topic, 0): (0, 0)}
    leave(wire, group, c)


def test_errors(broker: Broker, wire: WireClient) -> None:
    topic, group, _ = setup(broker, wire, 2)
    # deleting or describing offsets of a group that does not exist
    assert delete(wire, "no-such-share-group", [topic]).error_code == E.GROUP_ID_NOT_FOUND
    # altering creates the empty share group (offsets may be set before the first member)
    r = alter(wire, group, topic, {0: 1, 3: 0})
    assert r.error_code == 0
    assert [(p.partition_index, p.error_code) for p in r.responses[0].partitions] == [
        (0, 0),
        (3, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert alter(wire, group, "nope", {0: 0}).responses[0].partitions[0].error_code == (
        E.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert alter(wire, group, topic, {0: -5}).responses[0].partitions[0].error_code == (
        E.INVALID_REQUEST
    )
    d = describe(wire, group, {topic: [0, 7], "nope": [0]})
    assert d.error_code == 0
    assert offsets(d) == {
        (topic, 0): (1, 0),
        (topic, 7): (-1, E.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0): (-1, E.UNKNOWN_TOPIC_OR_PARTITION),
    }
    assert offsets(describe(wire, group, None)) == {(topic, 0): (1, 0)}
    r = delete(wire, group, [topic, "nope"])
    assert r.error_code == 0
    assert [(t.topic_name, t.error_code) for t in r.responses] == [
        (topic, 0),
        ("nope", E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    # a classic group's id is not a share group
    OC: Any = APIS[8].request
    T = OC.OffsetCommitRequestTopic
    classic = f"classic-{uuid.uuid4().hex[:6]}"
    committed = wire.send(
        OC(group_id=classic, generation_id_or_member_epoch=-1, member_id="",
           group_instance_id=None, retention_time_ms=-1,
           topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(
               partition_index=0, committed_offset=1, committed_leader_epoch=-1,
               committed_metadata="")])]),
        version=8,
    )  # fmt: skip
    assert committed.topics[0].partitions[0].error_code == 0
    assert describe(wire, classic, None).error_code == E.GROUP_ID_NOT_FOUND
