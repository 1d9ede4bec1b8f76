"""Committed offsets and group administration: OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups,
ListGroups, DeleteGroups, and the periodic `offsets.retention.minutes` cleanup.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafkalite.coordinator import records as rec
from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.group import GroupMetadata
from kafkalite.coordinator.runtime import CoordinatorRuntime, log, offset_store_error
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import (
    UNKNOWN_MEMBER_ID,
    CoordinatorRecord,
    GroupDescription,
    GroupOverview,
    ListGroupsResult,
    MemberDescription,
    OffsetAndMetadata,
    OffsetCommitPartition,
    OffsetDeleteResult,
    OffsetFetchPartition,
    OffsetFetchResult,
    TopicPartition,
)
from kafkalite.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState

CommitResult = dict[TopicPartition, ErrorCode]


class Offsets(CoordinatorRuntime):
    """Offset storage and the administrative group APIs."""

    # ================================================================== OffsetCommit

    def commit_offsets(
        self,
        group_id: str,
        partitions: Sequence[OffsetCommitPartition],
        *,
        member_id: str = UNKNOWN_MEMBER_ID,
        generation_id: int = -1,
        group_instance_id: str | None = None,
    ) -> Deferred[CommitResult]:
        """OffsetCommit. Group members pass their generation; standalone consumers pass -1.
        The deferred completes once the records are appended (and replayed into the cache)."""
        d: Deferred[CommitResult] = Deferred()

        def fail(code: ErrorCode) -> Deferred[CommitResult]:
            d.complete(
                dict.fromkeys((TopicPartition(p.topic, p.partition) for p in partitions), code)
            )
            return d

        err = self._validate(group_id, allow_empty_id=True)
        if err is not None:
            return fail(err)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # a generation of a group we do not know: an old generation, reject it
                return fail(E.ILLEGAL_GENERATION)
            group = self.groups[group_id] = GroupMetadata(group_id)  # offsets-only group
        code = self._validate_commit(group, member_id, group_instance_id, generation_id)
        if code is not None:
            return fail(code)
        if group.is_(S.COMPLETING_REBALANCE):
            # the member knows the new generation but has no assignment yet
            return fail(E.REBALANCE_IN_PROGRESS)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            self._schedule_heartbeat(group.get(member_id))
        return self._store_offsets(group, partitions, d)

    def _validate_commit(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode | None:
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            # a KIP-848 group: the generation is the member's epoch
            if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID:
                member = group.consumer.members.get(member_id)
                if member is None:
                    return E.UNKNOWN_MEMBER_ID
                if generation_id != member.member_epoch:
                    return E.STALE_MEMBER_EPOCH
                return None
            return E.UNKNOWN_MEMBER_ID if group.consumer.members else None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            if group.is_static_member_fenced(group_instance_id, member_id):
                return E.FENCED_INSTANCE_ID
            if not group.has(member_id):
                return E.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
            return None
        if not group.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID  # only members may commit for a group that has members
        return None

    def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[OffsetCommitPartition],
        *,
        member_id: str = UNKNOWN_MEMBER_ID,
        generation_id: int = -1,
        group_instance_id: str | None = None,
    ) -> Deferred[CommitResult]:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and become the
        group's committed offsets only when its COMMIT marker reaches this partition."""
        d: Deferred[CommitResult] = Deferred()
        err = self._validate(group_id)
        group = self.groups.get(group_id)
        if err is None and group is None and generation_id >= 0:
            err = E.ILLEGAL_GENERATION
        if err is None and group is not None:
            err = self._validate_commit(group, member_id, group_instance_id, generation_id)
        if err is not None:
            d.complete(
                dict.fromkeys((TopicPartition(p.topic, p.partition) for p in partitions), err)
            )
            return d
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id)  # offsets-only group
        return self._store_offsets(group, partitions, d, producer=(producer_id, producer_epoch))

    def _store_offsets(
        self,
        group: GroupMetadata,
        partitions: Sequence[OffsetCommitPartition],
        d: Deferred[CommitResult],
        producer: tuple[int, int] | None = None,
    ) -> Deferred[CommitResult]:
        now = self.now()
        max_metadata = self.config.offset_metadata_max_bytes
        group_id = group.group_id
        make_record = rec.offset_commit_record
        result: CommitResult = {}
        records: list[CoordinatorRecord] = []
        written: list[TopicPartition] = []
        for p in partitions:
            tp = TopicPartition(p.topic, p.partition)
            metadata = p.metadata or ""
            if len(metadata.encode("utf-8")) > max_metadata:
                result[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            om = OffsetAndMetadata(
                p.offset,
                p.leader_epoch,
                metadata,
                p.commit_timestamp if p.commit_timestamp >= 0 else now,
                now + p.retention_ms if p.retention_ms >= 0 else None,
            )
            records.append(make_record(group_id, p.topic, p.partition, om))
            written.append(tp)
            result[tp] = E.NO_ERROR
        if not records:
            d.complete(result)
            return d
        pending = group.pending_offset_commits
        pending.update(written)

        def appended(code: ErrorCode) -> None:
            for tp in written:
                left = pending[tp] - 1
                if left > 0:
                    pending[tp] = left
                else:
                    pending.pop(tp, None)
            if code != E.NO_ERROR:
                mapped = offset_store_error(code)
                for tp in written:
                    result[tp] = mapped
            d.complete(result)

        self._write(group_id, records, appended, producer)
        return d

    # ================================================================== OffsetFetch

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
    ) -> OffsetFetchResult:
        """OffsetFetch: the given partitions (unknown ones answer -1), or all with `partitions=None`.
        With `require_stable`, a partition with an open transaction's offset answers
        UNSTABLE_OFFSET_COMMIT (the client retries until the transaction ends)."""
        err = self._validate(group_id, allow_empty_id=True)
        if err is not None:
            return OffsetFetchResult(err)
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(S.DEAD) else {}
        if partitions is None:
            return OffsetFetchResult(
                E.NO_ERROR,
                [
                    OffsetFetchPartition(
                        tp.topic, tp.partition, om.offset, om.leader_epoch, om.metadata
                    )
                    for tp, om in sorted(offsets.items())
                ],
            )
        out = []
        for tp in partitions:
            tp = TopicPartition(tp[0], tp[1])
            om = offsets.get(tp)
            if require_stable and group is not None and group.has_pending_txn_offset(tp):
                out.append(
                    OffsetFetchPartition(tp.topic, tp.partition, error=E.UNSTABLE_OFFSET_COMMIT)
                )
            elif om is None:
                out.append(OffsetFetchPartition(tp.topic, tp.partition))
            else:
                out.append(
                    OffsetFetchPartition(
                        tp.topic, tp.partition, om.offset, om.leader_epoch, om.metadata
                    )
                )
        return OffsetFetchResult(E.NO_ERROR, out)

    # ================================================================== OffsetDelete

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> Deferred[OffsetDeleteResult]:
        """OffsetDelete: any partition of an Empty group; of an active consumer group only topics no
        member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise)."""
        d: Deferred[OffsetDeleteResult] = Deferred()
        err = self._validate(group_id)
        if err is not None:
            d.complete(OffsetDeleteResult(err))
            return d
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            d.complete(OffsetDeleteResult(E.GROUP_ID_NOT_FOUND))
            return d
        tps = [TopicPartition(t[0], t[1]) for t in partitions]
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(S.EMPTY):
            eligible = tps
        elif group.protocol_type == "consumer":
            eligible = []
            for tp in tps:
                if group.is_subscribed_to_topic(tp.topic):
                    errors[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            d.complete(OffsetDeleteResult(E.NON_EMPTY_GROUP))
            return d
        for tp in eligible:
            errors[tp] = E.NO_ERROR
        records = [
            rec.offset_tombstone(group_id, tp.topic, tp.partition)
            for tp in eligible
            if tp in group.offsets
        ]
        records += self._cleanup_if_dead(group, removing=set(eligible))
        result = OffsetDeleteResult(E.NO_ERROR, {tp: errors[tp] for tp in tps})
        if not records:
            d.complete(result)
            return d

        def appended(code: ErrorCode) -> None:
            if code != E.NO_ERROR:
                mapped = offset_store_error(code)
                for tp in eligible:
                    result.partitions[tp] = mapped
            d.complete(result)

        self._write(group_id, records, appended)
        return d

    def _cleanup_if_dead(
        self, group: GroupMetadata, removing: set[TopicPartition]
    ) -> list[CoordinatorRecord]:
        """An Empty group left without offsets dies: mark it Dead and return its tombstone."""
        left = set(group.offsets) - removing
        if group.consumer is not None:
            return []  # a consumer group ends through DeleteGroups, not by running out of offsets
        if group.is_(S.EMPTY) and not left and not group.pending_offset_commits:
            group.transition_to(S.DEAD, self.now())
            return [rec.group_tombstone(group.group_id)]
        return []

    # ================================================================== DeleteGroups

    def delete_groups(self, group_ids: Sequence[str]) -> Deferred[dict[str, ErrorCode]]:
        """DeleteGroups: only Empty groups (NON_EMPTY_GROUP otherwise); offsets and metadata get tombstones."""
        d: Deferred[dict[str, ErrorCode]] = Deferred()
        result: dict[str, ErrorCode] = {}
        waiting = 0
        for gid in group_ids:
            if gid in result:
                continue
            err = self._validate(gid, allow_empty_id=True)
            group = self.groups.get(gid) if err is None else None
            if err is not None:
                result[gid] = err
            elif group is None and gid in self.share_groups:
                result[gid] = self.delete_share_group(gid)
            elif group is None or group.is_(S.DEAD):
                result[gid] = E.GROUP_ID_NOT_FOUND
            elif (group.consumer is not None and group.consumer.members) or not group.is_(S.EMPTY):
                result[gid] = E.NON_EMPTY_GROUP
            else:
                records = [
                    rec.offset_tombstone(gid, tp.topic, tp.partition) for tp in group.offsets
                ]
                records.append(rec.group_tombstone(gid))
                if group.consumer is not None:
                    records += self._consumer_group_tombstones(gid)
                group.transition_to(S.DEAD, self.now())
                result[gid] = E.NO_ERROR
                waiting += 1

                def appended(code: ErrorCode, gid: str = gid) -> None:
                    nonlocal waiting
                    if code != E.NO_ERROR:
                        result[gid] = offset_store_error(code)
                    waiting -= 1
                    if waiting == 0:
                        d.complete(result)

                self._write(gid, records, appended)
        if waiting == 0:
            d.complete(result)
        return d

    # ================================================================== DescribeGroups / ListGroups

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        out = []
        for gid in group_ids:
            err = self._validate(gid, allow_empty_id=True)
            if err is not None:
                out.append(GroupDescription(gid, err, state=""))
                continue
            group = self.groups.get(gid)
            if group is None and gid in self.share_groups:  # described by ShareGroupDescribe
                out.append(GroupDescription(gid, E.GROUP_ID_NOT_FOUND, state=""))
                continue
            if group is None:
                out.append(GroupDescription(gid, E.NO_ERROR, state=str(S.DEAD)))
                continue
            if group.consumer is not None:  # described by ConsumerGroupDescribe, as Kafka does
                out.append(GroupDescription(gid, E.GROUP_ID_NOT_FOUND, state=""))
                continue
            stable = group.is_(S.STABLE) and group.protocol_name is not None
            members = [
                MemberDescription(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata(group.protocol_name)
                    if stable and group.protocol_name
                    else b"",
                    assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            ]
            out.append(
                GroupDescription(
                    gid,
                    E.NO_ERROR,
                    state=str(group.state),
                    protocol_type=group.protocol_type or "",
                    protocol_data=(group.protocol_name or "") if stable else "",
                    members=members,
                )
            )
        return out

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> ListGroupsResult:
        """ListGroups, optionally filtered by state names (v4+) and group types (v5+: classic,
        consumer)."""
        if not self.active:
            return ListGroupsResult(E.COORDINATOR_NOT_AVAILABLE)
        wanted = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        groups = [
            GroupOverview(g.group_id, "consumer", g.consumer.state, "consumer")
            if g.consumer is not None
            else GroupOverview(g.group_id, g.protocol_type or "", str(g.state))
            for g in self._live_groups()
        ]
        groups += [
            GroupOverview(g.group_id, "share", g.state, "share")
            for g in self.share_groups.values()
            if self.is_coordinator_for(g.group_id)
        ]
        groups = [
            o
            for o in groups
            if (not wanted or o.state.lower() in wanted)
            and (not wanted_types or o.group_type in wanted_types)
        ]
        code = E.COORDINATOR_LOAD_IN_PROGRESS if self.loading_partitions else E.NO_ERROR
        return ListGroupsResult(code, sorted(groups, key=lambda o: o.group_id))

    # ================================================================== retention

    def expire_offsets(self) -> int:
        """Tombstone offsets past `offsets.retention.minutes` (see GroupMetadata.expired_offsets) and
        remove Empty groups left with none; returns how many offsets expired."""
        now = self.now()
        retention = self.config.offsets_retention_ms
        total = 0
        for group in self._live_groups():
            if group.is_(S.DEAD) or (group.consumer is not None and group.consumer.members):
                continue  # a consumer group's offsets age only once it is empty
            expired = group.expired_offsets(now, retention)
            records = [
                rec.offset_tombstone(group.group_id, tp.topic, tp.partition) for tp in expired
            ]
            records += self._cleanup_if_dead(group, removing=set(expired))
            if records:
                total += len(expired)
                if expired:
                    log.info(
                        "group %r: %d committed offset(s) expired", group.group_id, len(expired)
                    )
                self._write(group.group_id, records)
        return total
