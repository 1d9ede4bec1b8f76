"""KIP-932 over the wire against an embedded broker: ShareGroupHeartbeat join/fence/leave, share
sessions (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH), acquisition with delivery counts,
INVALID_RECORD_STATE for records a member does not hold, release and redelivery, lock expiry, the
dead-letter topic, ShareGroupDescribe and ListGroups with type share, and state surviving a restart.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records import iter_batches
from kafkalite.testing import Broker

E = ErrorCode
HB = APIS[76].request
DESCRIBE = APIS[77].request
FETCH = APIS[78].request
ACK = APIS[79].request
LIST = APIS[16].request

CONFIG = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "2",
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": "3",
}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("share"), config=CONFIG) as b:
        yield b


@pytest.fixture
def wire(share_broker: Broker) -> Iterator[WireClient]:
    with WireClient(share_broker.bootstrap_servers, timeout=15) as c:
        yield c


def _produce(c: WireClient, topic: str, n: int) -> None:
    from kafkalite.records.builder import build_batch

    P = APIS[0].request
    blob = build_batch([(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)])
    T = P.TopicProduceData
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


def _topic_id(c: WireClient, topic: str) -> uuid.UUID:
    md = c.metadata([topic])
    return md.topics[0].topic_id


def join(c: WireClient, group: str, topic: str) -> Any:
    r = c.send(
        HB(group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
           subscribed_topic_names=[topic]),
        version=1,
    )  # fmt: skip
    assert r.error_code == 0, r
    return r


def fetch(
    c: WireClient, group: str, member: str, epoch: int, tid: uuid.UUID, *, acks: Any = (),
    max_records: int = 100, wait_ms: int = 500, topics: bool = True, version: int = 2,
    mode: int = 1,
) -> Any:  # fmt: skip
    """A ShareFetch; by default v2 with ShareAcquireMode 1 (RECORD_LIMIT), so that MaxRecords is a
    strict limit (the tests produce all their records in one batch)."""
    T = FETCH.FetchTopic
    parts = [
        T.FetchPartition(
            partition_index=0,
            acknowledgement_batches=[
                T.FetchPartition.AcknowledgementBatch(
                    first_offset=a, last_offset=b, acknowledge_types=[t]
                )
                for a, b, t in acks
            ],
        )
    ]
    return c.send(
        FETCH(
            group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms,
            min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
            share_acquire_mode=mode, is_renew_ack=False,
            topics=[T(topic_id=tid, partitions=parts)] if topics else [],
            forgotten_topics_data=[],
        ),
        version=version,
    )  # fmt: skip


def ack(
    c: WireClient, group: str, member: str, epoch: int, tid: uuid.UUID, acks: Any,
    version: int = 1, renew: bool = False,
) -> Any:  # fmt: skip
    T = ACK.AcknowledgeTopic
    return c.send(
        ACK(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            is_renew_ack=renew,
            topics=[
                T(
                    topic_id=tid,
                    partitions=[
                        T.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=[
                                T.AcknowledgePartition.AcknowledgementBatch(
                                    first_offset=a, last_offset=b, acknowledge_types=[t]
                                )
                                for a, b, t in acks
                            ],
                        )
                    ],
                )
            ],
        ),
        version=version,
    )


def acquired(r: Any) -> list[tuple[int, int, int]]:
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in r.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def part_of(r: Any) -> Any:
    return r.responses[0].partitions[0]


def setup_group(b: Broker, c: WireClient, n: int = 10, **group_configs: str) -> Any:
    topic = f"sh-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    b.create_topic(topic, 1)
    if group_configs:
        _alter_group(c, group, {"share.auto.offset.reset": "earliest", **group_configs})
    else:
        _alter_group(c, group, {"share.auto.offset.reset": "earliest"})
    _produce(c, topic, n)
    return topic, group, _topic_id(c, topic)


def _alter_group(c: WireClient, group: str, configs: dict[str, str]) -> None:
    R = APIS[44].request
    r = c.send(
        R(
            resources=[
                R.AlterConfigsResource(
                    resource_type=32,
                    resource_name=group,
                    configs=[
                        R.AlterConfigsResource.AlterableConfig(name=k, config_operation=0, value=v)
                        for k, v in configs.items()
                    ],
                )
            ],
            validate_only=False,
        ),
        version=1,
    )
    assert r.responses[0].error_code == 0, r.responses[0].error_message


def test_heartbeat_join_fence_and_leave(share_broker: Broker, wire: WireClient) -> None:
    topic, group, tid = setup_group(share_broker, wire)
    r = join(wire, group, topic)
    assert r.member_epoch >= 1
    assert [(t.topic_id, t.partitions) for t in r.assignment.topic_partitions] == [(tid, [0])]
    member = r.member_id
    bad = wire.send(
        HB(group_id=group, member_id=member, member_epoch=r.member_epoch + 5, rack_id=None,
           subscribed_topic_names=None),
        version=1,
    )  # fmt: skip
    assert bad.error_code == E.FENCED_MEMBER_EPOCH
    unknown = wire.send(
        HB(group_id=group, member_id="nobody", member_epoch=3, rack_id=None,
           subscribed_topic_names=None),
        version=1,
    )  # fmt: skip
    assert unknown.error_code == E.UNKNOWN_MEMBER_ID
    # a second member shares the single partition
    r2 = join(wire, group, topic)
    assert [(t.topic_id, t.partitions) for t in r2.assignment.topic_partitions] == [(tid, [0])]
    d = wire.send(DESCRIBE(group_ids=[group], include_authorized_operations=False), version=1)
    g = d.groups[0]
    assert g.error_code == 0 and g.group_state == "Stable"
    assert sorted(m.member_id for m in g.members) == sorted([member, r2.member_id])
    listed = wire.send(LIST(states_filter=[], types_filter=["share"]), version=5)
    assert group in [x.group_id for x in listed.groups]
    assert {x.group_type for x in listed.groups} == {"share"}
    left = wire.send(
        HB(group_id=group, member_id=member, member_epoch=-1, rack_id=None,
           subscribed_topic_names=None),
        version=1,
    )  # fmt: skip
    assert left.error_code == 0 and left.member_epoch == -1


def test_sessions_acquire_and_acknowledge(share_broker: Broker, wire: WireClient) -> None:
    topic, group, tid = setup_group(share_broker, wire, 10)
    a = join(wire, group, topic).member_id
    b = join(wire, group, topic).member_id
    # no session yet
    r = fetch(wire, group, a, 3, tid)
    assert r.error_code == E.SHARE_SESSION_NOT_FOUND
    # open: A acquires 4 records
    r = fetch(wire, group, a, 0, tid, max_records=4)
    assert r.error_code == 0, r
    assert acquired(r) == [(0, 3, 1)]
    batches = list(iter_batches(part_of(r).records))
    assert [rec.offset for bt in batches for rec in bt.records][:4] == [0, 1, 2, 3]
    # B gets the next ones, never A's
    rb = fetch(wire, group, b, 0, tid, max_records=100)
    assert acquired(rb) == [(4, 9, 1)]
    # a wrong epoch changes nothing
    assert fetch(wire, group, a, 5, tid).error_code == E.INVALID_SHARE_SESSION_EPOCH
    # B may not acknowledge A's records
    rb2 = ack(wire, group, b, 1, tid, [(0, 1, 1)])
    assert rb2.error_code == 0
    assert part_of(rb2).error_code == E.INVALID_RECORD_STATE
    # A accepts 0-1 and releases 2-3 in its next fetch; the released come back to A at count 2
    r = fetch(wire, group, a, 1, tid, acks=[(0, 1, 1), (2, 3, 2)], max_records=10)
    assert part_of(r).acknowledge_error_code == 0
    assert acquired(r) == [(2, 3, 2)]
    # acknowledging an already acknowledged record
    r = ack(wire, group, a, 2, tid, [(0, 0, 1)])
    assert part_of(r).error_code == E.INVALID_RECORD_STATE
    # ShareAcknowledge cannot open a session
    assert ack(wire, group, a, 0, tid, [(2, 2, 1)]).error_code == E.INVALID_SHARE_SESSION_EPOCH
    # closing B's session releases what it holds
    rb3 = ack(wire, group, b, -1, tid, [(4, 4, 1)])
    assert rb3.error_code == 0 and part_of(rb3).error_code == 0
    r = fetch(wire, group, a, 3, tid, acks=[(2, 3, 1)], max_records=10)
    assert acquired(r) == [(5, 9, 2)]


def test_lock_expiry_redelivers(share_broker: Broker, wire: WireClient) -> None:
    topic, group, tid = setup_group(share_broker, wire, 3)
    a = join(wire, group, topic).member_id
    b = join(wire, group, topic).member_id
    assert acquired(fetch(wire, group, a, 0, tid)) == [(0, 2, 1)]
    time.sleep(0.3)
    rb = fetch(wire, group, b, 0, tid, wait_ms=3000)  # the lock (1 s) runs out meanwhile
    assert acquired(rb) == [(0, 2, 2)]


def test_dead_letter_topic(share_broker: Broker, wire: WireClient) -> None:
    dlq = f"dlq-{uuid.uuid4().hex[:6]}"
    topic, group, tid = setup_group(
        share_broker, wire, 3, **{"errors.deadletterqueue.topic.name": dlq}
    )
    a = join(wire, group, topic).member_id
    assert acquired(fetch(wire, group, a, 0, tid)) == [(0, 2, 1)]
    # reject 0, release 1 (its second delivery will be its last), accept 2
    r = fetch(wire, group, a, 1, tid, acks=[(0, 0, 3), (1, 1, 2), (2, 2, 1)])
    assert acquired(r) == [(1, 1, 2)]
    r = ack(wire, group, a, 2, tid, [(1, 1, 2)])  # released at the limit: archived
    assert part_of(r).error_code == 0
    got = _read_dlq(wire, dlq, 2)
    assert [(h["__dlq.errors.offset"], h["__dlq.errors.reason"]) for _, h in got] == [
        (b"0", b"REJECTED"),
        (b"1", b"DELIVERY_COUNT_EXCEEDED"),
    ]
    assert got[0][0] == b"v0" and got[1][1]["__dlq.errors.delivery.count"] == b"2"
    assert got[0][1]["__dlq.errors.topic"] == topic.encode()
    # nothing is left to deliver
    assert acquired(fetch(wire, group, a, 3, tid, wait_ms=100)) == []


def _read_dlq(c: WireClient, dlq: str, n: int) -> list[tuple[bytes | None, dict[str, bytes]]]:
    F = APIS[1].request
    deadline = time.monotonic() + 10
    while True:
        r = c.send(
            F(
                replica_id=-1, max_wait_ms=200, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                topics=[F.FetchTopic(topic=dlq, partitions=[F.FetchTopic.FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
            ),
            version=4,
        )  # fmt: skip
        blob = r.responses[0].partitions[0].records or b""
        out = [
            (rec.value, {k: v for k, v in rec.headers})
            for bt in iter_batches(blob)
            for rec in bt.records
        ]
        if len(out) >= n or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def test_max_records_is_a_soft_limit_unless_record_limit_is_asked(
    share_broker: Broker, wire: WireClient
) -> None:
    """KIP-1206: ShareAcquireMode 0 (batch-optimized, and every ShareFetch before v2) acquires the
    last batch begun to its end; 1 (record-limit) stops at MaxRecords."""
    topic, group, tid = setup_group(share_broker, wire, 10)  # one batch of 10
    a = join(wire, group, topic).member_id
    b = join(wire, group, topic).member_id
    c = join(wire, group, topic).member_id
    assert acquired(fetch(wire, group, a, 0, tid, max_records=3)) == [(0, 2, 1)]
    # the rest of the batch, past MaxRecords
    assert acquired(fetch(wire, group, b, 0, tid, max_records=2, mode=0)) == [(3, 9, 1)]
    r = fetch(wire, group, a, 1, tid, acks=[(0, 2, 2)], max_records=1)  # A releases 0-2
    assert part_of(r).acknowledge_error_code == 0
    assert acquired(r) == [(0, 0, 2)]
    # v1: batch-optimized; what others hold is skipped, the available rest taken
    assert acquired(fetch(wire, group, c, 0, tid, max_records=1, version=1, mode=0)) == [(1, 2, 2)]


def test_a_waiting_share_fetch_goes_before_the_member_that_frees_records(
    share_broker: Broker, wire: WireClient
) -> None:
    """A member that releases records and fetches in the same ShareFetch does not take them back
    while another member's ShareFetch waits for records: the waiting one gets them."""
    topic, group, tid = setup_group(share_broker, wire, 10)
    a = join(wire, group, topic).member_id
    b = join(wire, group, topic).member_id
    assert acquired(fetch(wire, group, a, 0, tid, max_records=10)) == [(0, 9, 1)]
    parked = share_broker.server.share_partitions.parked
    got: list[Any] = []
    with WireClient(share_broker.bootstrap_servers, timeout=15) as other:
        waiter = threading.Thread(
            target=lambda: got.append(fetch(other, group, b, 0, tid, max_records=10, wait_ms=10000))
        )
        waiter.start()
        deadline = time.monotonic() + 10
        while not parked and time.monotonic() < deadline:  # B's fetch waits for records
            time.sleep(0.01)
        assert parked
        r = fetch(wire, group, a, 1, tid, acks=[(0, 9, 2)], max_records=10, wait_ms=0)
        waiter.join(15)
    assert part_of(r).acknowledge_error_code == 0
    assert acquired(r) == []
    assert len(got) == 1 and acquired(got[0]) == [(0, 9, 2)]


