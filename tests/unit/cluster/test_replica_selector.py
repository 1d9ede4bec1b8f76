"""KIP-392 replica selection as pure decisions: the rack-aware selector over replicas, racks, the ISR
and liveness, the leader's preferred read replica from a real Partition, and the config's class names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.cluster.partition import LeaderAndIsrState, Partition
from kafkalite.cluster.replica_selector import (
    LEADER_SELECTOR,
    NO_PREFERRED_REPLICA,
    RACK_AWARE_SELECTOR,
    ReplicaView,
    candidates,
    parse_selector,
    preferred_read_replica,
    select,
)
from kafkalite.records.builder import RecordBatchBuilder
from kafkalite.storage import Log, LogConfig

RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}


def view(b: int, leo: int = 100, behind_ms: int = 0) -> ReplicaView:
    return ReplicaView(b, RACKS.get(b), leo, behind_ms)


def chosen(
    client_rack: str | None,
    leader: int = 1,
    followers: tuple[int, ...] = (2, 3),
    isr: tuple[int, ...] = (1, 2, 3),
    alive: tuple[int, ...] = (1, 2, 3, 4),
    selector: str | None = RACK_AWARE_SELECTOR,
    fetch_offset: int = 50,
    leos: dict[int, int] | None = None,
) -> int:
    lead = view(leader)
    pool = candidates(
        lead,
        [view(b, (leos or {}).get(b, 100)) for b in followers],
        isr,
        lambda b: b in alive,
        fetch_offset,
    )
    return select(selector, client_rack, lead, pool).broker_id


def test_a_consumer_goes_to_the_in_sync_replica_of_its_rack() -> None:
    assert chosen("b") == 2
    assert chosen("c") == 3


def test_the_leader_when_it_shares_the_rack_or_no_replica_does() -> None:
    assert chosen("a") == 1  # the leader is in rack a: preferred over anything
    assert chosen("z") == 1  # nobody in rack z
    assert chosen(None) == 1 and chosen("") == 1  # no client.rack


def test_only_alive_in_sync_replicas_that_hold_the_offset() -> None:
    assert chosen("b", isr=(1, 3)) == 1  # 2 dropped out of the ISR: back to the leader
    assert chosen("b", alive=(1, 3)) == 1  # 2 is not registered (dead)
    assert chosen("b", fetch_offset=120) == 1  # 2 does not have offset 120 yet
    assert chosen("b", fetch_offset=100) == 2  # ...but it has everything below its log end
    lead = view(1)
    trimmed = ReplicaView(2, "b", 100, 0, log_start_offset=60)
    assert candidates(lead, [trimmed], (1, 2), lambda b: True, 50) == [lead]  # deleted below 60
    assert candidates(lead, [trimmed], (1, 2), lambda b: True, 60) == [lead, trimmed]


def test_the_most_caught_up_replica_of_the_rack_wins() -> None:
    # brokers 2 and 4 are both in rack b: the larger log end wins, then the fresher catch-up
    assert chosen("b", followers=(2, 3, 4), isr=(1, 2, 3, 4), leos={2: 90, 4: 95}) == 4
    lead = view(1)
    pool = [lead, view(2, 100, behind_ms=500), view(4, 100, behind_ms=10)]
    assert select(RACK_AWARE_SELECTOR, "b", lead, pool).broker_id == 4


def test_the_leader_selector_and_no_selector_always_answer_the_leader() -> None:
    assert chosen("b", selector=LEADER_SELECTOR) == 1
    assert chosen("b", selector=None) == 1


def test_selector_class_names() -> None:
    assert parse_selector(None) is None and parse_selector("") is None
    assert parse_selector(RACK_AWARE_SELECTOR) == RACK_AWARE_SELECTOR
    assert parse_selector(f" {LEADER_SELECTOR} ") == LEADER_SELECTOR
    with pytest.raises(ValueError, match=r"replica\.selector\.class=com\.example\.Nearest"):
        parse_selector("com.example.Nearest")


def _batch(n: int) -> bytearray:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(key=None, value=b"v%d" % i, timestamp=1_700_000_000_000 + i)
    return bytearray(b.build())


def test_preferred_read_replica_on_a_leader_partition(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    p = Partition("t", 0, 1, lg)
    p.make_leader(LeaderAndIsrState(1, 3, (1, 2, 3), (1, 2, 3)), now_ms=1000)
    p.append_records_to_leader(_batch(10), required_acks=1)
    p.update_follower_fetch_state(2, 10, now_ms=1100)
    p.update_follower_fetch_state(3, 4, now_ms=1100)

    def pref(rack: str | None, offset: int, selector: str | None = RACK_AWARE_SELECTOR) -> int:
        return preferred_read_replica(selector, p, rack, offset, RACKS.get, lambda b: True, 1200)

    assert pref("b", 10) == 2
    assert pref("c", 4) == 3
    assert pref("c", 5) == NO_PREFERRED_REPLICA  # broker 3 has only offsets below 4
    p.update_follower_fetch_state(3, 10, now_ms=1150, log_start_offset=6)
    assert pref("c", 5) == NO_PREFERRED_REPLICA  # ...and now starts at 6 (its retention ran)
    assert pref("c", 6) == 3
    assert pref("a", 0) == NO_PREFERRED_REPLICA  # the leader's own rack: never named
    assert pref("b", 10, selector=None) == NO_PREFERRED_REPLICA
    p.apply_isr((1, 3), partition_epoch=1)  # 2 leaves the ISR
    assert pref("b", 10) == NO_PREFERRED_REPLICA
    p.make_follower(LeaderAndIsrState(2, 4, (1, 2), (1, 2, 3)))
    assert pref("c", 0) == NO_PREFERRED_REPLICA  # only a leader redirects


def test_an_unknown_selector_class_stops_the_broker_config() -> None:
    from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError

    assert BrokerConfig({"replica.selector.class": RACK_AWARE_SELECTOR}).get(
        "replica.selector.class"
    ) == (RACK_AWARE_SELECTOR)
    with pytest.raises(ConfigError, match=r"replica\.selector\.class=com\.example\.Nearest: use"):
        BrokerConfig({"replica.selector.class": "com.example.Nearest"})
