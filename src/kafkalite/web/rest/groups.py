"""REST v3 consumer groups (classic and KIP-848): state, assignor, members and their assignments,
per-partition lag and its summary, from this broker's group coordinator and logs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aiohttp import web

from kafkalite.coordinator import GroupCoordinator
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.groups import decode_assignment
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.web.rest._base import (
    RestError,
    authorize,
    broker_of,
    cluster_id,
    crn,
    listing,
    not_found,
    ok,
    related,
    require,
    resource,
    url,
)

CONSUMER_GROUP_TYPES = ("classic", "consumer")


@dataclass
class Member:
    consumer_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    assignments: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Group:
    group_id: str
    group_type: str  # CLASSIC or CONSUMER
    state: str
    assignor: str
    coordinator: int
    protocol_type: str = "consumer"  # "" for a group that only commits offsets (assign() users)
    members: list[Member] = field(default_factory=list)

    @property
    def is_simple(self) -> bool:
        """As Kafka's AdminClient decides isSimpleConsumerGroup: a classic group with no protocol type
        (offsets committed by a consumer that never joined). An empty group keeps its protocol type."""
        return self.group_type == "CLASSIC" and not self.protocol_type

    def owner_of(self, topic: str, partition: int) -> Member | None:
        for m in self.members:
            if (topic, partition) in m.assignments:
                return m
        return None


def state_name(state: str) -> str:
    """Kafka's group state as the REST Proxy spells it: PreparingRebalance -> PREPARING_REBALANCE."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", state).upper() or "UNKNOWN"


def coordinator_of(request: web.Request) -> GroupCoordinator:
    coord = broker_of(request).groups.coordinator
    if coord is None:
        raise RestError.kafka(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is starting"
        )
    return coord


def _coordinator_broker(request: web.Request, coord: GroupCoordinator, group_id: str) -> int:
    broker = broker_of(request)
    p = broker.metadata_cache.partition("__consumer_offsets", coord.partition_for(group_id))
    return p.leader if p is not None else broker.broker_id


def raise_group_error(request: web.Request, coord: GroupCoordinator, gid: str, code: int) -> None:
    if code == ErrorCode.NOT_COORDINATOR:
        owner = _coordinator_broker(request, coord, gid)
        raise RestError.kafka(
            code,
            f"group {gid} is coordinated by broker {owner}; ask its HTTP listener "
            f"(this is broker {broker_of(request).broker_id})",
        )
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        raise not_found(f"Consumer group {gid} cannot be found.")
    raise RestError.kafka(code)


def describe(request: web.Request, gid: str) -> Group:
    """The group as REST v3 shows it; 404 when it does not exist (or is a share group)."""
    require(
        request,
        AclOperation.DESCRIBE,
        ResourceType.GROUP,
        gid,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
    )
    coord = coordinator_of(request)
    owner = _coordinator_broker(request, coord, gid)
    classic = coord.describe_groups([gid])[0]
    if classic.error == ErrorCode.NO_ERROR:
        if classic.state == "Dead":
            raise not_found(f"Consumer group {gid} cannot be found.")
        g = Group(
            gid,
            "CLASSIC",
            state_name(classic.state),
            classic.protocol_data,
            owner,
            classic.protocol_type,
        )
        for m in classic.members:
            parts: list[tuple[str, int]] = []
            if classic.protocol_type == "consumer" and m.assignment:
                try:
                    a = decode_assignment(m.assignment)
                    parts = [(tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions]
                except DecodeError:
                    parts = []
            g.members.append(
                Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, sorted(parts))
            )
        return g
    if classic.error != ErrorCode.GROUP_ID_NOT_FOUND:
        raise_group_error(request, coord, gid, classic.error)
    d = coord.describe_consumer_groups([gid])[0]
    if d.error != ErrorCode.NO_ERROR:
        raise_group_error(request, coord, gid, d.error)
    cache = broker_of(request).metadata_cache
    g = Group(gid, "CONSUMER", state_name(d.state), d.assignor, owner)
    for cm in d.members:
        parts = []
        for tid, ps in cm.assignment.items():
            t = cache.topic_by_id(tid)
            if t is not None:
                parts += [(t.name, p) for p in ps]
        g.members.append(
            Member(cm.member_id, cm.instance_id, cm.client_id, cm.client_host, sorted(parts))
        )
    return g