def test_state_survives_a_restart(tmp_path: Path) -> None:
    with Broker(tmp_path / "d", config=CONFIG) as b:
        with WireClient(b.bootstrap_servers, timeout=15) as c:
            topic, group, tid = setup_group(b, c, 6)
            a = join(c, group, topic).member_id
            assert acquired(fetch(c, group, a, 0, tid, max_records=4)) == [(0, 3, 1)]
            r = ack(c, group, a, 1, tid, [(0, 1, 1)])  # 0-1 accepted; 2-3 still held
            assert part_of(r).error_code == 0
        port = b.port
    with (
        Broker(tmp_path / "d", config=CONFIG, port=port) as b,
        WireClient(b.bootstrap_servers, timeout=15) as c,
    ):
        a = join(c, group, topic).member_id
        r = fetch(c, group, a, 0, tid, max_records=100)
        # accepted records stay done; held ones are available again (count kept), then the rest
        assert acquired(r) == [(2, 3, 2), (4, 5, 1)]


def test_records_deleted_below_the_start_are_forgotten(
    share_broker: Broker, wire: WireClient
) -> None:
    topic, group, tid = setup_group(share_broker, wire, 10)
    a = join(wire, group, topic).member_id
    b = join(wire, group, topic).member_id
    assert acquired(fetch(wire, group, a, 0, tid, max_records=5)) == [(0, 4, 1)]
    D = APIS[21].request
    r = wire.send(
        D(
            topics=[D.DeleteRecordsTopic(name=topic, partitions=[
                D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=7)])],
            timeout_ms=5000,
        ),
        version=1,
    )  # fmt: skip
    assert r.topics[0].partitions[0].error_code == 0
    assert acquired(fetch(wire, group, b, 0, tid)) == [(7, 9, 1)]
    # A's records are gone: acknowledging them is refused, nothing is redelivered
    assert part_of(ack(wire, group, a, 1, tid, [(0, 4, 1)])).error_code == E.INVALID_RECORD_STATE


