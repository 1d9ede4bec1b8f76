"""Partition: one replica of a topic-partition on this broker — its leader epoch, replica set, ISR, the
followers' fetch state (on the leader) and the high-watermark rule (the smallest log end offset in the ISR).

Lives on the broker's event loop thread; the log underneath is storage's. Single-node mode is the
same object with one replica that is its own ISR.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkalite.cluster.errors import (
    FencedLeaderEpoch,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    UnknownLeaderEpoch,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.storage import Log
from kafkalite.storage.config import LogConfig
from kafkalite.storage.producer_state import ProducerEntry, VerificationGuard
from kafkalite.storage.txn_index import AbortedTxn
from kafkalite.storage.types import AppendResult, FetchDataInfo

log = logging.getLogger("kafkalite.cluster.partition")

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class LeaderAndIsrState:
    """What the controller (or single-node mode) says about a partition."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int = 0
    is_new: bool = False


class FollowerState:
    """The leader's view of one follower, from the Fetch requests it sends (Kafka's Replica)."""

    __slots__ = (
        "last_caught_up_ms",
        "last_fetch_leader_leo",
        "last_fetch_ms",
        "log_end_offset",
        "log_start_offset",
    )

    def __init__(self) -> None:
        self.log_end_offset = -1
        self.log_start_offset = -1  # as its last Fetch said (v5+; -1 unknown)
        self.last_caught_up_ms = 0
        self.last_fetch_leader_leo = -1
        self.last_fetch_ms = 0

    def reset(self, now_ms: int, caught_up: bool) -> None:
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_fetch_leader_leo = -1
        self.last_fetch_ms = 0
        self.last_caught_up_ms = now_ms if caught_up else 0


