"""CreateTopics (key 19): new topics with partition count, replication factor (up to the live brokers)
or an explicit assignment, and config overrides; in a cluster it answers once leaders are announced.

Supports validate_only; v5+ answers with the resulting configs, v7 with the topic id.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from kafkalite.broker.apis.metadata.metadata import may_create_topic
from kafkalite.broker.config.topic_configs import (
    check_topic_overrides,
    topic_entries,
    warn_ignored_topic_configs,
)
from kafkalite.broker.context import RequestContext
from kafkalite.broker.local_logs import TopicStorageError
from kafkalite.cluster.controller.election import check_assignment
from kafkalite.cluster.metadata import MetadataError, topic_name_error
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    CREATE_TOPICS,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

API = CREATE_TOPICS
log = logging.getLogger("kafkalite.broker.create_topics")
_Result = CreateTopicsResponse.CreatableTopicResult
_Cfg = _Result.CreatableTopicConfigs


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    results = []
    seen: dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    alive = {b.broker_id for b in broker.metadata_cache.alive_brokers()}
    created: list[str] = []
    for t in request.topics:
        r = _Result(
            name=t.name,
            topic_id=uuid.UUID(int=0),
            error_code=0,
            error_message=None,
            num_partitions=-1,
            replication_factor=-1,
            configs=None,
        )
        results.append(r)
        partitions = t.num_partitions
        rf = t.replication_factor
        if t.assignments:
            partitions = len(t.assignments)
            rf = len(t.assignments[0].broker_ids)
        if partitions == -1:
            partitions = broker.config.num_partitions
        if rf == -1:
            rf = int(broker.config.get("default.replication.factor"))
        overrides = {c.name: c.value for c in t.configs if c.value is not None}
        err: tuple[ErrorCode, str] | None = None
        if not may_create_topic(ctx, t.name):
            err = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        elif seen[t.name] > 1:
            err = (
                ErrorCode.INVALID_REQUEST,
                f"Topic {t.name} appears more than once in the request",
            )
        elif (why := topic_name_error(t.name)) is not None:
            err = (ErrorCode.INVALID_TOPIC_EXCEPTION, why)
        elif t.name in broker.metadata_store:
            err = (ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        elif partitions <= 0:
            err = (ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        elif rf <= 0:
            err = (
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0.",
            )
        elif rf > len(alive):
            err = (
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {rf} larger than available brokers: {len(alive)}.",
            )
        elif t.assignments and (
            why := check_assignment({a.partition_index: a.broker_ids for a in t.assignments}, alive)
        ):
            err = (ErrorCode.INVALID_REPLICATION_ASSIGNMENT, why)
        elif (why := check_topic_overrides(broker, overrides)) is not None:
            err = (ErrorCode.INVALID_CONFIG, why)
        if err is not None:
            r.error_code, r.error_message = int(err[0]), err[1]
            log.info("CreateTopics %s from %s refused: %s", t.name, ctx.client_id, err[1])
            continue
        if not request.validate_only:
            assignment = (
                {a.partition_index: tuple(a.broker_ids) for a in t.assignments}
                if t.assignments
                else None
            )
            try:
                info = broker.create_topic(
                    t.name, partitions, overrides, replication_factor=rf, assignment=assignment
                )
            except MetadataError as exc:
                r.error_code, r.error_message = int(ErrorCode.INVALID_TOPIC_EXCEPTION), str(exc)
                continue
            except TopicStorageError as exc:
                r.error_code, r.error_message = int(ErrorCode.KAFKA_STORAGE_ERROR), str(exc)
                log.error(
                    "CreateTopics %s (%d partitions) from %s failed and was rolled back: %s",
                    t.name,
                    partitions,
                    ctx.client_id,
                    exc,
                )
                continue
            r.topic_id = info.topic_id
            created.append(t.name)
            warn_ignored_topic_configs(t.name, overrides)
        r.num_partitions = partitions
        r.replication_factor = rf
        if ctx.api_version >= 5:
            r.configs = [
                _Cfg(
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=e.source,
                    is_sensitive=False,
                )
                for e in topic_entries(broker, overrides)
            ]
    if created and broker.zk_broker is not None:
        await await_leaders(ctx, {name: 0 for name in created}, request.timeout_ms)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def await_leaders(ctx: RequestContext, topics: dict[str, int], timeout_ms: int) -> None:
    """Cluster mode: answer once the controller has announced a leader for every partition of these
    topics (topic -> partition count expected), or the request's timeout passed (the partitions exist
    and their leaders follow), as Kafka's DelayedCreatePartitions does."""
    cache = ctx.broker.metadata_cache
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000

    def ready() -> bool:
        for name, count in topics.items():
            t = cache.topic(name)
            if t is None or len(t.partitions) < max(count, 1):
                return False
            if not all(p.has_leader for p in t.partitions):
                return False
        return True

    while not ready() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