def group_body(request: web.Request, cid: str, g: Group) -> dict[str, object]:
    base = ("consumer-groups", g.group_id)
    body = resource(
        "KafkaConsumerGroup", url(request, cid, *base), crn(cid, ("consumer-group", g.group_id))
    )
    body.update(
        {
            "cluster_id": cid,
            "consumer_group_id": g.group_id,
            "is_simple": g.is_simple,
            "protocol_type": g.protocol_type,  # kafkalite's: what kafka-consumer-groups shows
            "partition_assignor": g.assignor,
            "state": g.state,
            "type": g.group_type,
            "coordinator": related(url(request, cid, "brokers", g.coordinator)),
            "consumers": related(url(request, cid, *base, "consumers")),
            "lag_summary": related(url(request, cid, *base, "lag-summary")),
        }
    )
    return body


async def list_groups(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    coord = coordinator_of(request)
    listed = coord.list_groups((), CONSUMER_GROUP_TYPES)
    data = []
    for o in listed.groups:
        if not authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, o.group_id):
            continue
        try:
            data.append(group_body(request, cid, describe(request, o.group_id)))
        except RestError:
            continue  # gone, or moved, since it was listed
    return ok(listing("KafkaConsumerGroupList", url(request, cid, "consumer-groups"), data))


