"""The broker's client quotas: produce and fetch byte rates and request time per user / client id,
loaded from the metadata store, altered through it, measured per request and turned into throttle times;
and KIP-612's connection_creation_rate per ip entity, handed to the connection quotas that enforce it.

Kafka's enforcement (KIP-219): the answer carries throttle_time_ms and the connection reads nothing more
for that long; clients too old to back off themselves get their answer late instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping

from kafkalite.cluster.metadata import MetadataStore
from kafkalite.cluster.quota_data import describe_entity
from kafkalite.security.quota import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    QuotaEntity,
)

log = logging.getLogger("kafkalite.broker.quotas")

# Requests a request quota never counts (Kafka's cluster actions, and what comes before
# authentication): LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, SaslHandshake,
# SaslAuthenticate, WriteTxnMarkers, AlterPartition
REQUEST_QUOTA_EXEMPT = frozenset({4, 5, 6, 7, 17, 36, 27, 56})

# KIP-219: from which version a client backs off by itself on throttle_time_ms (an older one gets its
# answer delayed instead); APIs not listed have always done so
_CLIENT_THROTTLES_FROM: dict[int, int] = {
    0: 6,  # Produce
    1: 8,  # Fetch
    2: 3,  # ListOffsets
    3: 6,  # Metadata
    8: 4,  # OffsetCommit
    9: 4,  # OffsetFetch
    10: 2,  # FindCoordinator
    11: 3,  # JoinGroup
    12: 2,  # Heartbeat
    13: 2,  # LeaveGroup
    14: 2,  # SyncGroup
    15: 2,  # DescribeGroups
    16: 2,  # ListGroups
    18: 2,  # ApiVersions
    19: 3,  # CreateTopics
    20: 2,  # DeleteTopics
    21: 1,  # DeleteRecords
    22: 1,  # InitProducerId
    23: 1,  # OffsetForLeaderEpoch
    24: 1,  # AddPartitionsToTxn
    25: 1,  # AddOffsetsToTxn
    26: 1,  # EndTxn
    28: 1,  # TxnOffsetCommit
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 2,  # DescribeConfigs
    33: 1,  # AlterConfigs
    35: 1,  # DescribeLogDirs
    37: 1,  # CreatePartitions
    42: 1,  # DeleteGroups
}

NANOS_TO_PERCENT_SECONDS = 100.0 / 1e9  # request time is recorded as percent of one thread-second


def client_throttles(api_key: int, version: int) -> bool:
    """Does a client of this request version back off on throttle_time_ms by itself (KIP-219)?"""
    return version >= _CLIENT_THROTTLES_FROM.get(api_key, 0)


class ClientQuotas:
    """Configured quotas per entity and a ClientQuotaManager per kind. Lookups are dict reads on the
    event loop; writes and reloads go to the store off the loop."""

    def __init__(self, store: MetadataStore, samples: int = 11, window_seconds: int = 1) -> None:
        self.store = store
        window_ms = window_seconds * 1000
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_ms)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_ms)
        # Kafka caps a request-time throttle at one window
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples, window_ms, window_ms)
        self._entities: dict[QuotaEntity, dict[str, float]] = {}
        self.active = False  # any quota at all: when not, requests skip every quota step
        # where the ip entities' connection_creation_rate go (the broker's ConnectionQuotas):
        # called with {ip or "<default>": rate} on every change
        self.on_ip_quotas: Callable[[Mapping[str, float]], None] | None = None

    async def load(self) -> None:
        self._entities = await asyncio.to_thread(self.store.client_quotas)
        self._rebuild()
        if self._entities:
            log.info("loaded client quotas of %d entit(y/ies)", len(self._entities))

    def _rebuild(self) -> None:
        for manager in (self.produce, self.fetch, self.request):
            manager.update_quotas(
                {e: v[manager.key] for e, v in self._entities.items() if manager.key in v}
            )
        self.active = self.produce.enabled or self.fetch.enabled or self.request.enabled
        if self.on_ip_quotas is not None:
            self.on_ip_quotas(self.ip_quotas())

    def ip_quotas(self) -> dict[str, float]:
        """connection_creation_rate per ip entity (`<default>`: every address without its own)."""
        return {
            e.ip: v[CONNECTION_CREATION_RATE]
            for e, v in self._entities.items()
            if e.ip is not None and CONNECTION_CREATION_RATE in v
        }

    def entities(self) -> dict[QuotaEntity, dict[str, float]]:
        return {e: dict(v) for e, v in self._entities.items()}

    def _set(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        if values:
            self._entities[entity] = dict(values)
        else:
            self._entities.pop(entity, None)
        self._rebuild()

    async def alter(
        self, entity: QuotaEntity, upsert: Mapping[str, float], remove: Collection[str]
    ) -> None:
        values = await asyncio.to_thread(self.store.alter_client_quotas, entity, upsert, remove)
        self._set(entity, values)
        log.info(
            "client quotas of %s altered: %s",
            describe_entity(entity),
            ", ".join(f"{k}={v:g}" for k, v in sorted(values.items())) or "none",
        )

    async def reload(self, entities: Iterable[QuotaEntity]) -> None:
        """Another broker changed these entities' quotas (a /config/changes notification)."""
        for entity in dict.fromkeys(entities):
            try:
                values = await asyncio.to_thread(self.store.entity_client_quotas, entity)
            except Exception as exc:
                log.warning(
                    "cannot reload the client quotas of %s: %r", describe_entity(entity), exc
                )
                continue
            self._set(entity, values)
            log.info("client quotas of %s reloaded", describe_entity(entity))

    # -- measuring requests
    def record_request(
        self, user: str, client_id: str, api_key: int, produce_bytes: int, elapsed_ns: int
    ) -> int:
        """Record a request's handler time (and a produce's bytes); the throttle time in ms."""
        now_ms = int(time.monotonic() * 1000)
        throttle = 0
        if self.request.enabled and api_key not in REQUEST_QUOTA_EXEMPT:
            percent = max(elapsed_ns, 0) * NANOS_TO_PERCENT_SECONDS
            throttle = self.request.record(user, client_id, percent, now_ms)
        if api_key == 0 and self.produce.enabled:
            throttle = max(throttle, self.produce.record(user, client_id, produce_bytes, now_ms))
        return throttle

    def record_fetch(self, user: str, client_id: str, response_bytes: int) -> int:
        """Record the bytes of a consumer's fetch answer; the throttle time in ms."""
        if not self.fetch.enabled:
            return 0
        return self.fetch.record(user, client_id, response_bytes, int(time.monotonic() * 1000))

    def fetch_max_bytes(self, user: str, client_id: str) -> int | None:
        """At most one window's allowance per fetch answer when a consumer quota applies (Kafka)."""
        if not self.fetch.enabled:
            return None
        allowance = self.fetch.max_value_in_window(user, client_id)
        return None if allowance is None else max(1, int(allowance))
