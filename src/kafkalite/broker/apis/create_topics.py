"""CreateTopics (key 19): new topics with partition count, replication factor 1 and config overrides.

Supports validate_only; v5+ answers with the resulting configs, v7 with the topic id.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kafkalite.broker.context import RequestContext
from kafkalite.broker.topic_configs import check_topic_overrides, topic_entries
from kafkalite.cluster.metadata import MetadataError, topic_name_error
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import CREATE_TOPICS, CreateTopicsResponse

API = CREATE_TOPICS
log = logging.getLogger("kafkalite.broker.create_topics")
_Result = CreateTopicsResponse.CreatableTopicResult
_Cfg = _Result.CreatableTopicConfigs


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    results = []
    seen: dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
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
        if seen[t.name] > 1:
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
        elif rf != 1:
            err = (
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {rf} larger than available brokers: 1.",
            )
        elif t.assignments and any(a.broker_ids != [broker.broker_id] for a in t.assignments):
            err = (
                ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                f"Only broker {broker.broker_id} exists",
            )
        elif (why := check_topic_overrides(broker, overrides)) is not None:
            err = (ErrorCode.INVALID_CONFIG, why)
        if err is not None:
            r.error_code, r.error_message = int(err[0]), err[1]
            log.info("CreateTopics %s from %s refused: %s", t.name, ctx.client_id, err[1])
            continue
        if not request.validate_only:
            try:
                info = broker.create_topic(t.name, partitions, overrides)
            except MetadataError as exc:
                r.error_code, r.error_message = int(ErrorCode.INVALID_TOPIC_EXCEPTION), str(exc)
                continue
            r.topic_id = info.topic_id
        r.num_partitions = partitions
        r.replication_factor = 1
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
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
