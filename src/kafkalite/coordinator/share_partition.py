"""One share-partition of a share group (KIP-932) as pure logic: the in-flight records of a topic
partition, their acquisition locks, acknowledgements, delivery counts and the start offset.

No I/O and no clock: every operation that needs the time takes `now_ms`. The in-flight records are
kept as an ascending list of runs: contiguous offsets that share a state, a delivery count, a member
and a lock deadline (the offsets one call acquires for one member share one run). Offsets in no run
are holes (not records: between log batches, control batches). Operations split runs only where an
acknowledgement or a release covers part of one, and merge equal neighbours again, so they cost per
run, not per record; the share-partition start offset (SPSO) moves over completed runs at the front.
`state_batches()` is the persisted view (Kafka's `__share_group_state` batches); the constructor
loads it back.
"""

from __future__ import annotations

import heapq
import operator
import uuid
from bisect import bisect_right
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
    InFlightRun,
    RecordState,
    SharePartitionConfig,
    StateBatch,
)
from kafkalite.protocol.errors import ErrorCode

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_FIRST = operator.attrgetter("first")
_AVAILABLE = RecordState.AVAILABLE
_ACQUIRED = RecordState.ACQUIRED


class SharePartition:
    """The in-flight records of one share group on one topic partition."""

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
        self._runs: list[InFlightRun] = []  # ascending, disjoint, from the start offset on
        self._open = 0  # records in _runs that are AVAILABLE or ACQUIRED
        self._done = 0  # records in _runs that are ACKNOWLEDGED or ARCHIVED
        self._held: dict[str, int] = {}  # member id -> number of records it holds
        self._acquired_total = 0
        # Lazily pruned min-heaps. Every AVAILABLE run's first offset is in `_available` and every
        # ACQUIRED run's (deadline, first offset) in `_deadlines`; stale entries are skipped.
        self._available: list[int] = []
        self._deadlines: list[tuple[int, int]] = []
        self._dead_letters: list[DeadLetter] = []
        self._load(batches)

    def _load(self, batches: Iterable[StateBatch]) -> None:
        for batch in sorted(batches, key=lambda b: b.first_offset):
            if batch.first_offset > batch.last_offset or batch.delivery_count < 0:
                raise ValueError(f"invalid state batch {batch}")
            state = RecordState(batch.delivery_state)  # ValueError on an unknown id
            if state is _ACQUIRED:  # a restart releases every lock
                state = _AVAILABLE
            first = max(batch.first_offset, self.start_offset)
            if first <= batch.last_offset:  # a later batch overrides an earlier one
                self._paint(first, batch.last_offset, state, batch.delivery_count)
            self.end_offset = max(self.end_offset, batch.last_offset + 1)
        self._advance_start()

    def _paint(self, first: int, last: int, state: RecordState, count: int) -> None:
        """Make `first`..`last` one run of records in `state` (loading only: no locks)."""
        runs = self._runs
        lo = self._cut(first)
        hi = self._cut(last + 1)
        for run in runs[lo:hi]:
            if run.state in _DONE:
                self._done -= run.last - run.first + 1
            else:
                self._open -= run.last - run.first + 1
        runs[lo:hi] = [InFlightRun(first, last, state, count)]
        if state in _DONE:
            self._done += last - first + 1
        else:
            self._open += last - first + 1
            heapq.heappush(self._available, first)
        self._coalesce(lo - 1, lo + 1)

    # -- runs -------------------------------------------------------------------------------------
    def _find(self, offset: int) -> InFlightRun | None:
        """The run holding `offset`, if it is an in-flight record."""
        runs = self._runs
        i = bisect_right(runs, offset, key=_FIRST) - 1
        if i >= 0:
            run = runs[i]
            if run.last >= offset:
                return run
        return None

    def _cut(self, offset: int) -> int:
        """Split the run holding `offset` so that a run starts there; the index of the first run
        at or above `offset` (len(runs) if none)."""
        runs = self._runs
        j = bisect_right(runs, offset, key=_FIRST)
        if j:
            run = runs[j - 1]
            if run.first == offset:
                return j - 1
            if run.last >= offset:
                right = InFlightRun(
                    offset, run.last, run.state, run.count, run.member, run.deadline
                )
                run.last = offset - 1
                runs.insert(j, right)
                if right.state is _AVAILABLE:
                    heapq.heappush(self._available, offset)
                elif right.state is _ACQUIRED:
                    assert right.deadline is not None
                    heapq.heappush(self._deadlines, (right.deadline, offset))
        return j

    def _coalesce(self, lo: int, hi: int) -> None:
        """Merge adjacent equal runs among runs[lo..hi] (inclusive, clipped to the list)."""
        runs = self._runs
        lo = max(lo, 0)
        hi = min(hi, len(runs) - 1)
        if hi <= lo:
            return
        prev = runs[lo]
        kept = [prev]
        for i in range(lo + 1, hi + 1):
            run = runs[i]
            if (
                prev.last + 1 == run.first
                and prev.state is run.state
                and prev.count == run.count
                and prev.member == run.member
                and prev.deadline == run.deadline
            ):
                prev.last = run.last
            else:
                kept.append(run)
                prev = run
        if len(kept) <= hi - lo:
            runs[lo : hi + 1] = kept

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
            first = heap[0]
            run = self._find(first)
            if run is not None and run.first == first and run.state is _AVAILABLE:
                return first
            heapq.heappop(heap)
        return self.end_offset

    def acquire(
        self, member_id: str, batches: Sequence[tuple[int, int]], max_records: int, now_ms: int,
        *, finish_batch: bool = False,
    ) -> list[AcquiredRange]:  # fmt: skip
        """Lock records of the given log batches (base offset, last offset) for `member_id`. New
        records are taken while fewer than `max_in_flight` are in flight; `finish_batch` (the rest
        of a batch begun) lets them run past that limit, as Kafka's acquisition does."""
        acquired: list[AcquiredRange] = []
        if max_records <= 0:
            return acquired
        config = self.config
        limit = config.delivery_count_limit
        deadline = now_ms + config.lock_duration_ms
        runs = self._runs
        count = 0
        changed = False
        full = False  # max_in_flight reached: no new offset may be taken
        for base, last in batches:
            offset = max(base, self.start_offset)
            while offset <= last and count < max_records:
                if offset >= self.end_offset:
                    # new records (any hole before `offset` stays a hole)
                    room = max_records if finish_batch else config.max_in_flight - self._open
                    if room <= 0:
                        full = True
                        break
                    stop = min(last, offset + min(room, max_records - count) - 1)
                    size = stop - offset + 1
                    tail = runs[-1] if runs else None
                    if (
                        tail is not None
                        and tail.last + 1 == offset
                        and tail.state is _ACQUIRED
                        and tail.count == 1
                        and tail.member == member_id
                        and tail.deadline == deadline
                    ):
                        tail.last = stop
                    else:
                        runs.append(InFlightRun(offset, stop, _ACQUIRED, 1, member_id, deadline))
                        heapq.heappush(self._deadlines, (deadline, offset))
                    self.end_offset = stop + 1
                    self._open += size
                    self._lock(member_id, size)
                    _extend(acquired, offset, stop, 1)
                    count += size
                    changed = True
                    offset = stop + 1
                    continue
                i = bisect_right(runs, offset, key=_FIRST) - 1
                if i < 0 or runs[i].last < offset:  # a hole: on to the next run, or the end
                    offset = runs[i + 1].first if i + 1 < len(runs) else self.end_offset
                    continue
                run = runs[i]
                if run.state is not _AVAILABLE:
                    offset = run.last + 1
                    continue
                if run.count >= limit:
                    # the limit was lowered since these records were released: no more tries
                    stop = min(run.last, last)
                    k = self._isolate(offset, stop)
                    self._archive(runs[k], REASON_DELIVERY_COUNT_EXCEEDED)
                    self._coalesce(k - 1, k + 1)
                    changed = True
                    offset = stop + 1
                    continue
                stop = min(run.last, last, offset + max_records - count - 1)
                k = self._isolate(offset, stop)
                piece = runs[k]
                piece.state = _ACQUIRED
                piece.count += 1
                piece.member = member_id
                piece.deadline = deadline
                heapq.heappush(self._deadlines, (deadline, offset))
                size = stop - offset + 1
                self._lock(member_id, size)
                _extend(acquired, offset, stop, piece.count)
                self._coalesce(k - 1, k + 1)
                count += size
                changed = True
                offset = stop + 1
            if full or count >= max_records:
                break
        if changed:
            self._changed()
        return acquired

    def _isolate(self, first: int, last: int) -> int:
        """Make `first`..`last`, which lie in one run, a run of their own; its index."""
        k = self._cut(first)
        self._cut(last + 1)
        return k

    def _lock(self, member_id: str, size: int) -> None:
        self._held[member_id] = self._held.get(member_id, 0) + size
        self._acquired_total += size

    # -- acknowledge ------------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now_ms: int) -> AckResult:
        """Apply a member's acknowledgements, all or nothing; RENEW locks again from `now_ms`."""
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
        for batch in ordered:
            offset = batch.first_offset
            while offset <= batch.last_offset:
                run = self._find(offset)
                if run is None or run.state is not _ACQUIRED or run.member != member_id:
                    return AckResult(
                        ErrorCode.INVALID_RECORD_STATE,
                        f"offset {offset} is not acquired by member {member_id}",
                    )
                offset = run.last + 1
        if not ordered:
            return AckResult(ErrorCode.NO_ERROR)
        limit = self.config.delivery_count_limit
        for batch in ordered:
            types = batch.types
            first = batch.first_offset
            if len(types) == 1:
                self._ack_range(first, batch.last_offset, types[0], limit, now_ms)
                continue
            begin = 0  # per-offset types: one step per stretch of equal types
            for i in range(1, len(types) + 1):
                if i == len(types) or types[i] != types[begin]:
                    self._ack_range(first + begin, first + i - 1, types[begin], limit, now_ms)
                    begin = i
        self._changed()
        return AckResult(ErrorCode.NO_ERROR, changed=True)

    def _ack_range(self, first: int, last: int, type_: int, limit: int, now_ms: int) -> None:
        """Apply one acknowledge type to `first`..`last`, all held by the acknowledging member."""
        ack = AcknowledgeType(type_)
        lo = self._cut(first)
        hi = self._cut(last + 1)
        runs = self._runs
        for i in range(lo, hi):
            run = runs[i]
            if ack is AcknowledgeType.RENEW:  # still held by the member, for a new lock duration
                run.deadline = now_ms + self.config.lock_duration_ms
                heapq.heappush(self._deadlines, (run.deadline, run.first))
                continue
            self._unlock(run)
            if ack is AcknowledgeType.ACCEPT or ack is AcknowledgeType.GAP:
                run.state = (
                    RecordState.ACKNOWLEDGED
                    if ack is AcknowledgeType.ACCEPT
                    else RecordState.ARCHIVED
                )
                size = run.last - run.first + 1
                self._open -= size
                self._done += size
            elif ack is AcknowledgeType.REJECT:
                self._archive(run, REASON_REJECTED)
            elif run.count >= limit:
                self._archive(run, REASON_DELIVERY_COUNT_EXCEEDED)
            else:
                run.state = _AVAILABLE
                heapq.heappush(self._available, run.first)
        self._coalesce(lo - 1, hi)

    # -- releases ---------------------------------------------------------------------------------
    def release_expired(self, now_ms: int) -> int:
        """Release every lock whose deadline is at or before `now_ms`; the number released."""
        released = 0
        heap = self._deadlines
        runs = self._runs
        while heap and heap[0][0] <= now_ms:
            deadline, first = heapq.heappop(heap)
            i = bisect_right(runs, first, key=_FIRST) - 1
            if i < 0:
                continue
            run = runs[i]
            if run.first == first and run.state is _ACQUIRED and run.deadline == deadline:
                released += run.last - run.first + 1
                self._release(run)
                self._coalesce(i - 1, i + 1)
        if released:
            self._changed()
        return released

    def next_lock_deadline(self) -> int | None:
        """The earliest deadline of a held lock, for the caller's timer."""
        heap = self._deadlines
        while heap:
            deadline, first = heap[0]
            run = self._find(first)
            if (
                run is not None
                and run.first == first
                and run.state is _ACQUIRED
                and run.deadline == deadline
            ):
                return deadline
            heapq.heappop(heap)
        return None

    def release_member(self, member_id: str) -> int:
        """Release every lock the member holds (its session closed or it left); the number."""
        held = self._held.get(member_id)
        if not held:
            return 0
        runs = self._runs
        for run in list(runs):
            if run.state is _ACQUIRED and run.member == member_id:
                self._release(run)
        self._coalesce(0, len(runs) - 1)
        self._changed()
        return held

    def _release(self, run: InFlightRun) -> None:
        self._unlock(run)
        if run.count >= self.config.delivery_count_limit:
            self._archive(run, REASON_DELIVERY_COUNT_EXCEEDED)
        else:
            run.state = _AVAILABLE
            heapq.heappush(self._available, run.first)

    def _unlock(self, run: InFlightRun) -> None:
        member = run.member
        assert member is not None
        size = run.last - run.first + 1
        left = self._held[member] - size
        if left:
            self._held[member] = left
        else:
            del self._held[member]
        self._acquired_total -= size
        run.member = None
        run.deadline = None

    def _archive(self, run: InFlightRun, reason: str) -> None:
        """AVAILABLE or unlocked records to ARCHIVED, each a dead letter."""
        run.state = RecordState.ARCHIVED
        size = run.last - run.first + 1
        self._open -= size
        self._done += size
        count = run.count
        self._dead_letters.extend(
            DeadLetter(offset, count, reason) for offset in range(run.first, run.last + 1)
        )

    def _changed(self) -> None:
        self.changes += 1
        self._advance_start()

    def _advance_start(self) -> None:
        """Move the start offset over completed records and holes, forgetting them."""
        runs = self._runs
        k = 0
        for run in runs:
            if run.state not in _DONE:
                break
            self._done -= run.last - run.first + 1
            k += 1
        if k:
            del runs[:k]
        # offsets below the first open record are done or were holes
        self.start_offset = runs[0].first if runs else self.end_offset

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
        runs = self._runs
        k = self._cut(offset)
        for run in runs[:k]:
            size = run.last - run.first + 1
            if run.state is _ACQUIRED:
                self._unlock(run)
            if run.state in _DONE:
                self._done -= size
            else:
                self._open -= size
        del runs[:k]
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
        for run in self._runs:
            rstate = int(_AVAILABLE if run.state is _ACQUIRED else run.state)
            if run.first == last + 1 and rstate == state and run.count == count:
                last = run.last
                continue
            if first >= 0:
                batches.append(StateBatch(first, last, state, count))
            first, last = run.first, run.last
            state, count = rstate, run.count
        if first >= 0:
            batches.append(StateBatch(first, last, state, count))
        return batches

    def reset(self, start_offset: int) -> None:
        """Forget every in-flight record and start again at `start_offset` (AlterShareGroupOffsets)."""
        if start_offset < 0:
            raise ValueError(f"start offset {start_offset} is negative")
        self._runs.clear()
        self._open = 0
        self._done = 0
        self._held.clear()
        self._acquired_total = 0
        self._available.clear()
        self._deadlines.clear()
        self.start_offset = self.end_offset = start_offset
        self.state_epoch += 1
        self.changes += 1

    # -- introspection ----------------------------------------------------------------------------
    def in_flight_count(self) -> int:
        """Records between the start and end offsets not yet acknowledged or archived."""
        return self._open

    def acquired_count(self) -> int:
        return self._acquired_total

    def acquired_by(self, member_id: str) -> list[int]:
        if member_id not in self._held:
            return []
        return [
            offset
            for run in self._runs
            if run.state is _ACQUIRED and run.member == member_id
            for offset in range(run.first, run.last + 1)
        ]

    def members_holding_locks(self) -> list[str]:
        return sorted(self._held)

    def lag(self, log_end_offset: int) -> int:
        """Records up to `log_end_offset` not yet acknowledged or archived."""
        return max(0, log_end_offset - self.start_offset - self._done)

    def record_state(self, offset: int) -> tuple[RecordState, int] | None:
        run = self._find(offset)
        return None if run is None else (run.state, run.count)

    def record(self, offset: int) -> InFlightRecord | None:
        run = self._find(offset)
        if run is None:
            return None
        return InFlightRecord(run.state, run.count, run.member, run.deadline)


def _extend(ranges: list[AcquiredRange], first: int, last: int, delivery_count: int) -> None:
    if ranges:
        tail = ranges[-1]
        if tail.last_offset + 1 == first and tail.delivery_count == delivery_count:
            ranges[-1] = AcquiredRange(tail.first_offset, last, delivery_count)
            return
    ranges.append(AcquiredRange(first, last, delivery_count))


def _invalid_request(message: str) -> AckResult:
    return AckResult(ErrorCode.INVALID_REQUEST, message)


# re-exported for broker.share_partitions and broker.apis, which import them from here
__all__ = [
    "AckBatch",
    "AcquiredRange",
    "DeadLetter",
    "RecordState",
    "SharePartition",
    "SharePartitionConfig",
    "StateBatch",
]
