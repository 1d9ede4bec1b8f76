"""The fetch filter on ShareFetch (issue 35) over the wire: a member sending tag 10035 gets only matching
records (in valid batches, AcquiredRecords covering only them), the rest is archived and reaches no other
member, a bad expression gets INVALID_REQUEST naming the fault, and librdkafka's ShareConsumer, which never
sends the tag, reads every record of the same topic in its own group.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from share_support import ACCEPT, consumer, poll_until

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_groups import ShareFetchRequest, ShareFetchResponse
from kafkalite.protocol.schema import APIS
from kafkalite.records import iter_batches
from kafkalite.records.builder import build_batch
from kafkalite.testing import Broker

pytestmark = pytest.mark.compat

HB = APIS[76].request
N = 60  # records k0..k59 in 6 batches of 10, the even batches lz4-compressed
EXPR = "key IN ('k3', 'k4', 'k17', 'k40', 'k41', 'k59') OR headers.tag = 'x'"
WANT = {3, 4, 17, 40, 41, 59} | {i for i in range(N) if i % 13 == 0}  # tag 'x' on every 13th
CONFIG = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "1000",
    "offsets.topic.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(Path(tmp_path_factory.mktemp("sharefilter")), config=CONFIG) as b:
        yield b


@pytest.fixture
def wire(share_broker: Broker) -> Iterator[WireClient]:
    with WireClient(share_broker.bootstrap_servers, timeout=15) as c:
        yield c


def _setup(b: Broker, c: WireClient, *groups: str) -> tuple[str, uuid.UUID, int]:
    """A topic of N records (the bytes of its batches too), `groups` reading from the earliest."""
    topic = f"shf-{uuid.uuid4().hex[:8]}"
    b.create_topic(topic, 1)
    for group in groups:
        _earliest(c, group)
    P = APIS[0].request
    T = P.TopicProduceData
    size = 0
    for first in range(0, N, 10):
        recs = [
            (f"k{i}".encode(), f"v{i}".encode(), [("tag", b"x" if i % 13 == 0 else b"y")], 1000 + i)
            for i in range(first, first + 10)
        ]
        blob = build_batch(recs, compression=3 if first % 20 == 0 else 0)
        size += len(blob)
        r = c.send(
            P(transactional_id=None, acks=-1, timeout_ms=10000,
              topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=blob)])]),
            version=9,
        )  # fmt: skip
        assert r.responses[0].partition_responses[0].error_code == 0
    return topic, c.metadata([topic]).topics[0].topic_id, size


def _earliest(c: WireClient, group: str) -> None:
    R = APIS[44].request
    Cfg = R.AlterConfigsResource.AlterableConfig
    r = c.send(
        R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group,
            configs=[Cfg(name="share.auto.offset.reset", config_operation=0, value="earliest")])],
          validate_only=False),
        version=1,
    )  # fmt: skip
    assert r.responses[0].error_code == 0


def _join(c: WireClient, group: str, topic: str) -> str:
    r = c.send(
        HB(group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
           subscribed_topic_names=[topic]),
        version=1,
    )  # fmt: skip
    assert r.error_code == 0, r
    return str(r.member_id)


def _fetch(
    c: WireClient, group: str, member: str, epoch: int, tid: uuid.UUID, flt: str | None,
    acks: Sequence[tuple[int, int]] = (), max_records: int = 500, wait_ms: int = 300,
) -> ShareFetchResponse:  # fmt: skip
    T = ShareFetchRequest.FetchTopic
    B = T.FetchPartition.AcknowledgementBatch
    part = T.FetchPartition(
        partition_index=0,
        acknowledgement_batches=[
            B(first_offset=a, last_offset=z, acknowledge_types=[int(ACCEPT)]) for a, z in acks
        ],
    )
    r: ShareFetchResponse = c.send(
        ShareFetchRequest(
            group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms,
            min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
            share_acquire_mode=0, is_renew_ack=False,
            topics=[T(topic_id=tid, partitions=[part])], forgotten_topics_data=[], filter=flt,
        ),
        version=2,
    )  # fmt: skip
    return r


def _delivered(r: ShareFetchResponse) -> tuple[list[tuple[int, int]], dict[int, bytes | None]]:
    """(acquired ranges, the acquired records by offset) of the one partition, CRCs checked."""
    p = r.responses[0].partitions[0] if r.responses else None
    if p is None:
        return [], {}
    ranges = [(a.first_offset, a.last_offset) for a in p.acquired_records]
    recs = {
        rec.offset: rec.key
        for b in iter_batches(p.records or b"", verify_crc=True)
        for rec in b
        if any(lo <= rec.offset <= hi for lo, hi in ranges)
    }
    return ranges, recs


def test_only_matching_records_come_back_and_the_rest_is_archived(
    share_broker: Broker, wire: WireClient
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    topic, tid, size = _setup(share_broker, wire, group)
    counters = share_broker.server.stats.fetch_filter
    scanned = counters.bytes_scanned
    a = _join(wire, group, topic)
    got: dict[int, bytes | None] = {}
    acks: list[tuple[int, int]] = []
    epoch = 0
    deadline = time.monotonic() + 20
    while set(got) != WANT:
        assert time.monotonic() < deadline, f"got {sorted(got)}"
        r = _fetch(wire, group, a, epoch, tid, EXPR, acks=acks, max_records=7)
        epoch += 1
        assert r.error_code == 0, r.error_message
        assert r.filtered
        ranges, recs = _delivered(r)
        # the acquired ranges cover delivered records only
        assert sum(hi - lo + 1 for lo, hi in ranges) == len(recs)
        assert all(key == f"k{o}".encode() for o, key in recs.items())
        assert not set(recs) & set(got), "a record came twice"
        got.update(recs)
        acks = ranges
    assert set(got) == WANT
    # each batch was acquired and filtered once: no non-matching record came back to be filtered again
    assert counters.bytes_scanned - scanned == size
    r = _fetch(wire, group, a, epoch, tid, EXPR, acks=acks)
    assert r.error_code == 0 and r.responses[0].partitions[0].acknowledge_error_code == 0
    # nothing is left for anyone: the non-matching records were archived, not released
    b = _join(wire, group, topic)
    rb = _fetch(wire, group, b, 0, tid, None, wait_ms=200)
    assert _delivered(rb) == ([], {})
    assert not rb.filtered  # an unfiltered fetch does not claim it


@pytest.mark.parametrize(
    ("expr", "fault"),
    [("key = ", "expected a literal"), ("key > 3", "key is a string"),
     ("partition = 1", "unknown field 'partition'")],
)  # fmt: skip
def test_bad_filters_get_invalid_request(
    share_broker: Broker, wire: WireClient, expr: str, fault: str
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    topic, tid, _ = _setup(share_broker, wire, group)
    a = _join(wire, group, topic)
    r = _fetch(wire, group, a, 0, tid, expr)
    assert r.error_code == ErrorCode.INVALID_REQUEST
    assert r.error_message is not None and fault in r.error_message
    assert r.filter_error == r.error_message
    # refused before the session opened: the same member can still open one and read everything
    ok = _fetch(wire, group, a, 0, tid, None, max_records=N)
    assert ok.error_code == 0 and len(_delivered(ok)[1]) == N


def test_librdkafka_share_consumer_reads_everything_beside_a_filtered_group(
    share_broker: Broker, wire: WireClient
) -> None:
    filtered, plain = f"g-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    topic, tid, _ = _setup(share_broker, wire, filtered, plain)
    a = _join(wire, filtered, topic)
    r = _fetch(wire, filtered, a, 0, tid, EXPR, max_records=N)
    assert r.filtered and set(_delivered(r)[1]) <= WANT
    seen: list[int] = []

    def handle(m: Any) -> None:
        seen.append(m.offset())
        c.acknowledge(m, ACCEPT)

    c = consumer(share_broker.bootstrap_servers, plain)
    c.subscribe([topic])
    try:
        poll_until(c, handle, lambda: len(seen) >= N)
    finally:
        c.close()
    assert sorted(seen) == list(range(N))
