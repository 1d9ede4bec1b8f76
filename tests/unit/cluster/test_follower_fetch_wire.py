"""KIP-392 over the wire between two real brokers (the test plays the controller): the leader names the
consumer's rack replica, the follower serves v11+ consumer fetches up to its high watermark with the
leader's bytes, refuses older versions and wrong epochs, and counts what it served per partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.cluster.channel import BrokerChannel
from kafkalite.cluster.metadata_cache import BrokerEndpoint, PartitionMetadata, TopicMetadata
from kafkalite.cluster.partition import LeaderAndIsrState
from kafkalite.cluster.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from kafkalite.cluster.replica_selector import RACK_AWARE_SELECTOR
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records import iter_batches
from kafkalite.records.builder import RecordBatchBuilder
from kafkalite.testing import Broker

TOPIC = "nearby"
RACKS = {1: "a", 2: "b"}
F = APIS[1].request


def _batch(*values: bytes) -> bytearray:
    b = RecordBatchBuilder()
    for i, v in enumerate(values):
        b.append(key=None, value=v, timestamp=1_700_000_000_000 + i)
    return bytearray(b.build())


def _wait(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


class Racks:
    """Brokers 1 (rack a, leader) and 2 (rack b, follower) hosting `nearby-0`."""

    def __init__(self, tmp: Path) -> None:
        self.b = {
            i: Broker(
                tmp / f"b{i}",
                config={
                    "broker.id": i,
                    "broker.rack": RACKS[i],
                    "auto.create.topics.enable": False,
                    "replica.selector.class": RACK_AWARE_SELECTOR,
                },
            )
            for i in (1, 2)
        }
        self.fetchers: dict[int, ReplicaFetcherManager] = {}
        self.channels: dict[int, BrokerChannel] = {}  # the follower's, to the leader

    def start(self) -> None:
        for b in self.b.values():
            b.start()
        endpoints = [BrokerEndpoint(i, b.host, b.port, RACKS[i]) for i, b in self.b.items()]
        for i, b in self.b.items():
            b.call(lambda b=b: b.server.metadata_cache.set_brokers(endpoints, 1))
            self.fetchers[i] = b.call(self._make_fetcher, i)

    def _make_fetcher(self, me: int) -> ReplicaFetcherManager:
        def channel_for(leader: int) -> BrokerChannel | None:
            ch = self.channels.get(me)
            if ch is None:
                other = self.b[leader]
                ch = self.channels[me] = BrokerChannel(other.host, other.port)
            return ch

        return ReplicaFetcherManager(
            me,
            self.b[me].server.replica_manager,
            channel_for,
            FetcherConfig(fetch_wait_max_ms=100, backoff_ms=50),
        )

    def lead(self, epoch: int, isr: tuple[int, ...]) -> None:
        state = LeaderAndIsrState(1, epoch, isr, (1, 2), partition_epoch=epoch)
        for i, b in self.b.items():

            def apply(i: int = i, b: Broker = b) -> None:
                rm = b.server.replica_manager
                change = rm.become_leader_or_follower(epoch, {(TOPIC, 0): state}, {TOPIC: None})
                self.fetchers[i].add_fetchers(change.became_follower)
                meta = PartitionMetadata(TOPIC, 0, 1, epoch, (1, 2), isr)
                b.server.metadata_cache.put_topic(TopicMetadata(TOPIC, None, (meta,)))

            b.call(apply)

    def stop(self) -> None:
        for i, b in self.b.items():
            if b.server is not None and i in self.fetchers:
                b.call(self.fetchers[i].shutdown)
                if i in self.channels:
                    b.call(self.channels[i].close)
        for b in self.b.values():
            b.stop()


@pytest.fixture
def racks(tmp_path: Path) -> Iterator[Racks]:
    r = Racks(tmp_path)
    r.start()
    try:
        yield r
    finally:
        r.stop()


def fetch(
    b: Broker,
    offset: int,
    *,
    rack: str = "",
    version: int = 12,
    epoch: int = -1,
    isolation: int = 0,
) -> Any:
    req = F(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            F.FetchTopic(
                topic=TOPIC,
                partitions=[
                    F.FetchTopic.FetchPartition(
                        partition=0,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=epoch,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id=rack,
    )
    with WireClient(b.bootstrap_servers, timeout=10) as c:
        resp = c.send(req, version=version)
    return resp.responses[0].partitions[0]


def list_offsets(b: Broker) -> int:
    L = APIS[2].request
    part = L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)
    req = L(
        replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=TOPIC, partitions=[part])]
    )
    with WireClient(b.bootstrap_servers, timeout=10) as c:
        resp = c.send(req, version=7)
    return int(resp.topics[0].partitions[0].error_code)


def records(part: Any) -> list[tuple[int, bytes]]:
    blob = part.records or b""
    return [(r.offset, bytes(r.value or b"")) for bt in iter_batches(blob) for r in bt.records]


def test_follower_fetching(racks: Racks) -> None:
    leader, follower = racks.b[1], racks.b[2]
    racks.lead(1, (1, 2))
    values = [b"r%d" % i for i in range(12)]
    leader.call(
        lambda: leader.server.replica_manager.append_to_leader(TOPIC, 0, _batch(*values[:8]), 1)
    )
    leader.call(
        lambda: leader.server.replica_manager.append_to_leader(TOPIC, 0, _batch(*values[8:]), 1)
    )
    flog = follower.server.get_log(TOPIC, 0)
    assert flog is not None
    _wait(lambda: flog.high_watermark == 12)  # the follower learnt the HW from its fetches

    # the leader sends a consumer of rack b to broker 2, without records; rack a stays
    redirect = fetch(leader, 0, rack="b", epoch=1)
    assert (redirect.error_code, redirect.preferred_read_replica) == (0, 2)
    # records empty, not null, as Kafka sends them (librdkafka cannot skip a null set)
    assert redirect.high_watermark == 12 and redirect.records == b""
    at_leader = fetch(leader, 0, rack="a")
    assert at_leader.preferred_read_replica == -1
    # the follower serves exactly the leader's records, offset by offset
    at_follower = fetch(follower, 0, rack="b", epoch=1)
    assert at_follower.error_code == 0 and at_follower.preferred_read_replica == -1
    assert records(at_follower) == records(at_leader) == list(enumerate(values))
    assert at_follower.high_watermark == 12
    assert records(fetch(follower, 8, rack="b")) == list(enumerate(values))[8:]
    committed = fetch(follower, 0, isolation=1)  # read_committed: up to the follower's LSO
    assert committed.last_stable_offset == 12 and records(committed) == list(enumerate(values))
    # at its high watermark: nothing yet; beyond its log end: out of range (the client goes back)
    at_hw = fetch(follower, 12)
    assert records(at_hw) == [] and at_hw.error_code == 0
    assert fetch(follower, 13).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # before v11 consumers read from the leader only; epochs are checked as on the leader
    assert fetch(follower, 0, version=10).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(follower, 0, epoch=0).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(follower, 0, epoch=5).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert list_offsets(follower) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # ListOffsets: the leader's
    assert list_offsets(leader) == ErrorCode.NO_ERROR
    # per-partition counts: what each broker read for consumers, and the leader's redirects
    fstats = follower.call(lambda: dict(follower.server.stats.consumer_fetches))
    lstats = leader.call(lambda: dict(leader.server.stats.preferred_replica_redirects))
    assert fstats[(TOPIC, 0)] == 5  # three reads, the empty one at the HW, the out of range one
    assert lstats == {(TOPIC, 0): 1}
    # broker 2 leaves the ISR: the leader keeps its rack-b consumers
    racks.lead(2, (1,))
    again = fetch(leader, 0, rack="b", epoch=2)
    assert again.preferred_read_replica == -1 and records(again) == list(enumerate(values))
