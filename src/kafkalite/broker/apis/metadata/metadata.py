"""Metadata (key 3): live brokers, the cluster id and controller, topics with each partition's leader,
leader epoch, replicas, ISR and offline replicas — read from the MetadataCache.

Unknown topics are auto-created when `auto.create.topics.enable` and the request allow it; names are validated.
"""

from __future__ import annotations

import logging
import uuid
from typing import cast

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.metadata import MetadataError, topic_name_error
from kafkalite.cluster.metadata_cache import TopicMetadata
from kafkalite.protocol.codec import Encoded
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.metadata import METADATA, MetadataRequest, MetadataResponse
from kafkalite.security.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
)

API = METADATA
log = logging.getLogger("kafkalite.broker.metadata")
ZERO_UUID = uuid.UUID(int=0)

_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition


def auto_create(ctx: RequestContext, name: str) -> tuple[TopicMetadata | None, ErrorCode]:
    """Auto-create `name` if allowed; (info, NO_ERROR) or (None, error code for the response).

    In a cluster, a topic this broker does not know yet may exist all the same (the controller's
    UpdateMetadata has not arrived, e.g. just after a restart): it answers the retriable
    LEADER_NOT_AVAILABLE, never a "does not exist" a client would believe."""
    broker = ctx.broker
    if topic_name_error(name):
        return None, ErrorCode.INVALID_TOPIC_EXCEPTION
    cluster = broker.zk_broker is not None
    if cluster and not broker.metadata_cache.initialized:
        return None, ErrorCode.LEADER_NOT_AVAILABLE
    if not broker.config.auto_create_topics:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not may_create_topic(ctx, name):
        return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    try:
        broker.create_topic(name)
    except MetadataError as exc:
        info = broker.metadata_cache.topic(name)
        if info is not None:  # created concurrently
            return info, ErrorCode.NO_ERROR
        if cluster and name in broker.metadata_store:
            return None, ErrorCode.LEADER_NOT_AVAILABLE  # exists; its leaders are on their way
        log.warning("auto-creation of topic %r refused: %s", name, exc)
        if "Replication factor" in str(exc):
            return None, ErrorCode.INVALID_REPLICATION_FACTOR
        return None, ErrorCode.INVALID_TOPIC_EXCEPTION
    created = broker.metadata_cache.topic(name)
    if created is None:  # cluster mode: the controller has not announced it yet
        return None, ErrorCode.LEADER_NOT_AVAILABLE
    return created, ErrorCode.NO_ERROR


def may_create_topic(ctx: RequestContext, name: str) -> bool:
    """CREATE on the cluster, or on the topic (Kafka's check for CreateTopics and auto-creation)."""
    return ctx.authorize_cluster(AclOperation.CREATE) or ctx.authorize(
        AclOperation.CREATE, ResourceType.TOPIC, name
    )


def partition_entries(ctx: RequestContext, info: TopicMetadata) -> list[_Partition]:
    alive = ctx.broker.metadata_cache.is_alive
    return [
        _Partition(
            error_code=0 if pm.has_leader else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=pm.partition,
            leader_id=pm.leader,
            leader_epoch=pm.leader_epoch,
            replica_nodes=list(pm.replicas),
            isr_nodes=list(pm.isr),
            offline_replicas=[r for r in pm.replicas if not alive(r) or r in pm.offline_replicas],
        )
        for pm in info.partitions
    ]


def topic_entry(
    ctx: RequestContext, info: TopicMetadata, include_ops: bool = False
) -> _Topic | Encoded:
    """The topic's entry; without its authorized operations (which depend on who asks) it is
    encoded once per version and reused while the topic and the live brokers are the same objects
    (TopicMetadata is immutable, replaced on every change): a producer to 1,000 topics of 100
    partitions asks for them again and again."""
    if include_ops:
        return _topic_entry(ctx, info, True)
    version = ctx.api_version
    cache = ctx.broker.metadata_cache
    live = cache.live_brokers_version
    memo = cache.derived.setdefault(info.name, {})
    hit = memo.get(version)
    if hit is not None and hit[0] is info and hit[1] is live:
        return cast(Encoded, hit[2])
    encoded = _Topic._schema.codec(version).encode(_topic_entry(ctx, info, False))
    memo[version] = (info, live, encoded)
    return encoded


def _topic_entry(ctx: RequestContext, info: TopicMetadata, include_ops: bool) -> _Topic:
    return _Topic(
        error_code=0,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.internal,
        partitions=partition_entries(ctx, info),
        topic_authorized_operations=(
            ctx.authorized_operations(ResourceType.TOPIC, info.name)
            if include_ops
            else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )


def brokers(ctx: RequestContext) -> list[_Broker]:
    return [
        _Broker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in ctx.broker.metadata_cache.alive_brokers(ctx.connection.listener_name)
    ]


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    topics_out: list[_Topic | Encoded] = []
    allow_auto = request.allow_auto_topic_creation if version >= 4 else True
    topic_ops = version >= 8 and request.include_topic_authorized_operations
    if request.topics is None or (version == 0 and not request.topics):
        # a list-all request sees only the topics it may describe
        topics_out = [
            topic_entry(ctx, t, topic_ops)
            for t in broker.metadata_cache.topics()
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        ]
    else:
        for req_topic in request.topics:
            name = req_topic.name
            tid = getattr(req_topic, "topic_id", None)
            info = None
            if name is None and tid is not None and tid != ZERO_UUID:
                info = broker.metadata_cache.topic_by_id(tid)
                if info is None:
                    topics_out.append(
                        _Topic(
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                            name=None,
                            topic_id=tid,
                            partitions=[],
                        )
                    )
                    continue
            elif name is not None:
                info = broker.metadata_cache.topic(name)
            if not ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TOPIC, info.name if info else name or ""
            ):
                topics_out.append(
                    _Topic(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        name=name,
                        topic_id=tid if name is None and tid is not None else ZERO_UUID,
                        is_internal=info.internal if info is not None else False,
                        partitions=[],
                    )
                )
                continue
            if info is None:
                if name is None:
                    topics_out.append(
                        _Topic(error_code=ErrorCode.INVALID_REQUEST, name=None, partitions=[])
                    )
                    continue
                if topic_name_error(name):
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif allow_auto:
                    info, code = auto_create(ctx, name)
                else:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if info is None:
                    topics_out.append(
                        _Topic(error_code=code, name=name, topic_id=ZERO_UUID, partitions=[])
                    )
                    continue
            topics_out.append(topic_entry(ctx, info, topic_ops))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers(ctx),
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata_cache.controller_id,
        # an Encoded entry is written as it is where a topic goes (protocol/codec.py)
        topics=cast("list[_Topic]", topics_out),
        cluster_authorized_operations=(
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if 8 <= version <= 10 and request.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )
