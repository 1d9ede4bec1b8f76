"""MetadataCache: what every handler reads about the cluster — live brokers, the controller, and each
partition's leader, leader epoch, replicas, ISR and offline replicas. Writes go through a MetadataStore.

Single-node mode fills it from the local store (this broker leads everything at epoch 0); cluster mode
from the controller's UpdateMetadata requests. Readers get immutable snapshots; updates swap whole maps.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from kafkalite.cluster.metadata import INTERNAL_TOPICS

NO_LEADER = -1
# Kafka's security protocol ids (UpdateMetadata endpoints)
SECURITY_PROTOCOL_IDS: dict[str, int] = {
    "PLAINTEXT": 0,
    "SSL": 1,
    "SASL_PLAINTEXT": 2,
    "SASL_SSL": 3,
}


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    """One advertised listener of a broker: its name, address and security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker: host and port of its inter-broker listener, its rack, and every advertised
    listener (clients get the one with the name of the listener they connected to)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[ListenerEndpoint, ...] = ()

    def for_listener(self, name: str | None) -> BrokerEndpoint | None:
        """This broker as seen through listener `name` (None when it has no such listener;
        itself when `name` is None or the broker named no listeners)."""
        if name is None or not self.listeners:
            return self
        for ep in self.listeners:
            if ep.listener == name:
                return BrokerEndpoint(self.broker_id, ep.host, ep.port, self.rack, self.listeners)
        return None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition's leadership as the controller last announced it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionMetadata, ...] = field(default=())

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def partition(self, index: int) -> PartitionMetadata | None:
        if 0 <= index < len(self.partitions):
            return self.partitions[index]
        return None


class MetadataCache:
    """The read side of cluster metadata. Thread-safe: readers see a consistent snapshot of each map."""

    def __init__(self, local_broker_id: int) -> None:
        self.local_broker_id = local_broker_id
        self.cluster_id = ""
        self.controller_id = NO_LEADER
        # False until the first full picture arrived (cluster mode: the controller's first
        # UpdateMetadata); until then an unknown topic may well exist
        self.initialized = False
        self._brokers: dict[int, BrokerEndpoint] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._lock = threading.Lock()
        # per topic, what request handlers derived from it (the Metadata answer's encoded entry),
        # each kept with the TopicMetadata it came from; a removed topic's are dropped with it
        self.derived: dict[str, dict[object, tuple[TopicMetadata, object, object]]] = {}

    # -- reads -------------------------------------------------------------------------------------
    def alive_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        """Live brokers; with `listener`, as reached through that listener (brokers without a
        listener of that name are left out, as Kafka does)."""
        out = sorted(self._brokers.values(), key=lambda b: b.broker_id)
        if listener is None:
            return out
        return [ep for ep in (b.for_listener(listener) for b in out) if ep is not None]

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        return self._brokers.get(broker_id)

    @property
    def live_brokers_version(self) -> object:
        """Changes (by identity) whenever the set of live brokers does: answers built from it can
        be kept until then."""
        return self._brokers

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self._brokers

    def topics(self) -> list[TopicMetadata]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> PartitionMetadata | None:
        t = self._topics.get(topic)
        return t.partition(index) if t is not None else None

    def leader_endpoint(self, topic: str, index: int) -> BrokerEndpoint | None:
        pm = self.partition(topic, index)
        if pm is None or not pm.has_leader:
            return None
        return self._brokers.get(pm.leader)

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    # -- writes (the broker's metadata listener, never handlers) -----------------------------------
    def set_brokers(self, brokers: Iterable[BrokerEndpoint], controller_id: int) -> None:
        new = {b.broker_id: b for b in brokers}
        with self._lock:
            self._brokers = new
            self.controller_id = controller_id

    def put_topic(self, topic: TopicMetadata) -> None:
        with self._lock:
            topics = dict(self._topics)
            old = topics.get(topic.name)
            topics[topic.name] = topic
            by_id = dict(self._by_id)
            if old is not None and old.topic_id != topic.topic_id:
                by_id.pop(old.topic_id, None)
            by_id[topic.topic_id] = topic
            self._topics, self._by_id = topics, by_id

    def update_partitions(self, states: Iterable[PartitionMetadata]) -> None:
        """Replace the named partitions' states (topics must already be known; others are ignored)."""
        with self._lock:
            topics = dict(self._topics)
            by_topic: dict[str, dict[int, PartitionMetadata]] = {}
            for st in states:
                by_topic.setdefault(st.topic, {})[st.partition] = st
            for name, parts in by_topic.items():
                t = topics.get(name)
                if t is None:
                    continue
                count = max(t.partition_count, max(parts) + 1)
                merged = [parts.get(i) or t.partition(i) for i in range(count)]
                topics[name] = TopicMetadata(
                    name,
                    t.topic_id,
                    tuple(
                        pm if pm is not None else _offline(name, i) for i, pm in enumerate(merged)
                    ),
                )
            by_id = {t.topic_id: t for t in topics.values()}
            self._topics, self._by_id = topics, by_id

    def remove_topic(self, name: str) -> TopicMetadata | None:
        with self._lock:
            topics = dict(self._topics)
            old = topics.pop(name, None)
            if old is None:
                return None
            by_id = dict(self._by_id)
            by_id.pop(old.topic_id, None)
            self._topics, self._by_id = topics, by_id
            self.derived.pop(name, None)
            return old


def _offline(topic: str, index: int) -> PartitionMetadata:
    return PartitionMetadata(topic, index, NO_LEADER, -1, (), ())


def local_topic_metadata(
    name: str,
    topic_id: uuid.UUID,
    partitions: int,
    broker_id: int,
    offline: Collection[int] = (),
) -> TopicMetadata:
    """A topic of a single-node cluster: this broker leads every partition at leader epoch 0, but
    those `offline` (their logs are still being recovered), which have no leader yet."""
    me = (broker_id,)
    return TopicMetadata(
        name,
        topic_id,
        tuple(
            PartitionMetadata(name, i, NO_LEADER, 0, me, ())
            if i in offline
            else PartitionMetadata(name, i, broker_id, 0, me, me)
            for i in range(partitions)
        ),
    )
