"""Replication throttles (KIP-73, Kafka's ReplicationQuotaManager): which replicas a topic throttles on
this broker, and the leader / follower replication byte rates against their quotas (pure, clock-free)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkalite.security.quota import (
    QUOTA_WINDOW_NUM_DEFAULT,
    QUOTA_WINDOW_SIZE_SECONDS_DEFAULT,
    Rate,
    throttle_time_ms,
)
from kafkalite.storage.config import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    LogConfig,
    valid_throttled_replicas,
)

UNLIMITED = 2**63 - 1  # Kafka's default rate: Long.MAX_VALUE, no throttle
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
WINDOW_NUM = "replication.quota.window.num"
WINDOW_SIZE_SECONDS = "replication.quota.window.size.seconds"
ALL_REPLICAS = "*"

__all__ = [
    "ALL_REPLICAS",
    "FOLLOWER_RATE",
    "FOLLOWER_THROTTLED_REPLICAS",
    "LEADER_RATE",
    "LEADER_THROTTLED_REPLICAS",
    "UNLIMITED",
    "ReplicationQuota",
    "ReplicationQuotas",
    "follower_throttled",
    "leader_throttled",
    "move_throttled_replicas",
    "throttled_partitions",
]


# -- which replicas are throttled ------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a `*.replication.throttled.replicas` value throttles on broker `broker_id`:
    None means every partition ('*'), otherwise those whose `partition:broker` entry names this
    broker (Kafka's parseThrottledPartitions). ValueError when the value is not of that form."""
    if not valid_throttled_replicas(value):
        raise ValueError(f"{value!r} is not '*' nor a list of partitionId:brokerId")
    items = [i.strip() for i in value.split(",") if i.strip()]
    if items == [ALL_REPLICAS]:
        return None
    out = set()
    for item in items:
        partition, broker = item.split(":")
        if int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def _listed(value: str, partition: int, broker_id: int) -> bool:
    if not value:
        return False
    parts = throttled_partitions(value, broker_id)
    return parts is None or partition in parts


def leader_throttled(config: LogConfig, partition: int, broker_id: int) -> bool:
    """Does this broker, leading `partition` of a topic with `config`, throttle its followers?"""
    return _listed(config.leader_replication_throttled_replicas, partition, broker_id)


def follower_throttled(config: LogConfig, partition: int, broker_id: int) -> bool:
    """Does this broker throttle its own copying of `partition` as a follower?"""
    return _listed(config.follower_replication_throttled_replicas, partition, broker_id)


def move_throttled_replicas(
    moves: Mapping[int, tuple[Sequence[int], Sequence[int]]],
) -> tuple[str, str]:
    """The (leader, follower) throttled-replica values a reassignment of a topic's partitions sets,
    as kafka-reassign-partitions --throttle does: every current replica may lead the copy, every
    replica the target adds copies it. `moves` maps partition -> (current replicas, target)."""
    leader: list[str] = []
    follower: list[str] = []
    for partition, (current, target) in sorted(moves.items()):
        leader += [f"{partition}:{b}" for b in current]
        follower += [f"{partition}:{b}" for b in target if b not in current]
    return ",".join(leader), ",".join(follower)


# -- the rates --------------------------------------------------------------------------------------
@dataclass(slots=True)
class ReplicationQuota:
    """One broker's replication byte rate of one kind (LeaderReplication or FollowerReplication)
    against its quota. Only throttled replicas' bytes are recorded, as in Kafka.

    Over the quota means: the sampled rate (Kafka's Rate, over up to `samples` windows) exceeds it,
    or the current window alone already carries more than one window's allowance (so a move that
    starts after a quiet spell proceeds near the quota at once instead of bursting samples - 1
    windows' worth)."""

    kind: str
    quota: int = UNLIMITED
    samples: int = QUOTA_WINDOW_NUM_DEFAULT
    window_ms: int = QUOTA_WINDOW_SIZE_SECONDS_DEFAULT * 1000
    rate: Rate = field(init=False)
    recorded_bytes: int = 0

    def __post_init__(self) -> None:
        self.rate = Rate(self.samples, self.window_ms)

    @property
    def enabled(self) -> bool:
        return self.quota < UNLIMITED

    def update_quota(self, quota: int) -> None:
        if quota < 0:
            raise ValueError(f"a replication throttle must be at least 0, got {quota}")
        self.quota = quota

    def record(self, nbytes: int, now_ms: int) -> None:
        self.recorded_bytes += nbytes
        self.rate.record(float(nbytes), now_ms)

    def throttle_ms(self, now_ms: int) -> int:
        """0 when within the quota; otherwise how long until the rate is back at it (at least 1)."""
        if not self.enabled:
            return 0
        if self.quota == 0:
            return self.window_ms  # nothing may pass: ask again a window later
        wait = self.rate.window_throttle_ms(self.quota, now_ms)
        observed = self.rate.measure(now_ms)
        if observed > self.quota:
            wait = max(
                wait, throttle_time_ms(observed, self.quota, self.rate.window_size_ms(now_ms)), 1
            )
        return wait

    def is_exceeded(self, now_ms: int) -> bool:
        return self.throttle_ms(now_ms) > 0

    def should_throttle(self, throttled: bool, in_sync: bool, now_ms: int) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: a replica listed as throttled,
        not in sync, while the rate is over the quota."""
        return throttled and not in_sync and self.enabled and self.is_exceeded(now_ms)

    def window_allowance(self) -> int | None:
        """What one window may carry (None when unthrottled): a throttled fetch asks no more."""
        if not self.enabled:
            return None
        return max(1, self.quota * self.window_ms // 1000)

    def byte_rate(self, now_ms: int) -> float:
        """The measured rate of throttled replication, bytes/s (Kafka's byte-rate metric)."""
        return self.rate.measure(now_ms)


def _rate_of(props: Mapping[str, str], name: str) -> int:
    raw = props.get(name)
    if raw is None or str(raw).strip() == "":
        return UNLIMITED
    value = int(str(raw).strip())
    if value < 0:
        raise ValueError(f"{name} must be at least 0, got {value}")
    return value


class ReplicationQuotas:
    """The leader and follower replication quotas of one broker."""

    def __init__(
        self,
        samples: int = QUOTA_WINDOW_NUM_DEFAULT,
        window_seconds: int = QUOTA_WINDOW_SIZE_SECONDS_DEFAULT,
    ) -> None:
        window_ms = window_seconds * 1000
        self.leader = ReplicationQuota("LeaderReplication", UNLIMITED, samples, window_ms)
        self.follower = ReplicationQuota("FollowerReplication", UNLIMITED, samples, window_ms)

    def reconfigure(self, props: Mapping[str, str]) -> list[str]:
        """Take the rates from effective broker properties; what changed, for the log."""
        changes = []
        for quota, name in ((self.leader, LEADER_RATE), (self.follower, FOLLOWER_RATE)):
            new = _rate_of(props, name)
            if new != quota.quota:
                quota.update_quota(new)
                changes.append(f"{name}={'unlimited' if new == UNLIMITED else new}")
        return changes
