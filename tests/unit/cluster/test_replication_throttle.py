"""Replication throttles (KIP-73): replica lists, quota decisions on a fake clock, the follower's fetch and
the leader's answer under a throttle, and the configs over the wire (broker rates, topic replica lists)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.cluster.fetch_messages import LeaderThrottle as _LeaderThrottle
from kafkalite.cluster.replica_fetcher import FetcherConfig, PartitionFetchState, ReplicaFetcher
from kafkalite.cluster.replication_quota import (
    UNLIMITED,
    ReplicationQuota,
    ReplicationQuotas,
    follower_throttled,
    leader_throttled,
    move_throttled_replicas,
    throttled_partitions,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import InvalidConfig
from kafkalite.testing import Broker


# -- the replica lists ----------------------------------------------------------------------------
def test_throttled_partitions_name_this_broker() -> None:
    assert throttled_partitions("*", 3) is None
    assert throttled_partitions(" * ", 3) is None
    assert throttled_partitions("0:1, 1:2 ,2:1", 1) == {0, 2}
    assert throttled_partitions("0:1,1:2,2:1", 2) == {1}
    assert throttled_partitions("0:1,1:2", 7) == frozenset()
    assert throttled_partitions("", 1) == frozenset()
    for bad in ("0-1", "x:1", "*,0:1", "0:1:2", "1"):
        with pytest.raises(ValueError):
            throttled_partitions(bad, 1)
    cfg = LogConfig.from_properties(
        {
            "leader.replication.throttled.replicas": "0:1,0:2",
            "follower.replication.throttled.replicas": "*",
        }
    )
    assert leader_throttled(cfg, 0, 1) and leader_throttled(cfg, 0, 2)
    assert not leader_throttled(cfg, 1, 1) and not leader_throttled(cfg, 0, 3)
    assert follower_throttled(cfg, 5, 9)
    plain = LogConfig()
    assert not leader_throttled(plain, 0, 1) and not follower_throttled(plain, 0, 1)


def test_topic_config_validation_is_kafkas() -> None:
    ok = LogConfig.from_properties({"leader.replication.throttled.replicas": "0:101, 1:102"})
    assert ok.leader_replication_throttled_replicas == "0:101,1:102"
    assert LogConfig().to_properties()["follower.replication.throttled.replicas"] == ""
    with pytest.raises(InvalidConfig, match=r"must be the literal '\*' or a list of replicas"):
        LogConfig.from_properties({"follower.replication.throttled.replicas": "0:a"})


def test_move_sets_leader_on_current_and_follower_on_added_replicas() -> None:
    leader, follower = move_throttled_replicas({1: ([1, 2, 3], [2, 3, 4]), 0: ([1, 2], [1, 2])})
    assert leader == "0:1,0:2,1:1,1:2,1:3"
    assert follower == "1:4"


# -- the rate against the quota -------------------------------------------------------------------
def test_unthrottled_and_zero_rates() -> None:
    q = ReplicationQuota("FollowerReplication")
    assert not q.enabled and q.window_allowance() is None
    q.record(10**12, 0)
    assert not q.is_exceeded(0) and not q.should_throttle(True, False, 0)
    q.update_quota(0)
    assert q.is_exceeded(0) and q.throttle_ms(0) == 1000
    with pytest.raises(ValueError):
        q.update_quota(-1)


def test_exceeded_once_a_window_holds_more_than_its_allowance() -> None:
    q = ReplicationQuota("LeaderReplication", quota=1000)
    q.record(900, 10_000)
    assert not q.is_exceeded(10_000)
    q.record(600, 10_100)  # 1500 bytes in the window: due at 1.5 s after its start
    assert q.is_exceeded(10_100)
    assert q.throttle_ms(10_100) == 1400
    assert q.is_exceeded(11_400) and not q.is_exceeded(11_500)
    # in-sync or unlisted replicas are never held back, however far over the quota
    assert q.should_throttle(True, False, 10_100)
    assert not q.should_throttle(True, True, 10_100)
    assert not q.should_throttle(False, False, 10_100)


def test_a_throttled_copy_runs_near_the_quota() -> None:
    """A follower that fetches a window's allowance (as the fetcher caps it) whenever the quota allows,
    every 50 ms of a fake clock: the bytes copied in 30 s stay within a few percent of 30 x quota,
    and never burst the samples-1 windows Kafka's rate alone would allow after a quiet start."""
    quota = 2_000_000
    q = ReplicationQuota("FollowerReplication", quota=quota)
    chunk = q.window_allowance()
    assert chunk == quota
    copied = 0
    first_two_seconds = 0
    for now in range(0, 30_000, 50):
        if not q.is_exceeded(now):
            q.record(min(chunk or 0, 1_048_576), now)
            copied += min(chunk or 0, 1_048_576)
            if now < 2000:
                first_two_seconds = copied
    assert 0.9 * 30 * quota <= copied <= 1.1 * 30 * quota + 1_048_576
    assert first_two_seconds <= 2 * quota + 1_048_576
    assert abs(q.byte_rate(30_000) - quota) < 0.15 * quota


