"""kafkalite's offset reset for the console (POST .../consumer-groups/{group_id}/reset-offsets): new
offsets planned as kafka-consumer-groups does, committed through the group coordinator's commit path.
"""

from __future__ import annotations

from aiohttp import web

from kafkalite.broker.apis.data.list_offsets import lookup
from kafkalite.cluster.partition import Partition
from kafkalite.coordinator.types import OffsetCommitPartition, TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.web.rest._base import (
    RestError,
    bad_request,
    broker_of,
    cluster_id,
    json_body,
    not_found,
    ok,
    require,
)
from kafkalite.web.rest.groups import coordinator_of, describe, raise_group_error

RESET_MODES = ("earliest", "latest", "offset", "timestamp")
INACTIVE_STATES = ("EMPTY", "DEAD")


def _new_offset(part: Partition, mode: str, offset: int, timestamp: int) -> int:
    """The offset a reset moves to, clamped to [log start, high watermark] as kafka-consumer-groups does."""
    start, end = part.log_start_offset, part.high_watermark
    if mode == "earliest":
        return int(start)
    if mode == "latest":
        return int(end)
    if mode == "offset":
        return int(min(max(offset, start), end))
    _, found = lookup(part, timestamp)
    return int(found) if found >= 0 else int(end)


async def reset_offsets(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    gid = request.match_info["group_id"]
    body = await json_body(request)
    topic_name = body.get("topic")
    if not isinstance(topic_name, str) or not topic_name:
        raise bad_request("Missing required field: topic")
    mode = body.get("to")
    if mode not in RESET_MODES:
        raise bad_request(f"Field to must be one of {', '.join(RESET_MODES)}")
    offset = body.get("offset")
    timestamp = body.get("timestamp")
    if mode == "offset" and (isinstance(offset, bool) or not isinstance(offset, int)):
        raise bad_request("to=offset needs an integer offset")
    if mode == "timestamp" and (isinstance(timestamp, bool) or not isinstance(timestamp, int)):
        raise bad_request("to=timestamp needs an integer timestamp (epoch milliseconds)")
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise bad_request("Field dry_run must be a boolean")
    require(
        request, AclOperation.READ, ResourceType.GROUP, gid, ErrorCode.GROUP_AUTHORIZATION_FAILED
    )
    broker = broker_of(request)
    topic = broker.metadata_cache.topic(topic_name)
    if topic is None:
        raise not_found(f"This server does not host this topic-partition. (topic {topic_name})")
    require(
        request,
        AclOperation.READ,
        ResourceType.TOPIC,
        topic_name,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    )
    wanted = body.get("partitions")
    if wanted is None:
        pids = sorted(p.partition for p in topic.partitions)
    elif isinstance(wanted, list) and all(
        isinstance(p, int) and not isinstance(p, bool) for p in wanted
    ):
        pids = sorted(set(wanted))
        missing = [p for p in pids if topic.partition(p) is None]
        if missing:
            raise not_found(
                f"This server does not host this topic-partition. ({topic_name}-{missing[0]})"
            )
    else:
        raise bad_request("Field partitions must be a list of partition ids")
    coord = coordinator_of(request)
    try:
        g = describe(request, gid)
        state = g.state
    except RestError as exc:
        if exc.status != 404:
            raise
        state = "DEAD"  # no such group yet: a reset creates its offsets, as Kafka allows
    if state not in INACTIVE_STATES:
        raise RestError.kafka(
            ErrorCode.NON_EMPTY_GROUP,
            f"Assignments can only be reset if the group '{gid}' is inactive, but the current "
            f"state is {state}.",
        )
    current = {
        p.partition: p.offset
        for p in coord.fetch_offsets(gid, [TopicPartition(topic_name, i) for i in pids]).partitions
    }
    rows = []
    commits = []
    for pid in pids:
        part = broker.replica_manager.get_partition(topic_name, pid)
        if part is None:
            raise RestError(
                421,
                f"NOT_LEADER_OR_FOLLOWER: broker {broker.broker_id} hosts no replica of "
                f"{topic_name}-{pid}; ask the HTTP listener of a broker that does",
            )
        new = _new_offset(
            part,
            str(mode),
            offset if isinstance(offset, int) else 0,
            timestamp if isinstance(timestamp, int) else 0,
        )
        cur = current.get(pid, -1)
        rows.append(
            {
                "topic_name": topic_name,
                "partition_id": pid,
                "current_offset": cur if cur >= 0 else None,
                "new_offset": new,
            }
        )
        commits.append(OffsetCommitPartition(topic=topic_name, partition=pid, offset=new))
    if not dry_run and commits:
        result = await coord.commit_offsets(gid, commits)
        for code in result.values():
            if code != ErrorCode.NO_ERROR:
                raise_group_error(request, coord, gid, code)
    return ok(
        {
            "kind": "KafkaConsumerGroupOffsetReset",
            "cluster_id": cid,
            "consumer_group_id": gid,
            "data": rows,
            "dry_run": dry_run,
        }
    )


def add_routes(app: web.Application) -> None:
    app.router.add_post(
        "/v3/clusters/{cluster_id}/consumer-groups/{group_id}/reset-offsets", reset_offsets
    )
