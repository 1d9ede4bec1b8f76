"""What `kafkalite groups` does over the Kafka protocol: the Cluster connections, listing, describing and deleting
groups, committed offsets and log ends (no printing, no argparse; offset resets are in cli.offset_resets).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.consumer_groups import ConsumerGroupDescribeRequest
from kafkalite.protocol.messages.groups import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    decode_assignment,
)
from kafkalite.protocol.messages.offsets import ListOffsetsRequest, OffsetFetchRequest

TP = tuple[str, int]

# the states a classic group can be in (ListGroups state filter, Kafka's spelling)
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
LATEST, EARLIEST = -1, -2
_RETRIES = 20
_RETRY_SLEEP_S = 0.25
COORDINATOR_ERRORS = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}


def _name(code: int) -> str:
    return ErrorCode.name_of(code)


# ---------------------------------------------------------------------------
# connections: the bootstrap broker plus coordinators and partition leaders, opened on demand


class Cluster:
    """The bootstrap connection and, when the cluster has several brokers, connections to the others."""

    def __init__(self, bootstrap: WireClient) -> None:
        self.bootstrap = bootstrap
        self._conns: dict[tuple[str, int], WireClient] = {
            (bootstrap.host, bootstrap.port): bootstrap
        }
        self._nodes: dict[int, tuple[str, int]] | None = None

    def close(self) -> None:
        for c in self._conns.values():
            if c is not self.bootstrap:
                c.close()

    def connect(self, host: str, port: int) -> WireClient:
        c = self._conns.get((host, port))
        if c is None:
            c = self._conns[(host, port)] = WireClient(
                f"{host}:{port}", timeout=self.bootstrap.timeout
            )
        return c

    def nodes(self) -> dict[int, tuple[str, int]]:
        if self._nodes is None:
            md = self.bootstrap.metadata([])
            self._nodes = {b.node_id: (b.host, b.port) for b in md.brokers}
        return self._nodes

    def node(self, node_id: int) -> WireClient:
        addr = self.nodes().get(node_id)
        if addr is None:
            raise CliError(f"broker {node_id} is not in the cluster metadata")
        return self.connect(*addr)

    def coordinator(self, group: str) -> WireClient:
        """FindCoordinator for `group`, retried while the coordinator is loading or moving."""
        cls = FindCoordinatorRequest
        v = self.bootstrap.version_for(10)
        code, msg = 0, None
        for _ in range(_RETRIES):
            if v >= 4:
                r = self.bootstrap.send(cls(key_type=0, coordinator_keys=[group]), version=v)
                found = r.coordinators[0]
                code, msg, host, port = (
                    found.error_code,
                    found.error_message,
                    found.host,
                    found.port,
                )
            else:
                r = self.bootstrap.send(cls(key=group, key_type=0), version=v)
                code, host, port = r.error_code, r.host, r.port
                msg = r.error_message if v >= 1 else None
            if code == ErrorCode.NO_ERROR:
                return self.connect(host, port)
            if code not in COORDINATOR_ERRORS:
                break
            time.sleep(_RETRY_SLEEP_S)
        raise CliError(
            f"cannot find the coordinator of group {group!r}: {_name(code)}"
            + (f" ({msg})" if msg else "")
        )


def retrying(call: Callable[[], tuple[int, Any]], what: str) -> Any:
    """Run `call` (returning (error code, value)) again while the coordinator is loading."""
    code = 0
    for _ in range(_RETRIES):
        code, value = call()
        if code == ErrorCode.NO_ERROR:
            return value
        if code not in COORDINATOR_ERRORS:
            break
        time.sleep(_RETRY_SLEEP_S)
    raise CliError(f"{what}: {_name(code)}")


# ---------------------------------------------------------------------------
# what the commands compute (plain data, printed by the command functions below)


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TP] = field(default_factory=list)


@dataclass
class PartitionOffsets:
    topic: str
    partition: int
    committed: int | None  # None: the group has no commit for this partition
    log_end: int | None  # None: the partition could not be read (deleted topic, no leader)
    member: Member | None = None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed, 0)


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[Member]
    offsets: list[PartitionOffsets]
    # KIP-848 consumer groups: their epochs and server-side assignor
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    assignor: str | None = None

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = ""  # classic, consumer or share (ListGroups v5+)


def list_groups(cluster: Cluster, states: Iterable[str] = ()) -> list[ListedGroup]:
    """Every group of every broker, optionally only those in `states` (Kafka's state names)."""
    wanted = [_state_name(s) for s in states]
    out: dict[str, ListedGroup] = {}
    cls = ListGroupsRequest
    for node_id in sorted(cluster.nodes()):
        c = cluster.node(node_id)
        v = c.version_for(16)
        req = cls(states_filter=wanted if v >= 4 else [], types_filter=[])

        def call(c: WireClient = c, req: Any = req, v: int = v) -> tuple[int, Any]:
            r = c.send(req, version=v)
            return r.error_code, r.groups

        for g in retrying(call, f"list groups of broker {node_id}"):
            state = g.group_state if v >= 4 else describe_state(cluster, g.group_id)
            if wanted and state not in wanted:
                continue
            group_type = g.group_type if v >= 5 else ""
            out[g.group_id] = ListedGroup(g.group_id, g.protocol_type, state, group_type)
    return sorted(out.values(), key=lambda g: g.group_id)


def _state_name(s: str) -> str:
    for known in GROUP_STATES:
        if known.lower() == s.strip().lower():
            return known
    raise CliError(f"unknown group state {s!r}; valid states: {', '.join(GROUP_STATES)}")


def _describe_raw(cluster: Cluster, group: str) -> Any:
    """DescribeGroups' answer; a KIP-848 group (which it reports as GROUP_ID_NOT_FOUND) is
    described with ConsumerGroupDescribe instead."""
    cls = DescribeGroupsRequest

    def call() -> tuple[int, Any]:
        r = cluster.coordinator(group).send(
            cls(groups=[group], include_authorized_operations=False)
        )
        d = r.groups[0]
        if d.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return 0, None
        return d.error_code, d

    return retrying(call, f"describe group {group}")


def _describe_consumer_group(cluster: Cluster, group: str) -> Any:
    cls = ConsumerGroupDescribeRequest

    def call() -> tuple[int, Any]:
        r = cluster.coordinator(group).send(
            cls(group_ids=[group], include_authorized_operations=False)
        )
        d = r.groups[0]
        return d.error_code, d

    return retrying(call, f"describe consumer group {group}")


def describe_state(cluster: Cluster, group: str) -> str:
    d = _describe_raw(cluster, group)
    if d is None:
        d = _describe_consumer_group(cluster, group)
    return str(d.group_state)


def _assignment(protocol_type: str, blob: bytes | None) -> list[TP]:
    if protocol_type != "consumer" or not blob:
        return []
    try:
        a = decode_assignment(blob)
    except DecodeError:
        return []
    return sorted((t.topic, p) for t in a.assigned_partitions for p in t.partitions)


def committed_offsets(cluster: Cluster, group: str, tps: list[TP] | None = None) -> dict[TP, int]:
    """The group's committed offsets (all of them, or of `tps`); partitions without a commit are left out."""
    cc = cluster.coordinator(group)
    cls = OffsetFetchRequest
    v = cc.version_for(9)
    if v < 2:
        raise CliError("the broker's OffsetFetch is too old (v2+ needed)")
    by_topic: dict[str, list[int]] = {}
    for t, p in tps or []:
        by_topic.setdefault(t, []).append(p)
    if v >= 8:
        g_cls = cls.OffsetFetchRequestGroup
        topics = (
            None
            if tps is None
            else [
                g_cls.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in by_topic.items()
            ]
        )
        req = cls(groups=[g_cls(group_id=group, topics=topics)], require_stable=False)
    else:
        old_topics = (
            None
            if tps is None
            else [
                cls.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                for t, ps in by_topic.items()
            ]
        )
        req = cls(group_id=group, topics=old_topics, require_stable=False)

    def call() -> tuple[int, Any]:
        r = cluster.coordinator(group).send(req, version=v)
        if v >= 8:
            return r.groups[0].error_code, r.groups[0].topics
        return r.error_code, r.topics

    out: dict[TP, int] = {}
    for t in retrying(call, f"committed offsets of group {group}"):
        for p in t.partitions:
            if p.error_code:
                raise CliError(
                    f"committed offset of {t.name}-{p.partition_index}: {_name(p.error_code)}"
                )
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = p.committed_offset
    return out


def topic_partitions(cluster: Cluster, topics: list[str]) -> dict[str, dict[int, int]]:
    """partition -> leader node of each topic; a clear error for a topic that does not exist."""
    if not topics:
        return {}
    md = cluster.bootstrap.metadata(sorted(set(topics)))
    out: dict[str, dict[int, int]] = {}
    for t in md.topics:
        if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise CliError(f"topic {t.name!r} does not exist")
        if t.error_code:
            raise CliError(f"topic {t.name}: {_name(t.error_code)}")
        out[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
    return out


def list_offsets(
    cluster: Cluster, tps: Iterable[TP], timestamp: int, *, strict: bool = True
) -> dict[TP, int | None]:
    """ListOffsets at `timestamp` (-1 latest, -2 earliest, or epoch ms) from each partition's leader.
    With `strict=False` partitions that cannot be read answer None instead of an error."""
    wanted = sorted(set(tps))
    out: dict[TP, int | None] = dict.fromkeys(wanted)
    try:
        leaders = topic_partitions(cluster, [t for t, _ in wanted])
    except CliError:
        if strict:
            raise
        leaders = {}
    by_leader: dict[int, list[TP]] = {}
    for t, p in wanted:
        leader = leaders.get(t, {}).get(p, -1)
        if leader < 0:
            if strict:
                raise CliError(f"partition {t}-{p} does not exist or has no leader")
            continue
        by_leader.setdefault(leader, []).append((t, p))
    cls = ListOffsetsRequest
    for leader, parts in by_leader.items():
        c = cluster.node(leader)
        v = c.version_for(2)
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        req = cls(
            replica_id=-1,
            isolation_level=0,
            topics=[
                cls.ListOffsetsTopic(
                    name=t,
                    partitions=[
                        cls.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=p, timestamp=timestamp
                        )
                        for p in ps
                    ],
                )
                for t, ps in by_topic.items()
            ],
        )
        for rt in c.send(req, version=v).topics:
            for rp in rt.partitions:
                if rp.error_code:
                    if strict:
                        raise CliError(
                            f"offsets of {rt.name}-{rp.partition_index}: {_name(rp.error_code)}"
                        )
                    continue
                off = (rp.old_style_offsets or [-1])[0] if v == 0 else rp.offset
                out[(rt.name, rp.partition_index)] = int(off)
    return out


def describe_group(cluster: Cluster, group: str) -> GroupDescription:
    """State, members with their assignments, and committed offset / log end / lag of each partition."""
    d = _describe_raw(cluster, group)
    if d is None:
        c = _describe_consumer_group(cluster, group)
        members = [
            Member(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                sorted(
                    (t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
                ),
            )
            for m in c.members
        ]
        desc = GroupDescription(
            group,
            c.group_state,
            "consumer",
            "",
            members,
            [],
            "consumer",
            c.group_epoch,
            c.assignment_epoch,
            c.assignor_name,
        )
    else:
        members = [
            Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                _assignment(d.protocol_type, m.member_assignment),
            )
            for m in d.members
        ]
        desc = GroupDescription(group, d.group_state, d.protocol_type, d.protocol_data, members, [])
    if not desc.exists:
        return desc
    committed = committed_offsets(cluster, group)
    owner = {tp: m for m in members for tp in m.assignment}
    tps = sorted(set(committed) | set(owner))
    ends = list_offsets(cluster, tps, LATEST, strict=False)
    desc.offsets = [
        PartitionOffsets(t, p, committed.get((t, p)), ends.get((t, p)), owner.get((t, p)))
        for t, p in tps
    ]
    return desc


def delete_groups(cluster: Cluster, groups: list[str]) -> dict[str, ErrorCode]:
    """DeleteGroups at each group's coordinator: the broker's error code per group."""
    cls = DeleteGroupsRequest
    out: dict[str, ErrorCode] = {}
    for g in dict.fromkeys(groups):

        def call(g: str = g) -> tuple[int, Any]:
            r = cluster.coordinator(g).send(cls(groups_names=[g])).results[0]
            code = r.error_code
            return (code, code) if code in COORDINATOR_ERRORS else (0, code)

        out[g] = ErrorCode(retrying(call, f"delete group {g}"))
    return out