def test_quotas_follow_the_effective_broker_properties() -> None:
    qs = ReplicationQuotas(11, 1)
    assert qs.reconfigure({}) == []
    assert qs.reconfigure({"follower.replication.throttled.rate": "5000"}) == [
        "follower.replication.throttled.rate=5000"
    ]
    assert qs.follower.quota == 5000 and qs.leader.quota == UNLIMITED
    assert qs.reconfigure({"leader.replication.throttled.rate": "7"}) == [
        "leader.replication.throttled.rate=7",
        "follower.replication.throttled.rate=unlimited",
    ]


# -- the follower's fetch and the leader's answer -------------------------------------------------
class _Channel:
    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def send(self, request: Any, version: int | None = None) -> Any:
        self.requests.append(request)
        return SimpleNamespace(error_code=0, responses=[])


def _partition(topic: str, partition: int, config: LogConfig, isr: tuple[int, ...] = ()) -> Any:
    log = SimpleNamespace(
        config=config, leader_epoch_cache=SimpleNamespace(latest_epoch=3), log_start_offset=0
    )
    return SimpleNamespace(
        topic=topic,
        partition=partition,
        key=(topic, partition),
        log=log,
        config=config,
        latest_epoch=3,
        log_start_offset=0,
        is_leader=False,
        leader_id=1,
        isr=isr,
    )


def test_follower_leaves_throttled_partitions_out_while_over_quota() -> None:
    moving = LogConfig.from_properties({"follower.replication.throttled.replicas": "0:4"})
    parts = {
        ("moving", 0): _partition("moving", 0, moving),  # throttled here (broker 4)
        ("moving", 1): _partition("moving", 1, moving),  # not listed for broker 4
        ("caught-up", 0): _partition("caught-up", 0, LogConfig.from_properties(
            {"follower.replication.throttled.replicas": "*"})),
    }  # fmt: skip
    rm = SimpleNamespace(get_partition=lambda t, p: parts.get((t, p)))
    quota = ReplicationQuota("FollowerReplication", quota=100_000)
    channel = _Channel()
    fetcher = ReplicaFetcher(4, 1, 0, lambda: channel, rm, FetcherConfig(), quota)  # type: ignore[arg-type]
    for key in parts:
        st = fetcher.states[key] = PartitionFetchState(0, 3)
        st.truncating = False
    fetcher.states[("caught-up", 0)].in_sync = True

    def asked() -> dict[tuple[str, int], int]:
        req = channel.requests[-1]
        return {
            (t.topic, p.partition): p.partition_max_bytes for t in req.topics for p in t.partitions
        }

    assert asyncio.run(fetcher._do_work())
    # under the quota: everything, the out-of-sync throttled copy asks one window's allowance
    assert asked() == {("moving", 0): 100_000, ("moving", 1): 1048576, ("caught-up", 0): 1048576}
    quota.record(250_000, int(time.monotonic() * 1000))
    assert asyncio.run(fetcher._do_work())
    assert asked() == {("moving", 1): 1048576, ("caught-up", 0): 1048576}
    # only the throttled partition left: no fetch; the fetcher waits for the quota, not a backoff
    del fetcher.states[("moving", 1)], fetcher.states[("caught-up", 0)]
    n = len(channel.requests)
    assert not asyncio.run(fetcher._do_work())
    assert len(channel.requests) == n
    assert fetcher._idle_s is not None and 0.01 <= fetcher._idle_s <= 1.0