async def get_group(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    return ok(group_body(request, cid, describe(request, request.match_info["group_id"])))


def consumer_body(request: web.Request, cid: str, g: Group, m: Member) -> dict[str, object]:
    base = ("consumer-groups", g.group_id, "consumers", m.consumer_id)
    body = resource(
        "KafkaConsumer",
        url(request, cid, *base),
        crn(cid, ("consumer-group", g.group_id), ("consumer", m.consumer_id)),
    )
    body.update(
        {
            "cluster_id": cid,
            "consumer_group_id": g.group_id,
            "consumer_id": m.consumer_id,
            "instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "assignments": related(url(request, cid, *base, "assignments")),
        }
    )
    return body


async def list_consumers(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    g = describe(request, request.match_info["group_id"])
    data = [consumer_body(request, cid, g, m) for m in g.members]
    self_url = url(request, cid, "consumer-groups", g.group_id, "consumers")
    return ok(listing("KafkaConsumerList", self_url, data))


def _member(request: web.Request, g: Group) -> Member:
    mid = request.match_info["consumer_id"]
    for m in g.members:
        if m.consumer_id == mid:
            return m
    raise not_found(f"Consumer {mid} cannot be found in group {g.group_id}.")


async def get_consumer(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    g = describe(request, request.match_info["group_id"])
    return ok(consumer_body(request, cid, g, _member(request, g)))


async def list_assignments(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    g = describe(request, request.match_info["group_id"])
    m = _member(request, g)
    base = ("consumer-groups", g.group_id, "consumers", m.consumer_id, "assignments")
    data = []
    for topic, p in m.assignments:
        body = resource(
            "KafkaConsumerAssignment",
            url(request, cid, *base, topic, "partitions", p),
            crn(
                cid,
                ("consumer-group", g.group_id),
                ("consumer", m.consumer_id),
                ("assignment", f"{topic}-{p}"),
            ),
        )
        body.update(
            {
                "cluster_id": cid,
                "consumer_group_id": g.group_id,
                "consumer_id": m.consumer_id,
                "topic_name": topic,
                "partition_id": p,
                "partition": related(url(request, cid, "topics", topic, "partitions", p)),
            }
        )
        data.append(body)
    return ok(listing("KafkaConsumerAssignmentList", url(request, cid, *base), data))


# -- lags ---------------------------------------------------------------------------------------------


@dataclass
class Lag:
    topic: str
    partition: int
    current_offset: int
    log_end_offset: int | None
    member: Member | None

    @property
    def lag(self) -> int | None:
        if self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.current_offset, 0)


def lags(request: web.Request, g: Group) -> list[Lag]:
    """Committed offset, log end (the high watermark of this broker's replica) and lag of every
    partition the group has an offset for and whose topic one may describe."""
    coord = coordinator_of(request)
    fetched = coord.fetch_offsets(g.group_id, None)
    if fetched.error:
        raise_group_error(request, coord, g.group_id, fetched.error)
    rm = broker_of(request).replica_manager
    out: list[Lag] = []
    for p in sorted(fetched.partitions, key=lambda p: (p.topic, p.partition)):
        if p.offset < 0 or not authorize(
            request, AclOperation.DESCRIBE, ResourceType.TOPIC, p.topic
        ):
            continue
        part = rm.get_partition(p.topic, p.partition)
        end = part.high_watermark if part is not None else None
        out.append(Lag(p.topic, p.partition, p.offset, end, g.owner_of(p.topic, p.partition)))
    return out


def lag_body(request: web.Request, cid: str, g: Group, lag: Lag) -> dict[str, object]:
    body = resource(
        "KafkaConsumerLag",
        url(
            request,
            cid,
            "consumer-groups",
            g.group_id,
            "lags",
            lag.topic,
            "partitions",
            lag.partition,
        ),
        crn(cid, ("consumer-group", g.group_id), ("lag", f"{lag.topic}-{lag.partition}")),
    )
    m = lag.member
    body.update(
        {
            "cluster_id": cid,
            "consumer_group_id": g.group_id,
            "topic_name": lag.topic,
            "partition_id": lag.partition,
            "current_offset": lag.current_offset,
            "log_end_offset": lag.log_end_offset,
            "lag": lag.lag,
            "consumer_id": m.consumer_id if m else "",
            "instance_id": m.instance_id if m else None,
            "client_id": m.client_id if m else "",
        }
    )
    return body


async def list_lags(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    g = describe(request, request.match_info["group_id"])
    data = [lag_body(request, cid, g, lag) for lag in lags(request, g)]
    self_url = url(request, cid, "consumer-groups", g.group_id, "lags")
    return ok(listing("KafkaConsumerLagList", self_url, data))


async def get_lag(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    g = describe(request, request.match_info["group_id"])
    topic = request.match_info["topic_name"]
    try:
        pid = int(request.match_info["partition_id"])
    except ValueError:
        raise not_found("No such partition") from None
    for lag in lags(request, g):
        if lag.topic == topic and lag.partition == pid:
            return ok(lag_body(request, cid, g, lag))
    raise not_found(f"Consumer group {g.group_id} has no offset for {topic}-{pid}.")


async def lag_summary(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    g = describe(request, request.match_info["group_id"])
    all_lags = [lag for lag in lags(request, g) if lag.lag is not None]
    worst = max(all_lags, key=lambda lag: lag.lag or 0, default=None)
    body = resource(
        "KafkaConsumerGroupLagSummary",
        url(request, cid, "consumer-groups", g.group_id, "lag-summary"),
        crn(cid, ("consumer-group", g.group_id), ("lag-summary", "")),
    )
    m = worst.member if worst else None
    body.update(
        {
            "cluster_id": cid,
            "consumer_group_id": g.group_id,
            "max_lag_consumer_id": m.consumer_id if m else "",
            "max_lag_instance_id": m.instance_id if m else None,
            "max_lag_client_id": m.client_id if m else "",
            "max_lag_topic_name": worst.topic if worst else "",
            "max_lag_partition_id": worst.partition if worst else 0,
            "max_lag": (worst.lag or 0) if worst else 0,
            "total_lag": sum(lag.lag or 0 for lag in all_lags),
            "max_lag_consumer": related(
                url(request, cid, "consumer-groups", g.group_id, "consumers", m.consumer_id)
            )
            if m
            else None,
            "max_lag_partition": related(
                url(request, cid, "topics", worst.topic, "partitions", worst.partition)
            )
            if worst
            else None,
        }
    )
    return ok(body)


def add_routes(app: web.Application) -> None:
    r = app.router
    groups = "/v3/clusters/{cluster_id}/consumer-groups"
    group = groups + "/{group_id}"
    r.add_get(groups, list_groups)
    r.add_get(group, get_group)
    r.add_get(group + "/consumers", list_consumers)
    r.add_get(group + "/consumers/{consumer_id}", get_consumer)
    r.add_get(group + "/consumers/{consumer_id}/assignments", list_assignments)
    r.add_get(group + "/lags", list_lags)
    r.add_get(group + "/lags/{topic_name}/partitions/{partition_id}", get_lag)
    r.add_get(group + "/lag-summary", lag_summary)
