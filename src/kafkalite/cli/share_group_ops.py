"""What `kafkalite groups` does for KIP-932 share groups over the Kafka protocol: ShareGroupDescribe, the
share-partition start offsets and their lag, and resetting or deleting them (no printing, no argparse).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.cli.group_ops import (
    COORDINATOR_ERRORS,
    LATEST,
    TP,
    Cluster,
    Member,
    list_offsets,
    retrying,
)
from kafkalite.cli.offset_resets import OffsetReset, ResetSpec, choose_partitions, plan_new_offsets
from kafkalite.cli.wire import CliError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_admin import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
)
from kafkalite.protocol.messages.share_groups import ShareGroupDescribeRequest


@dataclass
class ShareOffsets:
    topic: str
    partition: int
    start_offset: int  # the share-partition start offset; -1: never initialized
    log_end: int | None  # None: the partition could not be read
    broker_lag: int = -1  # DescribeShareGroupOffsets v1: not yet acknowledged or archived
    in_flight_records: int = -1  # kafkalite's tagged field: fetched and not yet finished

    @property
    def lag(self) -> int | None:
        if self.broker_lag >= 0:
            return self.broker_lag
        # a broker without v1 (Kafka 4.1): the log end minus the start offset, an upper bound
        if self.start_offset < 0 or self.log_end is None:
            return None
        return max(self.log_end - self.start_offset, 0)

    @property
    def in_flight(self) -> int | None:
        return self.in_flight_records if self.in_flight_records >= 0 else None


@dataclass
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[Member]
    offsets: list[ShareOffsets] = field(default_factory=list)


def _share_describe_raw(cluster: Cluster, group: str) -> Any:
    """ShareGroupDescribe's answer for `group`, or None when it is not a share group."""
    cls = ShareGroupDescribeRequest

    def call() -> tuple[int, Any]:
        c = cluster.coordinator(group)
        if 77 not in c.versions:  # a broker without share groups
            return 0, None
        d = c.send(cls(group_ids=[group], include_authorized_operations=False)).groups[0]
        if d.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return 0, None
        return d.error_code, d

    return retrying(call, f"describe share group {group}")


def is_share_group(cluster: Cluster, group: str) -> bool:
    return _share_describe_raw(cluster, group) is not None


def share_start_offsets(cluster: Cluster, group: str, tps: list[TP] | None = None) -> dict[TP, int]:
    """DescribeShareGroupOffsets: each share-partition's start offset (-1 when never initialized),
    of `tps` or of every partition the group has state for."""
    return {tp: p.start_offset for tp, p in share_offsets_described(cluster, group, tps).items()}


def share_offsets_described(
    cluster: Cluster, group: str, tps: list[TP] | None = None
) -> dict[TP, Any]:
    """DescribeShareGroupOffsets' per-partition answers (start offset, and from v1 the lag and
    kafkalite's in-flight count), of `tps` or of every partition the group has state for."""
    cls = DescribeShareGroupOffsetsRequest
    g_cls = cls.DescribeShareGroupOffsetsRequestGroup
    by_topic: dict[str, list[int]] = {}
    for t, p in tps or []:
        by_topic.setdefault(t, []).append(p)
    topics = (
        None
        if tps is None
        else [
            g_cls.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in by_topic.items()
        ]
    )
    req = cls(groups=[g_cls(group_id=group, topics=topics)])

    def call() -> tuple[int, Any]:
        g = cluster.coordinator(group).send(req).groups[0]
        return g.error_code, g.topics

    out: dict[TP, Any] = {}
    for t in retrying(call, f"start offsets of share group {group}"):
        for p in t.partitions:
            if p.error_code:
                raise CliError(
                    f"start offset of {t.topic_name}-{p.partition_index}: "
                    f"{ErrorCode.name_of(p.error_code)}"
                )
            out[(t.topic_name, p.partition_index)] = p
    return out


