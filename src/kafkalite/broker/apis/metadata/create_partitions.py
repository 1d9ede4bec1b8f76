"""CreatePartitions (key 37): raise a topic's partition count (never lower it); validate_only supported.

One node: new partitions get empty logs here. A cluster: the new partitions are placed (Kafka's rule, or the
request's assignment) in ZooKeeper, and the answer waits until the controller has announced their leaders.
"""

from __future__ import annotations

import logging

from kafkalite.broker.apis.metadata.create_topics import await_leaders
from kafkalite.broker.context import RequestContext
from kafkalite.broker.local_logs import TopicStorageError
from kafkalite.cluster.metadata import MetadataError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    CREATE_PARTITIONS,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = CREATE_PARTITIONS
log = logging.getLogger("kafkalite.broker.create_partitions")
_Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    results = []
    grown: dict[str, int] = {}
    for t in request.topics:
        r = _Result(name=t.name, error_code=0, error_message=None)
        results.append(r)
        info = broker.metadata_store.get(t.name)
        if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, t.name):
            r.error_code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            r.error_message = "Authorization failed."
        elif info is None:
            r.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            r.error_message = f"The topic '{t.name}' does not exist."
        elif t.count <= info.partitions:
            r.error_code = int(ErrorCode.INVALID_PARTITIONS)
            r.error_message = f"Topic currently has {info.partitions} partitions, which is higher than or equal to the requested {t.count}."
        elif (
            t.assignments is not None
            and broker.zk_broker is None
            and any(a.broker_ids != [broker.broker_id] for a in t.assignments)
        ):
            r.error_code = int(ErrorCode.INVALID_REPLICATION_ASSIGNMENT)
            r.error_message = f"Only broker {broker.broker_id} exists"
        elif t.assignments is not None and len(t.assignments) != t.count - info.partitions:
            r.error_code = int(ErrorCode.INVALID_REPLICATION_ASSIGNMENT)
            r.error_message = (
                f"Increasing the number of partitions by {t.count - info.partitions} but "
                f"{len(t.assignments)} assignments provided."
            )
        elif not request.validate_only:
            assignment = (
                {info.partitions + i: tuple(a.broker_ids) for i, a in enumerate(t.assignments)}
                if t.assignments is not None
                else None
            )
            try:
                broker.add_partitions(t.name, t.count, assignment)
                grown[t.name] = t.count
            except MetadataError as exc:
                r.error_code = int(ErrorCode.INVALID_REPLICATION_ASSIGNMENT)
                r.error_message = str(exc)
            except TopicStorageError as exc:
                r.error_code = int(ErrorCode.KAFKA_STORAGE_ERROR)
                r.error_message = str(exc)
                log.error(
                    "CreatePartitions %s to %d from %s failed and was rolled back: %s",
                    t.name,
                    t.count,
                    ctx.client_id,
                    exc,
                )
    if grown and broker.zk_broker is not None:
        await await_leaders(ctx, grown, request.timeout_ms)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