def test_describe_offsets_reports_lag_and_in_flight(share_broker: Broker, wire: WireClient) -> None:
    topic, group, tid = setup_group(share_broker, wire, 10)
    a = join(wire, group, topic).member_id
    assert acquired(fetch(wire, group, a, 0, tid, max_records=4)) == [(0, 3, 1)]
    assert part_of(ack(wire, group, a, 1, tid, [(0, 1, 1), (3, 3, 1)])).error_code == 0
    R = APIS[90].request
    G = R.DescribeShareGroupOffsetsRequestGroup
    req = R(groups=[G(group_id=group, topics=[G.DescribeShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[0])])])  # fmt: skip
    p = wire.send(req, version=1).groups[0].topics[0].partitions[0]
    # start 2 (0-1 done); 2 is still held, 3 acknowledged past the start: lag 10 - 2 - 1
    assert (p.start_offset, p.lag, p.in_flight_records) == (2, 7, 1)
    old = wire.send(req, version=0).groups[0].topics[0].partitions[0]
    assert (old.start_offset, old.lag) == (2, -1)  # v0 has no lag; the tagged count still comes


def test_renew_keeps_records_locked(share_broker: Broker, wire: WireClient) -> None:
    topic, group, tid = setup_group(share_broker, wire, 2)
    a = join(wire, group, topic).member_id
    b = join(wire, group, topic).member_id
    assert acquired(fetch(wire, group, a, 0, tid)) == [(0, 1, 1)]
    # v1 has no RENEW
    assert part_of(ack(wire, group, a, 1, tid, [(0, 1, 4)])).error_code == E.INVALID_REQUEST
    time.sleep(0.6)
    r = ack(wire, group, a, 2, tid, [(0, 1, 4)], version=2, renew=True)
    assert r.error_code == 0 and part_of(r).error_code == 0
    assert r.acquisition_lock_timeout_ms == 1000
    time.sleep(0.6)  # past the first lock (1 s), inside the renewed one
    assert acquired(fetch(wire, group, b, 0, tid, wait_ms=0)) == []
    assert part_of(ack(wire, group, a, 3, tid, [(0, 1, 1)])).error_code == 0


def test_idle_share_sessions_are_forgotten() -> None:
    from kafkalite.broker.coordinators.share_sessions import ShareSessionCache

    cache = ShareSessionCache()
    s = cache.open("g", "m")
    assert cache.expire(s.last_used_ms + 1000, 5000) == []
    assert cache.existing("g", "m", 1)[0] is s
    assert cache.expire(s.last_used_ms + 5001, 5000) == [s]
    assert cache.existing("g", "m", 2)[1] == E.SHARE_SESSION_NOT_FOUND
