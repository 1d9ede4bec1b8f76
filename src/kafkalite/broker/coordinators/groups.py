"""The group coordinator inside a broker: `__consumer_offsets` partitions loaded when this broker
becomes their leader and unloaded when it stops (broker.coordinator_log), writes through the
ReplicaManager, timers; transaction markers complete TxnOffsetCommits.

A coordinator write answers once the partition's high watermark has passed it (committed on the ISR).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.config.group_configs import GroupConfigManager
from kafkalite.broker.coordinators.coordinator_log import (
    CoordinatorHost,
    CoordinatorPartitions,
    StoredBatch,
    now_ms,
)
from kafkalite.coordinator import (
    OFFSETS_TOPIC,
    CoordinatorConfig,
    CoordinatorRecord,
    Deferred,
    GroupCoordinator,
)
from kafkalite.coordinator.consumer_assignors import ASSIGNORS
from kafkalite.coordinator.consumer_group import GroupConfig
from kafkalite.coordinator.records import encode_batch
from kafkalite.coordinator.share_group import ShareGroupConfig
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.consumer_groups import ConsumerGroupDescribeResponse
from kafkalite.protocol.messages.share_groups import ShareGroupDescribeResponse

if TYPE_CHECKING:
    from kafkalite.broker.context import RequestContext

log = logging.getLogger("kafkalite.broker.groups")

# topic configs Kafka gives __consumer_offsets
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}


def coordinator_config(cfg: BrokerConfig, partitions: int) -> CoordinatorConfig:
    defaults = CoordinatorConfig()

    def num(name: str, default: int) -> int:
        value = cfg.get(name, None)
        try:
            return int(value) if value is not None else default
        except (TypeError, ValueError):
            log.warning("ignoring %s=%r: not an integer", name, value)
            return default

    return CoordinatorConfig(
        offsets_topic_num_partitions=partitions,
        group_min_session_timeout_ms=num(
            "group.min.session.timeout.ms", defaults.group_min_session_timeout_ms
        ),
        group_max_session_timeout_ms=num(
            "group.max.session.timeout.ms", defaults.group_max_session_timeout_ms
        ),
        group_initial_rebalance_delay_ms=num(
            "group.initial.rebalance.delay.ms", defaults.group_initial_rebalance_delay_ms
        ),
        group_max_size=num("group.max.size", defaults.group_max_size),
        offsets_retention_minutes=num(
            "offsets.retention.minutes", defaults.offsets_retention_minutes
        ),
        offsets_retention_check_interval_ms=num(
            "offsets.retention.check.interval.ms", defaults.offsets_retention_check_interval_ms
        ),
        offset_metadata_max_bytes=num(
            "offset.metadata.max.bytes", defaults.offset_metadata_max_bytes
        ),
    )


def consumer_group_config(cfg: BrokerConfig) -> GroupConfig:
    """group.consumer.* settings; an assignor kafkalite lacks stops startup with a clear error."""
    raw = cfg.get("group.consumer.assignors") or ["uniform", "range"]
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    names = tuple(str(a).strip() for a in items if str(a).strip())
    names = tuple(a.rsplit(".", 1)[-1].removesuffix("Assignor").lower() or a for a in names)
    unknown = [a for a in names if a not in ASSIGNORS]
    if unknown or not names:
        raise ConfigError(
            f"group.consumer.assignors={cfg.get('group.consumer.assignors')!r}: kafkalite has "
            f"{', '.join(ASSIGNORS)}"
        )
    return GroupConfig(
        session_timeout_ms=int(cfg.get("group.consumer.session.timeout.ms")),
        heartbeat_interval_ms=int(cfg.get("group.consumer.heartbeat.interval.ms")),
        assignors=names,
    )


class GroupCoordinatorComponent(CoordinatorPartitions):
    """The group coordinator of one broker: it owns the `__consumer_offsets` partitions this broker
    leads, loads each when leadership arrives and unloads it when leadership leaves, appends the
    coordinator's records through the ReplicaManager, and answers a write once it is committed."""

    topic = OFFSETS_TOPIC
    topic_configs = OFFSETS_TOPIC_CONFIGS
    partitions_config = "offsets.topic.num.partitions"
    replication_config = "offsets.topic.replication.factor"
    timeout_config = "offsets.commit.timeout.ms"
    name = "group coordinator"

    def __init__(self, broker: CoordinatorHost) -> None:
        super().__init__(broker)
        self.coordinator: GroupCoordinator | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Create `__consumer_offsets` if needed, start the coordinator and load what we lead."""
        partitions = await self._open_topic()
        coordinator = GroupCoordinator(
            self._append, config=coordinator_config(self.broker.config, partitions), clock=now_ms
        )
        coordinator.consumer_config = consumer_group_config(self.broker.config)
        self.coordinator = coordinator
        started = time.monotonic()
        led = await self._load_led_partitions()
        log.info(
            "group coordinator loaded %d %s partition(s) in %.0f ms: %d group(s)",
            led, OFFSETS_TOPIC, (time.monotonic() - started) * 1000, len(coordinator.groups),
        )  # fmt: skip
        self._start_timers(coordinator.tick, coordinator.next_deadline)

    async def stop(self) -> None:
        await self._stop_tasks()
        if self.coordinator is not None:
            self.coordinator.shutdown()

    def ensure_offsets_topic(self) -> None:
        self.ensure_topic()

    # -- loading hooks -------------------------------------------------------------------------------
    def _coord(self) -> GroupCoordinator:
        assert self.coordinator is not None
        return self.coordinator

    def _started(self) -> bool:
        return self.coordinator is not None

    def _owns(self, partition: int) -> bool:
        return partition in self._coord().owned_partitions

    def _begin_loading(self, partition: int, leader_epoch: int) -> None:
        self._coord().begin_loading(partition)

    def _replay(self, partition: int, batch: StoredBatch) -> None:
        coord = self._coord()
        if batch.marker_commit is not None:
            coord.complete_txn(partition, batch.producer_id, batch.marker_commit)
        elif batch.producer_id >= 0:
            for key, value in batch.records:
                coord.replay_txn(partition, batch.producer_id, key, value)
        else:
            for key, value in batch.records:
                coord.replay(partition, key, value)

    def _finish_loading(self, partition: int) -> None:
        self._coord().finish_loading(partition)

    def _unload(self, partition: int) -> None:
        self._coord().unload(partition)

    # -- the coordinator's writes ------------------------------------------------------------------
    def _append(
        self,
        partition: int,
        records: list[CoordinatorRecord],
        producer: tuple[int, int] | None = None,
    ) -> Deferred[ErrorCode]:
        return self.append(partition, encode_batch(records, now_ms(), producer))

    def on_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written to `__consumer_offsets-partition` on this broker."""
        coord = self.coordinator
        if coord is not None and partition in coord.owned_partitions:
            coord.complete_txn(partition, producer_id, commit)