def test_leader_holds_back_out_of_sync_throttled_followers() -> None:
    cfg = LogConfig.from_properties({"leader.replication.throttled.replicas": "0:1,0:2"})
    part = _partition("t", 0, cfg, isr=(1, 2))
    other = _partition("t", 1, cfg, isr=(1, 2))
    quota = ReplicationQuota("LeaderReplication", quota=1000)
    to_new = _LeaderThrottle(quota, broker_id=1, replica_id=4)
    to_isr = _LeaderThrottle(quota, broker_id=1, replica_id=2)
    assert not to_new.holds_back(part)
    to_new.record(part, 5000)
    to_new.record(other, 5000)  # not throttled: not counted
    assert quota.recorded_bytes == 5000
    assert to_new.holds_back(part)
    assert not to_isr.holds_back(part)  # an in-sync follower never waits
    assert not to_new.holds_back(other)
    # without a rate nothing is held back, but the throttled replicas' rate is still measured
    unlimited = ReplicationQuota("LeaderReplication")
    free = _LeaderThrottle(unlimited, broker_id=1, replica_id=4)
    free.record(part, 10**9)
    assert not free.holds_back(part) and unlimited.recorded_bytes == 10**9


# -- the configs over the wire --------------------------------------------------------------------
SET, DELETE = 0, 1


def _incremental(
    c: WireClient, rtype: int, name: str, ops: list[tuple[str, int, str | None]]
) -> Any:
    inc = APIS[44].request
    res = inc.AlterConfigsResource(
        resource_type=rtype,
        resource_name=name,
        configs=[
            inc.AlterConfigsResource.AlterableConfig(name=n, config_operation=o, value=v)
            for n, o, v in ops
        ],
    )
    return c.send(inc(resources=[res], validate_only=False)).responses[0]


def test_throttle_configs_over_the_wire(tmp_path: Path) -> None:
    with Broker(tmp_path / "data") as b, WireClient(b.bootstrap_servers, timeout=10) as c:
        quotas = b.server.replication_quotas
        assert not quotas.leader.enabled and not quotas.follower.enabled
        r = _incremental(c, 4, "0", [("follower.replication.throttled.rate", SET, "2000000")])
        assert r.error_code == 0
        assert quotas.follower.quota == 2_000_000 and not quotas.leader.enabled
        r = _incremental(c, 4, "", [("leader.replication.throttled.rate", SET, "3000000")])
        assert r.error_code == 0 and quotas.leader.quota == 3_000_000
        r = _incremental(c, 4, "0", [("follower.replication.throttled.rate", SET, "-5")])
        assert r.error_code == ErrorCode.INVALID_REQUEST and quotas.follower.quota == 2_000_000
        r = _incremental(c, 4, "0", [("follower.replication.throttled.rate", DELETE, None)])
        assert r.error_code == 0 and not quotas.follower.enabled
        d = APIS[32].request
        res = d.DescribeConfigsResource(
            resource_type=4,
            resource_name="0",
            configuration_keys=["leader.replication.throttled.rate"],
        )
        entry = c.send(d(resources=[res], include_synonyms=False)).results[0].configs[0]
        assert (entry.value, entry.config_source, entry.read_only) == ("3000000", 3, False)

        b.create_topic("moving", 2)
        name = "leader.replication.throttled.replicas"
        assert _incremental(c, 2, "moving", [(name, SET, "0:0,1:0")]).error_code == 0
        assert (
            b.server.get_log("moving", 0).config.leader_replication_throttled_replicas == "0:0,1:0"
        )
        r = _incremental(c, 2, "moving", [(name, SET, "zero:0")])
        assert r.error_code == ErrorCode.INVALID_CONFIG
        assert "[partitionId]:[brokerId]" in (r.error_message or "")

        from kafkalite.web.metrics import BrokerCollector, LoopLagProbe

        text = BrokerCollector(b.server, LoopLagProbe()).text().decode()
        assert "\nkafka_server_leaderreplication_byte_rate 0.0\n" in text
        assert "\nkafka_server_followerreplication_byte_rate 0.0\n" in text
    # the rates are kept with the other dynamic configs: a restart applies them again
    with Broker(tmp_path / "data") as again:
        assert again.server.replication_quotas.leader.quota == 3_000_000
        assert not again.server.replication_quotas.follower.enabled
