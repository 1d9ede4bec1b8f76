"""DeleteTopics (key 20): remove topics (by name, or by topic id from v6) with their logs.

Internal topics are refused; `delete.topic.enable=false` answers TOPIC_DELETION_DISABLED. In a cluster the
answer waits until the controller has removed the topic from the metadata (or the request's timeout passed),
as Kafka's DelayedDeleteTopics does; a topic still there then is REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    DELETE_TOPICS,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = DELETE_TOPICS
log = logging.getLogger("kafkalite.broker.delete_topics")
_Result = DeleteTopicsResponse.DeletableTopicResult
ZERO = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id if t.topic_id != ZERO else None) for t in request.topics]
    else:
        wanted = [(n, None) for n in request.topic_names]
    results = []
    deleted: list[str] = []
    enabled = bool(broker.config.get("delete.topic.enable"))
    for name, tid in wanted:
        r = _Result(name=name, topic_id=tid or ZERO, error_code=0, error_message=None)
        results.append(r)
        info = (
            broker.metadata_store.by_id(tid)
            if tid is not None
            else broker.metadata_store.get(name or "")
        )
        if not ctx.authorize(
            AclOperation.DELETE, ResourceType.TOPIC, info.name if info is not None else name or ""
        ):
            r.error_code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            r.error_message = "Authorization failed."
            continue
        if info is None:
            r.error_code = int(
                ErrorCode.UNKNOWN_TOPIC_ID
                if tid is not None
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            continue
        r.name, r.topic_id = info.name, info.topic_id
        if not enabled:
            r.error_code = int(ErrorCode.TOPIC_DELETION_DISABLED)
            continue
        if info.internal:
            r.error_code = int(ErrorCode.INVALID_TOPIC_EXCEPTION)
            r.error_message = "internal topics cannot be deleted"
            continue
        try:
            broker.delete_topic(info.name)
            deleted.append(info.name)
        except Exception as exc:
            log.exception("deleting topic %s failed", info.name)
            r.error_code = int(getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR))
            r.error_message = str(exc)
    if deleted and broker.zk_broker is not None:
        cache = broker.metadata_cache
        deadline = time.monotonic() + max(request.timeout_ms, 0) / 1000
        while any(cache.topic(n) is not None for n in deleted) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        # as Kafka's DelayedDeleteTopics: a topic still there when the timeout passed (its deletion
        # may be held back, e.g. by a partition reassignment) is REQUEST_TIMED_OUT; it goes later
        for r in results:
            if r.error_code == 0 and r.name in deleted and cache.topic(r.name) is not None:
                r.error_code = int(ErrorCode.REQUEST_TIMED_OUT)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