class Partition:
    """One hosted replica over its (private) storage Log: callers read the few offsets they need
    through the properties below; appends go through the ReplicaManager."""

    def __init__(
        self,
        topic: str,
        partition: int,
        local_broker_id: int,
        log_: Log,
        on_high_watermark: Callable[[Partition], None] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.key = (topic, partition)
        self.local_broker_id = local_broker_id
        self._log = log_
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # an ISR change sent to the controller and not yet answered (KIP-497): while it is in
        # flight the high watermark counts the larger of the two sets
        self.pending_isr: tuple[int, ...] | None = None
        self.followers: dict[int, FollowerState] = {}
        self.is_leader = False
        self._on_high_watermark = on_high_watermark

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return (
            f"Partition({self.topic}-{self.partition} {role} epoch={self.leader_epoch} "
            f"isr={list(self.isr)} hw={self._log.high_watermark} leo={self._log.log_end_offset})"
        )

    # -- the log, read-only ----------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self._log.last_stable_offset

    @property
    def size_in_bytes(self) -> int:
        return self._log.size_in_bytes

    @property
    def num_segments(self) -> int:
        return len(self._log.segments)

    @property
    def log_dir(self) -> Path:
        """The partition's directory (its log dir is the parent)."""
        return self._log.dir

    @property
    def config(self) -> LogConfig:
        return self._log.config

    @property
    def offline(self) -> bool:
        """Its log dir failed (KAFKA_STORAGE_ERROR from now on)."""
        return self._log.offline

    @property
    def closed(self) -> bool:
        return self._log.closed

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch in the log's leader-epoch cache (-1: none)."""
        return self._log.leader_epoch_cache.latest_epoch

    @property
    def needs_flush(self) -> bool:
        return self._log.needs_flush

    def flush(self) -> None:
        self._log.flush()

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:  # fmt: skip
        """Whole batches from `offset` (storage's read; the caller bounds it by HW / LSO / LEO)."""
        return self._log.read(
            offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message
        )

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        return self._log.offset_for_timestamp(timestamp)

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        return self._log.max_timestamp_and_offset()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._log.end_offset_for_epoch(epoch)

    def collect_aborted_transactions(self, start: int, upper_bound: int) -> list[AbortedTxn]:
        return self._log.collect_aborted_transactions(start, upper_bound)

    def producer_entries(self) -> Iterator[tuple[int, ProducerEntry]]:
        """The producers with state in this log (DescribeProducers)."""
        return self._log.producer_state.entries()

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset`; returns the new low watermark."""
        return self._log.delete_records(offset)

    def truncate_to(self, offset: int) -> None:
        """Follower: drop everything from `offset` (divergence from the leader)."""
        self._log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower: the leader's log starts past ours; empty the log and restart at `offset`."""
        self._log.truncate_fully_and_start_at(offset)

    # -- state changes ------------------------------------------------------------------------------
    def make_leader(self, state: LeaderAndIsrState, now_ms: int) -> bool:
        """Become (or stay) leader at `state.leader_epoch`; returns True when leadership is new.

        A new leader epoch starts at the log end offset, recorded in the leader-epoch cache by the
        first append of that epoch (and here, so a follower asking before any append gets it)."""
        new_leadership = not self.is_leader or state.leader_epoch != self.leader_epoch
        self._apply(state)
        self.is_leader = True
        self.pending_isr = None
        if new_leadership:
            self._log.begin_leader_epoch(state.leader_epoch)
            self.followers = {}
            for r in self.replicas:
                if r != self.local_broker_id:
                    st = FollowerState()
                    st.reset(now_ms, caught_up=r in self.isr)
                    self.followers[r] = st
        self.maybe_increment_high_watermark()
        return new_leadership

    def make_follower(self, state: LeaderAndIsrState) -> bool:
        """Follow `state.leader`; returns True when the leader or epoch changed (the fetcher must
        then find the divergence point again)."""
        changed = (
            self.is_leader
            or state.leader != self.leader_id
            or (state.leader_epoch != self.leader_epoch)
        )
        self._apply(state)
        self.is_leader = False
        self.pending_isr = None
        self.followers = {}
        return changed

    def _apply(self, state: LeaderAndIsrState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.isr = tuple(state.isr)
        self.replicas = tuple(state.replicas)

    def apply_isr(self, isr: tuple[int, ...], partition_epoch: int) -> None:
        """The controller accepted an ISR change (AlterPartition answer)."""
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.maybe_increment_high_watermark()

    # -- checks -------------------------------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request naming an older epoch is fenced; a newer one means our news is old."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpoch(
                f"{self.topic}-{self.partition}: leader epoch {current_leader_epoch} is older "
                f"than the current {self.leader_epoch}"
            )
        raise UnknownLeaderEpoch(
            f"{self.topic}-{self.partition}: leader epoch {current_leader_epoch} is newer "
            f"than the current {self.leader_epoch}"
        )

    def require_leader(self, current_leader_epoch: int = -1) -> None:
        self.check_leader_epoch(current_leader_epoch)
        if not self.is_leader:
            raise NotLeaderOrFollower(
                f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.partition}"
                f" (leader: {self.leader_id})"
            )

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    # -- the leader's write path ---------------------------------------------------------------------
    def append_records_to_leader(
        self,
        records: bytes | bytearray | memoryview,
        required_acks: int,
        notify: bool = True,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendResult:
        """Append client batches at the current leader epoch. acks=all refuses up front when the ISR
        is below min.insync.replicas (NOT_ENOUGH_REPLICAS), as Kafka does. A `verification_guard`
        (KIP-890 on) must match the one a transaction-opening batch was verified with."""
        if not self.is_leader:
            raise NotLeaderOrFollower(
                f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.partition}"
            )
        lg = self._log
        if required_acks == -1:
            need = lg.config.min_insync_replicas
            if len(self.isr) < need:
                raise NotEnoughReplicas(
                    f"{self.topic}-{self.partition}: the in-sync replicas {list(self.isr)} are "
                    f"fewer than min.insync.replicas={need}"
                )
        result = lg.append_as_leader(records, self.leader_epoch, verification_guard)
        self._after_leader_append(result[1] + 1, notify)
        return result

    def maybe_start_transaction_verification(
        self, producer_id: int, producer_epoch: int
    ) -> VerificationGuard:
        """KIP-890 on the leader: the guard this producer's transactional batch must carry;
        SENTINEL_GUARD when its transaction is already open here (nothing to ask the coordinator)."""
        if not self.is_leader:
            raise NotLeaderOrFollower(
                f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.partition}"
            )
        return self._log.maybe_start_transaction_verification(producer_id, producer_epoch)

    def append_control_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        notify: bool = True,
    ) -> AppendResult:
        """WriteTxnMarkers: a COMMIT/ABORT marker closing the producer's transaction, at the current
        leader epoch (storage refuses one from an older producer or coordinator epoch)."""
        if not self.is_leader:
            raise NotLeaderOrFollower(
                f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.partition}"
            )
        result = self._log.append_control_marker(
            producer_id, producer_epoch, coordinator_epoch, commit, self.leader_epoch
        )
        self._after_leader_append(result[1] + 1, notify)
        return result

    def _after_leader_append(self, leo: int, notify: bool) -> None:
        """Move the high watermark after an append; `notify` False: the caller (the
        ReplicaManager) wakes the partition's waiters itself, once."""
        lg = self._log
        if len(self.isr) <= 1 and self.pending_isr is None:
            # the common single-replica case: the high watermark is the log end offset
            if leo > lg.high_watermark:
                lg.update_high_watermark(leo)
                if notify and self._on_high_watermark is not None:
                    self._on_high_watermark(self)
        else:
            self.maybe_increment_high_watermark(notify)

    def maybe_increment_high_watermark(self, notify: bool = True) -> bool:
        """HW = the smallest log end offset in the (maximal) ISR; it only moves forward."""
        if not self.is_leader:
            return False
        lg = self._log
        new_hw = lg.log_end_offset
        for r in self.maximal_isr:
            if r == self.local_broker_id:
                continue
            st = self.followers.get(r)
            leo = st.log_end_offset if st is not None else -1
            if leo < new_hw:
                new_hw = leo
        if new_hw > lg.high_watermark:
            lg.update_high_watermark(new_hw)
            if notify and self._on_high_watermark is not None:
                self._on_high_watermark(self)
            return True
        return False

    def acks_all_done(self, required_offset: int) -> tuple[bool, int]:
        """For a waiting acks=all produce: (finished, error code). Finished once the HW passes the
        batch; NOT_ENOUGH_REPLICAS_AFTER_APPEND when it made it but the ISR shrank below the minimum;
        NOT_LEADER_OR_FOLLOWER when leadership moved meanwhile; KAFKA_STORAGE_ERROR when its log
        dir failed (its high watermark will not move again here)."""
        if not self.is_leader:
            return True, int(NotLeaderOrFollower.error_code)
        if self._log.offline:
            return True, int(ErrorCode.KAFKA_STORAGE_ERROR)
        if self._log.high_watermark >= required_offset:
            if len(self.isr) < self._log.config.min_insync_replicas:
                return True, int(NotEnoughReplicasAfterAppend.error_code)
            return True, 0
        return False, 0

    # -- followers' fetches (leader side) -------------------------------------------------------------
    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> bool:
        """Record a follower's position from its Fetch; returns True when it may join the ISR
        (caught up to the high watermark and to the start of the current leader epoch)."""
        st = self.followers.get(replica_id)
        if st is None:
            if replica_id not in self.replicas:
                raise NotLeaderOrFollower(
                    f"broker {replica_id} is not a replica of {self.topic}-{self.partition}"
                )
            st = self.followers[replica_id] = FollowerState()
        leo = self._log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_ms = now_ms
        elif fetch_offset >= st.last_fetch_leader_leo >= 0:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.log_end_offset = fetch_offset
        st.log_start_offset = log_start_offset
        st.last_fetch_leader_leo = leo
        st.last_fetch_ms = now_ms
        self.maybe_increment_high_watermark()
        return self._can_join_isr(replica_id, st)

    def _can_join_isr(self, replica_id: int, st: FollowerState) -> bool:
        if replica_id in self.isr or self.pending_isr is not None:
            return False
        hw = self._log.high_watermark
        epoch_start = self._log.leader_epoch_cache.latest_entry
        start = epoch_start[1] if epoch_start is not None else 0
        return st.log_end_offset >= hw and st.log_end_offset >= start

    def out_of_sync_followers(self, now_ms: int, max_lag_ms: int) -> set[int]:
        """ISR members that have not caught up to the leader's log end within `max_lag_ms`."""
        out: set[int] = set()
        if not self.is_leader:
            return out
        leo = self._log.log_end_offset
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            st = self.followers.get(r)
            if st is None:
                out.add(r)
                continue
            if st.log_end_offset >= leo:
                continue
            if now_ms - st.last_caught_up_ms > max_lag_ms:
                out.add(r)
        return out

    # -- the follower's write path ---------------------------------------------------------------------
    def append_records_as_follower(self, records: bytes | bytearray, leader_hw: int) -> int:
        """Copy the leader's batches as they are, then take the leader's high watermark (capped at
        our log end). Returns the new log end offset."""
        lg = self._log
        if records:
            lg.append_as_follower(records)
        self.update_follower_high_watermark(leader_hw)
        return lg.log_end_offset

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        lg = self._log
        hw = min(leader_hw, lg.log_end_offset)
        if hw > lg.high_watermark:
            lg.update_high_watermark(hw)
            if self._on_high_watermark is not None:
                self._on_high_watermark(self)