def coordinator_of(ctx: RequestContext) -> GroupCoordinator | None:
    return ctx.broker.groups.coordinator


def client_host(ctx: RequestContext) -> str:
    """Kafka's clientHost: '/' and the peer address."""
    peer = str(getattr(ctx.connection, "peer", "") or "")
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host if host else ""


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """A share group's effective settings: its group configs over the broker's group.share.*."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    max_size: int = 200
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    dlq_topic: str | None = None


# (broker config, the group's ShareGroupConfig, settings) by (id of the broker config, group id):
# every ShareFetch and ShareAcknowledge asks for its group's settings several times
_SETTINGS: dict[tuple[int, str], tuple[BrokerConfig, object, ShareSettings]] = {}
_SETTINGS_MAX = 10_000


def share_partition_settings(
    cfg: BrokerConfig, group_configs: GroupConfigManager, group_id: str
) -> ShareSettings:
    """The group's settings; computed again only when its group configs changed (the manager
    hands out a new ShareGroupConfig then) or for another broker config (static once built)."""
    sc = group_configs.share_config(group_id)
    key = (id(cfg), group_id)
    hit = _SETTINGS.get(key)
    if hit is not None and hit[0] is cfg and hit[1] is sc:
        return hit[2]

    def num(name: str, default: int) -> int:
        try:
            return int(cfg.get(name, default))
        except (TypeError, ValueError):
            return default

    settings = ShareSettings(
        session_timeout_ms=sc.session_timeout_ms,
        heartbeat_interval_ms=sc.heartbeat_interval_ms,
        record_lock_duration_ms=sc.record_lock_duration_ms,
        delivery_count_limit=sc.delivery_count_limit,
        max_record_locks=num("group.share.partition.max.record.locks", 2000),
        max_size=num("group.share.max.size", 200),
        auto_offset_reset=sc.auto_offset_reset,
        isolation_level=sc.isolation_level,
        dlq_topic=sc.dlq_topic or None,
    )
    if len(_SETTINGS) >= _SETTINGS_MAX:
        _SETTINGS.clear()
    _SETTINGS[key] = (cfg, sc, settings)
    return settings


def share_group_config(
    cfg: BrokerConfig, group_configs: GroupConfigManager, group_id: str
) -> ShareGroupConfig:
    s = share_partition_settings(cfg, group_configs, group_id)
    return ShareGroupConfig(s.session_timeout_ms, s.heartbeat_interval_ms, s.max_size)


ConsumerAssignment = ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment
ShareAssignment = ShareGroupDescribeResponse.DescribedGroup.Member.Assignment


@overload
def described_assignment(
    ctx: RequestContext,
    parts: dict[uuid.UUID, frozenset[int]],
    assignment_cls: type[ConsumerAssignment],
) -> ConsumerAssignment: ...
@overload
def described_assignment(
    ctx: RequestContext,
    parts: dict[uuid.UUID, frozenset[int]],
    assignment_cls: type[ShareAssignment],
) -> ShareAssignment: ...
def described_assignment(
    ctx: RequestContext,
    parts: dict[uuid.UUID, frozenset[int]],
    assignment_cls: type[ConsumerAssignment] | type[ShareAssignment],
) -> ConsumerAssignment | ShareAssignment:
    """ConsumerGroupDescribe's / ShareGroupDescribe's Assignment of `parts`, topic names resolved from
    the metadata cache (empty for a topic it no longer knows)."""
    cache = ctx.broker.metadata_cache
    named = []
    for tid, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        topic = cache.topic_by_id(tid)
        named.append((tid, topic.name if topic else "", sorted(ps)))
    if issubclass(assignment_cls, ShareAssignment):
        share_tp = assignment_cls.TopicPartitions
        return assignment_cls(
            topic_partitions=[
                share_tp(topic_id=t, topic_name=n, partitions=ps) for t, n, ps in named
            ]
        )
    consumer_tp = assignment_cls.TopicPartitions
    return assignment_cls(
        topic_partitions=[
            consumer_tp(topic_id=t, topic_name=n, partitions=ps) for t, n, ps in named
        ]
    )