def describe_share_group(cluster: Cluster, group: str) -> ShareGroupDescription | None:
    """State, epochs, members with their assignments, and per partition the start offset, log end and
    lag; None when `group` is not a share group."""
    d = _share_describe_raw(cluster, group)
    if d is None:
        return None
    members = [
        Member(
            m.member_id,
            None,
            m.client_id,
            m.client_host,
            sorted((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions),
        )
        for m in d.members
    ]
    desc = ShareGroupDescription(
        group, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name, members
    )
    found = share_offsets_described(cluster, group)
    assigned = {tp for m in members for tp in m.assignment}
    missing = sorted(assigned - set(found))
    if missing:
        found.update(share_offsets_described(cluster, group, missing))
    tps = sorted(found)
    ends = list_offsets(cluster, tps, LATEST, strict=False)
    desc.offsets = [
        ShareOffsets(
            t,
            p,
            found[(t, p)].start_offset,
            ends.get((t, p)),
            getattr(found[(t, p)], "lag", -1),
            getattr(found[(t, p)], "in_flight_records", -1),
        )
        for t, p in tps
    ]
    return desc


def plan_share_reset(
    cluster: Cluster,
    group: str,
    topics: list[tuple[str, list[int] | None]] | None,
    spec: ResetSpec,
    warn: Callable[[str], None] = lambda msg: print(f"warning: {msg}", file=sys.stderr),
) -> tuple[str, list[OffsetReset]]:
    """The share group's state and the start offsets it would get; refused (CliError) unless the
    group is Empty, as Kafka does. `topics=None` means every partition with a start offset."""
    d = _share_describe_raw(cluster, group)
    state = str(d.group_state) if d is not None else "Dead"
    if d is not None and d.members:
        raise CliError(
            f"start offsets of share group {group!r} can only be reset while it is Empty, "
            f"but it has {len(d.members)} member(s): stop its consumers first"
        )
    current = (
        {tp: o for tp, o in share_start_offsets(cluster, group).items() if o >= 0}
        if d is not None
        else {}
    )
    tps = choose_partitions(
        cluster,
        topics,
        current,
        f"share group {group!r} has no start offsets; name the topics with --topic",
    )
    return state, plan_new_offsets(cluster, group, tps, current, spec, warn, "start offset")


def execute_share_reset(cluster: Cluster, group: str, plan: list[OffsetReset]) -> None:
    """AlterShareGroupOffsets with the planned start offsets."""
    cls = AlterShareGroupOffsetsRequest
    t_cls = cls.AlterShareGroupOffsetsRequestTopic
    by_topic: dict[str, list[OffsetReset]] = {}
    for r in plan:
        by_topic.setdefault(r.topic, []).append(r)
    req = cls(
        group_id=group,
        topics=[
            t_cls(
                topic_name=t,
                partitions=[
                    t_cls.AlterShareGroupOffsetsRequestPartition(
                        partition_index=r.partition, start_offset=r.new
                    )
                    for r in rs
                ],
            )
            for t, rs in by_topic.items()
        ],
    )

    def call() -> tuple[int, Any]:
        resp = cluster.coordinator(group).send(req, version=0)
        if resp.error_code in COORDINATOR_ERRORS:
            return resp.error_code, None
        return 0, resp

    resp = retrying(call, f"alter start offsets of share group {group}")
    if resp.error_code:
        raise CliError(_share_group_error(group, resp.error_code, resp.error_message))
    errors = [
        f"{t.topic_name}-{p.partition_index}: {ErrorCode.name_of(p.error_code)}"
        for t in resp.responses
        for p in t.partitions
        if p.error_code
    ]
    if errors:
        raise CliError(f"alter start offsets of share group {group!r} failed: {', '.join(errors)}")


def delete_share_offsets(cluster: Cluster, group: str, topics: list[str]) -> dict[str, ErrorCode]:
    """DeleteShareGroupOffsets: the broker's error code per topic (a group-level error raises)."""
    cls = DeleteShareGroupOffsetsRequest
    req = cls(
        group_id=group,
        topics=[cls.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics],
    )

    def call() -> tuple[int, Any]:
        resp = cluster.coordinator(group).send(req, version=0)
        if resp.error_code in COORDINATOR_ERRORS:
            return resp.error_code, None
        return 0, resp

    resp = retrying(call, f"delete start offsets of share group {group}")
    if resp.error_code:
        raise CliError(_share_group_error(group, resp.error_code, resp.error_message))
    return {t.topic_name: ErrorCode(t.error_code) for t in resp.responses}


def _share_group_error(group: str, code: int, message: str | None) -> str:
    if code == ErrorCode.NON_EMPTY_GROUP:
        return (
            f"share group {group!r} has active members (NON_EMPTY_GROUP): stop its consumers first"
        )
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return f"share group {group!r} does not exist (GROUP_ID_NOT_FOUND)"
    return f"share group {group!r}: {ErrorCode.name_of(code)}" + (
        f" ({message})" if message else ""
    )
