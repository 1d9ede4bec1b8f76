"""The client's cluster metadata cache: brokers, topics, partition leaders, and when to refresh them.

Filled from Metadata responses by NetworkClient; read by the producer, fetcher, coordinator and admin client.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kafkalite.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(slots=True)
class TopicInfo:
    name: str
    error_code: int = 0
    is_internal: bool = False
    topic_id: Any = None
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


class ClusterMetadata:
    """Snapshot of the cluster; `update(response)` replaces it atomically (safe to read from any thread)."""

    def __init__(self, max_age_ms: int = 300000) -> None:
        self.max_age = max_age_ms / 1000.0
        self.brokers: dict[int, BrokerNode] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.last_refresh = 0.0
        self.version = 0
        self._need_update = True
        self.wanted: set[str] = set()  # topics the client cares about
        self.want_all = False
        self.pattern: re.Pattern[str] | None = None
        self.changed = threading.Condition()

    # -- reading
    def partitions_for(self, topic: str) -> list[int] | None:
        t = self.topics.get(topic)
        if t is None or t.error_code or not t.partitions:
            return None
        return sorted(t.partitions)

    def available_partitions(self, topic: str) -> list[int]:
        t = self.topics.get(topic)
        if t is None:
            return []
        return sorted(p for p, info in t.partitions.items() if info.leader >= 0)

    def leader_for(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is None:
            return -1
        info = t.partitions.get(partition)
        return -1 if info is None else info.leader

    def partition_info(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def topic_error(self, topic: str) -> int:
        t = self.topics.get(topic)
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if t is None else t.error_code

    def broker(self, node_id: int) -> BrokerNode | None:
        return self.brokers.get(node_id)

    # -- refresh policy
    def add_topics(self, *topics: str) -> bool:
        """Remember topics of interest; True if any is new (a refresh is then requested)."""
        new = [t for t in topics if t not in self.wanted]
        if new:
            self.wanted.update(new)
            self._need_update = True
        return bool(new)

    def set_topics(self, topics: set[str]) -> None:
        if topics != self.wanted:
            self.wanted = set(topics)
            self._need_update = True

    def request_update(self) -> int:
        self._need_update = True
        return self.version

    def needs_update(self) -> bool:
        return self._need_update or time.monotonic() - self.last_refresh > self.max_age

    def time_to_next_update(self) -> float:
        if self._need_update:
            return 0.0
        return max(0.0, self.last_refresh + self.max_age - time.monotonic())

    def request_topics(self) -> list[str] | None:
        """The topic list to ask for; None = all topics."""
        if self.want_all or self.pattern is not None:
            return None
        return sorted(self.wanted)

    # -- writing
    def update(self, resp: Any) -> None:
        brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        topics: dict[str, TopicInfo] = {}
        for t in resp.topics:
            if t.name is None:
                continue
            info = TopicInfo(t.name, t.error_code, bool(t.is_internal), t.topic_id)
            for p in t.partitions:
                info.partitions[p.partition_index] = PartitionInfo(
                    t.name,
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replica_nodes or ()),
                    tuple(p.isr_nodes or ()),
                    p.error_code,
                )
            topics[t.name] = info
        with self.changed:
            self.brokers = brokers or self.brokers
            self.topics = topics
            self.cluster_id = resp.cluster_id
            self.controller_id = resp.controller_id
            self.last_refresh = time.monotonic()
            self.version += 1
            retry_topics = any(
                ti.error_code
                in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                or any(pi.leader < 0 for pi in ti.partitions.values())
                for name, ti in topics.items()
                if name in self.wanted
            )
            self._need_update = bool(retry_topics)
            self.changed.notify_all()

    def failed_update(self) -> None:
        self.last_refresh = time.monotonic() - self.max_age + 0.1  # retry shortly
        self._need_update = True


def merge_partial(md: ClusterMetadata, resp: Any) -> Any:
    """Keep the cached topics the response did not mention (a partial refresh)."""
    seen = {t.name for t in resp.topics}
    keep = []
    for name, ti in md.topics.items():
        if name in seen:
            continue
        parts = [
            SimpleNamespace(
                error_code=p.error_code,
                partition_index=p.partition,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
            )
            for p in ti.partitions.values()
        ]
        keep.append(
            SimpleNamespace(
                name=name,
                error_code=ti.error_code,
                is_internal=ti.is_internal,
                topic_id=ti.topic_id,
                partitions=parts,
            )
        )
    return SimpleNamespace(
        brokers=resp.brokers,
        topics=[*resp.topics, *keep],
        cluster_id=resp.cluster_id,
        controller_id=resp.controller_id,
    )
