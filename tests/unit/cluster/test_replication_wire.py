"""Leader/follower replication between two real brokers over the wire, with the test playing the
controller: acks=all waits for the follower, the high watermark follows the ISR, and a follower whose
log diverged truncates to the divergence point (KIP-101/279) before copying the new leader's batches.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.client import KafkaProducer
from kafkalite.cluster.channel import BrokerChannel
from kafkalite.cluster.metadata_cache import PartitionMetadata, TopicMetadata
from kafkalite.cluster.partition import LeaderAndIsrState
from kafkalite.cluster.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from kafkalite.records import iter_batches
from kafkalite.records.builder import RecordBatchBuilder
from kafkalite.testing import Broker

TOPIC = "replicated"
TOPIC_ID = uuid.UUID(int=7)


def _batch(*values: bytes) -> bytearray:
    b = RecordBatchBuilder()
    for i, v in enumerate(values):
        b.append(key=None, value=v, timestamp=1_700_000_000_000 + i)
    return bytearray(b.build())


def _values(broker: Broker) -> list[tuple[int, bytes]]:
    lg = broker.server.get_log(TOPIC, 0)
    assert lg is not None
    info = lg.read(0, 1 << 24, max_offset=lg.log_end_offset)
    if info.slice is None:
        return []
    return [
        (r.offset, bytes(r.value or b""))
        for b in iter_batches(info.slice.read_bytes())
        for r in b.records
    ]


def _wait(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


class Pair:
    """Brokers 1 and 2 hosting `replicated-0`; the test says who leads (LeaderAndIsr by hand)."""

    def __init__(self, tmp: Path) -> None:
        props = {"broker.id": 1, "auto.create.topics.enable": False}
        self.b = {
            1: Broker(tmp / "b1", **props),
            2: Broker(tmp / "b2", **{**props, "broker.id": 2}),
        }
        self.fetchers: dict[int, ReplicaFetcherManager] = {}
        self.channels: dict[int, dict[int, BrokerChannel]] = {1: {}, 2: {}}

    def start(self) -> None:
        for b in self.b.values():
            b.start()
        for i, b in self.b.items():
            self.fetchers[i] = b.call(self._make_fetcher, i)

    def _make_fetcher(self, me: int) -> ReplicaFetcherManager:
        def channel_for(leader: int) -> BrokerChannel | None:
            ch = self.channels[me].get(leader)
            if ch is None:
                other = self.b[leader]
                ch = self.channels[me][leader] = BrokerChannel(other.host, other.port)
            return ch

        server = self.b[me].server
        return ReplicaFetcherManager(
            me,
            server.replica_manager,
            channel_for,
            FetcherConfig(fetch_wait_max_ms=100, backoff_ms=50),
        )

    def lead(self, leader: int, epoch: int, isr: tuple[int, ...]) -> None:
        """What the controller's LeaderAndIsr does on both brokers."""
        state = LeaderAndIsrState(leader, epoch, isr, (1, 2), partition_epoch=epoch)
        for i, b in self.b.items():

            def apply(i: int = i, b: Broker = b) -> None:
                rm = b.server.replica_manager
                change = rm.become_leader_or_follower(epoch, {(TOPIC, 0): state}, {TOPIC: None})
                self.fetchers[i].remove_fetchers([p.key for p in change.became_leader])
                self.fetchers[i].add_fetchers(change.became_follower)
                # what the controller's UpdateMetadata would say
                b.server.metadata_cache.put_topic(
                    TopicMetadata(
                        TOPIC,
                        TOPIC_ID,
                        (PartitionMetadata(TOPIC, 0, leader, epoch, (1, 2), isr),),
                    )
                )

            b.call(apply)

    def stop(self) -> None:
        for i, b in self.b.items():
            if b.server is not None and i in self.fetchers:
                b.call(self.fetchers[i].shutdown)
                for ch in self.channels[i].values():
                    b.call(ch.close)
            b.stop()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    p = Pair(tmp_path)
    p.start()
    try:
        yield p
    finally:
        p.stop()


def test_acks_all_completes_once_the_follower_has_the_batch(pair: Pair) -> None:
    pair.lead(1, 1, (1, 2))
    with KafkaProducer(bootstrap_servers=pair.b[1].bootstrap_servers, acks="all") as p:
        md = [p.send(TOPIC, f"r{i}".encode(), partition=0).get(timeout=20) for i in range(20)]
    assert [m.offset for m in md] == list(range(20))
    leader = pair.b[1].server.get_log(TOPIC, 0)
    assert leader is not None and leader.high_watermark == 20
    _wait(lambda: _values(pair.b[2]) == _values(pair.b[1]))


def test_a_diverged_follower_truncates_to_the_new_leaders_log(pair: Pair) -> None:
    """Broker 1 leads epoch 1 and both copy r0..r4; broker 1 then appends r5, r6 that broker 2 never
    gets. Broker 2 becomes leader at epoch 2 and takes x5..x7. When broker 1 follows again it must
    drop r5, r6 (offsets 5-6 of epoch 1) and copy x5..x7 — the logs end identical."""
    pair.lead(1, 1, (1, 2))
    with KafkaProducer(bootstrap_servers=pair.b[1].bootstrap_servers, acks="all") as p:
        for i in range(5):
            p.send(TOPIC, f"r{i}".encode(), partition=0).get(timeout=20)
    _wait(lambda: len(_values(pair.b[2])) == 5)
    # broker 2 stops following; broker 1 appends alone (acks=1)
    pair.b[2].call(lambda: pair.fetchers[2].remove_fetchers([(TOPIC, 0)]))
    lg1 = pair.b[1].server.get_log(TOPIC, 0)
    assert lg1 is not None
    pair.b[1].call(
        lambda: pair.b[1].server.replica_manager.append_to_leader(TOPIC, 0, _batch(b"r5", b"r6"), 1)
    )
    assert lg1.log_end_offset == 7
    # the controller elects broker 2 (in the ISR, with offsets 0-4) at epoch 2
    pair.lead(2, 2, (2,))
    with KafkaProducer(bootstrap_servers=pair.b[2].bootstrap_servers, acks="1") as p:
        for v in (b"x5", b"x6", b"x7"):
            p.send(TOPIC, v, partition=0).get(timeout=20)
    _wait(lambda: _values(pair.b[1]) == _values(pair.b[2]), timeout=15)
    got = _values(pair.b[1])
    assert got == [(i, f"r{i}".encode()) for i in range(5)] + [
        (5, b"x5"),
        (6, b"x6"),
        (7, b"x7"),
    ]
    epochs = pair.b[1].call(lambda: lg1.leader_epoch_cache.entries())
    assert [e[0] for e in epochs] == [1, 2]
