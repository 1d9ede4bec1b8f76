"""The original per-record share-partition state machine, kept as a reference model for the
differential test of `kafkalite.coordinator.share_partition.SharePartition` (test helper only).

It keeps one `_Record` per in-flight offset; the value types are the real module's, so that results
compare equal.
"""

from __future__ import annotations

import heapq
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from kafkalite.coordinator.share_partition_types import (
    REASON_DELIVERY_COUNT_EXCEEDED,
    REASON_REJECTED,
    AckBatch,
    AcknowledgeType,
    AckResult,
    AcquiredRange,
    DeadLetter,
    InFlightRecord,
    RecordState,
    SharePartitionConfig,
    StateBatch,
)
from kafkalite.protocol.errors import ErrorCode

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


class _Record:
    __slots__ = ("deadline", "delivery_count", "member_id", "state")

    def __init__(self, state: RecordState, delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id: str | None = None
        self.deadline: int | None = None


class ReferenceSharePartition:
    """The per-record implementation (one `_Record` per in-flight offset)."""

    def __init__(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        start_offset: int,
        state_epoch: int = 0,
        batches: Iterable[StateBatch] = (),
        config: SharePartitionConfig | None = None,
    ) -> None:
        if start_offset < 0:
            raise ValueError(f"start offset {start_offset} is negative")
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.config = config if config is not None else SharePartitionConfig()
        self.state_epoch = state_epoch
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.changes = 0  # bumped by every change to the persisted view
        self._persisted_changes = 0
        self._records: OrderedDict[int, _Record] = OrderedDict()  # ascending offsets
        self._done = 0  # records in _records that are ACKNOWLEDGED or ARCHIVED
        self._acquired: dict[str, set[int]] = {}  # member id -> offsets it holds
        self._acquired_total = 0
        self._available: list[int] = []  # min-heap, lazily pruned
        self._deadlines: list[tuple[int, int]] = []  # (deadline, offset) min-heap, lazily pruned
        self._dead_letters: list[DeadLetter] = []
        self._load(batches)

    def _load(self, batches: Iterable[StateBatch]) -> None:
        for batch in sorted(batches, key=lambda b: b.first_offset):
            if batch.first_offset > batch.last_offset or batch.delivery_count < 0:
                raise ValueError(f"invalid state batch {batch}")
            state = RecordState(batch.delivery_state)  # ValueError on an unknown id
            if state is RecordState.ACQUIRED:  # a restart releases every lock
                state = RecordState.AVAILABLE
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                old = self._records.get(offset)
                if old is not None and old.state in _DONE:
                    self._done -= 1
                self._records[offset] = _Record(state, batch.delivery_count)
                if state in _DONE:
                    self._done += 1
                else:
                    self._available.append(offset)
            self.end_offset = max(self.end_offset, batch.last_offset + 1)
        heapq.heapify(self._available)
        self._advance_start()

    # -- config -----------------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        """Whether the persisted view changed since `mark_persisted`."""
        return self.changes != self._persisted_changes

    def mark_persisted(self, changes: int) -> None:
        """The caller persisted the view as of `changes` (read before taking `state_batches()`)."""
        self._persisted_changes = changes

    # -- fetch ------------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """The smallest AVAILABLE in-flight offset, else the end offset."""
        heap = self._available
        while heap:
            record = self._records.get(heap[0])
            if record is not None and record.state is RecordState.AVAILABLE:
                return heap[0]
            heapq.heappop(heap)
        return self.end_offset

    def acquire(
        self, member_id: str, batches: Sequence[tuple[int, int]], max_records: int, now_ms: int
    ) -> list[AcquiredRange]:
        """Lock records of the given log batches (base offset, last offset) for `member_id`."""
        acquired: list[AcquiredRange] = []
        if max_records <= 0:
            return acquired
        config = self.config
        deadline = now_ms + config.lock_duration_ms
        held = self._acquired.setdefault(member_id, set())
        count = 0
        changed = False
        full = False  # max_in_flight reached: no new offset may be taken
        for base, last in batches:
            offset = max(base, self.start_offset)
            while offset <= last and count < max_records:
                if offset >= self.end_offset:
                    if len(self._records) - self._done >= config.max_in_flight:
                        full = True
                        break
                    record = _Record(RecordState.AVAILABLE, 0)
                    self._records[offset] = record
                    self.end_offset = offset + 1  # over any hole before it, too
                else:
                    maybe = self._records.get(offset)
                    if maybe is None or maybe.state is not RecordState.AVAILABLE:
                        offset += 1  # a hole, or not acquirable
                        continue
                    record = maybe
                    if record.delivery_count >= config.delivery_count_limit:
                        # the limit was lowered since this record was released: no more tries
                        self._archive(offset, record, REASON_DELIVERY_COUNT_EXCEEDED)
                        changed = True
                        offset += 1
                        continue
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.deadline = deadline
                held.add(offset)
                heapq.heappush(self._deadlines, (deadline, offset))
                _append(acquired, offset, record.delivery_count)
                count += 1
                changed = True
                offset += 1
            if full or count >= max_records:
                break
        self._acquired_total += count
        if not held:
            del self._acquired[member_id]
        if changed:
            self._changed()
        return acquired

    # -- acknowledge ------------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now_ms: int) -> AckResult:
        """Apply a member's acknowledgements, all or nothing (`now_ms` is not needed yet)."""
        ordered = sorted(batches, key=lambda b: b.first_offset)
        previous_last = -1
        for batch in ordered:
            if batch.first_offset < 0 or batch.first_offset > batch.last_offset:
                return _invalid_request(
                    f"acknowledge batch {batch.first_offset}-{batch.last_offset} is not a range"
                )
            if batch.first_offset <= previous_last:
                return _invalid_request(
                    f"acknowledge batches overlap at offset {batch.first_offset}"
                )
            previous_last = batch.last_offset
            size = batch.last_offset - batch.first_offset + 1
            if len(batch.types) not in (1, size):
                return _invalid_request(
                    f"acknowledge batch {batch.first_offset}-{batch.last_offset} has"
                    f" {len(batch.types)} types for {size} offsets"
                )
            unknown = [t for t in batch.types if t not in _ACK_TYPES]
            if unknown:
                return _invalid_request(f"unknown acknowledge type {unknown[0]}")
        held = self._acquired.get(member_id, set())
        for batch in ordered:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                if offset not in held:
                    return AckResult(
                        ErrorCode.INVALID_RECORD_STATE,
                        f"offset {offset} is not acquired by member {member_id}",
                    )
        limit = self.config.delivery_count_limit
        for batch in ordered:
            for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                ack = AcknowledgeType(batch.types[i if len(batch.types) > 1 else 0])
                record = self._records[offset]
                if ack is AcknowledgeType.RENEW:
                    record.deadline = now_ms + self.config.lock_duration_ms
                    heapq.heappush(self._deadlines, (record.deadline, offset))
                    continue
                self._unlock(offset, record)
                if ack is AcknowledgeType.ACCEPT:
                    record.state = RecordState.ACKNOWLEDGED
                    self._done += 1
                elif ack is AcknowledgeType.GAP:
                    record.state = RecordState.ARCHIVED
                    self._done += 1
                elif ack is AcknowledgeType.REJECT:
                    self._archive(offset, record, REASON_REJECTED)
                elif record.delivery_count >= limit:
                    self._archive(offset, record, REASON_DELIVERY_COUNT_EXCEEDED)
                else:
                    record.state = RecordState.AVAILABLE
                    heapq.heappush(self._available, offset)
        if not ordered:
            return AckResult(ErrorCode.NO_ERROR)
        self._changed()
        return AckResult(ErrorCode.NO_ERROR, changed=True)

    # -- releases ---------------------------------------------------------------------------------
    def release_expired(self, now_ms: int) -> int:
        """Release every lock whose deadline is at or before `now_ms`; the number released."""
        released = 0
        heap = self._deadlines
        while heap and heap[0][0] <= now_ms:
            deadline, offset = heapq.heappop(heap)
            record = self._records.get(offset)
            if (
                record is not None
                and record.state is RecordState.ACQUIRED
                and record.deadline == deadline
            ):
                self._release(offset, record)
                released += 1
        if released:
            self._changed()
        return released

    def next_lock_deadline(self) -> int | None:
        """The earliest deadline of a held lock, for the caller's timer."""
        heap = self._deadlines
        while heap:
            deadline, offset = heap[0]
            record = self._records.get(offset)
            if (
                record is not None
                and record.state is RecordState.ACQUIRED
                and record.deadline == deadline
            ):
                return deadline
            heapq.heappop(heap)
        return None

    def release_member(self, member_id: str) -> int:
        """Release every lock the member holds (its session closed or it left); the number."""
        held = self._acquired.get(member_id)
        if not held:
            return 0
        offsets = sorted(held)
        for offset in offsets:
            self._release(offset, self._records[offset])
        self._changed()
        return len(offsets)

    def _release(self, offset: int, record: _Record) -> None:
        self._unlock(offset, record)
        if record.delivery_count >= self.config.delivery_count_limit:
            self._archive(offset, record, REASON_DELIVERY_COUNT_EXCEEDED)
        else:
            record.state = RecordState.AVAILABLE
            heapq.heappush(self._available, offset)

    def _unlock(self, offset: int, record: _Record) -> None:
        assert record.member_id is not None
        held = self._acquired[record.member_id]
        held.discard(offset)
        if not held:
            del self._acquired[record.member_id]
        self._acquired_total -= 1
        record.member_id = None
        record.deadline = None

    def _archive(self, offset: int, record: _Record, reason: str) -> None:
        record.state = RecordState.ARCHIVED
        self._done += 1
        self._dead_letters.append(DeadLetter(offset, record.delivery_count, reason))

    def _changed(self) -> None:
        self.changes += 1
        self._advance_start()

    def _advance_start(self) -> None:
        """Move the start offset over completed records and holes, forgetting them."""
        records = self._records
        while records:
            offset, record = next(iter(records.items()))
            if record.state not in _DONE:
                self.start_offset = offset  # offsets below it are done or were holes
                return
            records.popitem(last=False)
            self._done -= 1
        self.start_offset = self.end_offset  # only holes, if anything, remain below the end

    def skip_to(self, offset: int) -> None:
        """The log holds no deliverable record from the end offset up to `offset` (transaction
        markers, aborted or compacted-away records): move the end past them."""
        if offset > self.end_offset:
            self.end_offset = offset
            self._changed()

    def truncate_before(self, offset: int) -> None:
        """Records below `offset` are gone from the log (retention, DeleteRecords): forget them,
        locks included, as if they were done (no dead letters: there is nothing left to send)."""
        if offset <= self.start_offset:
            return
        records = self._records
        while records:
            first = next(iter(records))
            if first >= offset:
                break
            record = records.pop(first)
            if record.state is RecordState.ACQUIRED:
                self._unlock(first, record)
            if record.state in _DONE:
                self._done -= 1
        self.end_offset = max(self.end_offset, offset)
        self._changed()
        self.start_offset = max(self.start_offset, offset)

    # -- dead letters, persistence, reset ---------------------------------------------------------
    def take_dead_letters(self) -> list[DeadLetter]:
        """The records archived as dead letters since the last call, in the order archived."""
        letters, self._dead_letters = self._dead_letters, []
        return letters

    def state_batches(self) -> list[StateBatch]:
        """The persisted view: in-flight offsets coalesced by (state, delivery count); a held lock
        is persisted as AVAILABLE with its delivery count, since a restart releases every lock."""
        batches: list[StateBatch] = []
        first = last = -2
        state = count = -1
        for offset, record in self._records.items():
            rstate = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            if offset == last + 1 and rstate == state and record.delivery_count == count:
                last = offset
                continue
            if first >= 0:
                batches.append(StateBatch(first, last, state, count))
            first = last = offset
            state, count = int(rstate), record.delivery_count
        if first >= 0:
            batches.append(StateBatch(first, last, state, count))
        return batches

    def reset(self, start_offset: int) -> None:
        """Forget every in-flight record and start again at `start_offset` (AlterShareGroupOffsets)."""
        if start_offset < 0:
            raise ValueError(f"start offset {start_offset} is negative")
        self._records.clear()
        self._done = 0
        self._acquired.clear()
        self._acquired_total = 0
        self._available.clear()
        self._deadlines.clear()
        self.start_offset = self.end_offset = start_offset
        self.state_epoch += 1
        self.changes += 1

    # -- introspection ----------------------------------------------------------------------------
    def in_flight_count(self) -> int:
        """Records between the start and end offsets not yet acknowledged or archived."""
        return len(self._records) - self._done

    def acquired_count(self) -> int:
        return self._acquired_total

    def acquired_by(self, member_id: str) -> list[int]:
        return sorted(self._acquired.get(member_id, ()))

    def members_holding_locks(self) -> list[str]:
        return sorted(self._acquired)

    def lag(self, log_end_offset: int) -> int:
        """Records up to `log_end_offset` not yet acknowledged or archived."""
        return max(0, log_end_offset - self.start_offset - self._done)

    def record_state(self, offset: int) -> tuple[RecordState, int] | None:
        record = self._records.get(offset)
        return None if record is None else (record.state, record.delivery_count)

    def record(self, offset: int) -> InFlightRecord | None:
        record = self._records.get(offset)
        if record is None:
            return None
        return InFlightRecord(
            record.state, record.delivery_count, record.member_id, record.deadline
        )


def _append(ranges: list[AcquiredRange], offset: int, delivery_count: int) -> None:
    if ranges:
        tail = ranges[-1]
        if tail.last_offset + 1 == offset and tail.delivery_count == delivery_count:
            ranges[-1] = AcquiredRange(tail.first_offset, offset, delivery_count)
            return
    ranges.append(AcquiredRange(offset, offset, delivery_count))


def _invalid_request(message: str) -> AckResult:
    return AckResult(ErrorCode.INVALID_REQUEST, message)
