"""Producers' state in one partition log: producer id -> epoch, its last five batches, and the first
offset of its open transaction; the open and not-yet-replicated transactions give the first unstable offset.

Checked before each append (KIP-98): a retried batch is answered with the offsets it got the first time, a
gap in the sequence or a stale epoch is refused, a marker from an older coordinator is fenced; rebuilt
from batch headers on load.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kafkalite.records.batch import NO_SEQUENCE
from kafkalite.records.header import HEADER_SIZE, BatchHeader, read_header_fields

from .errors import InvalidProducerEpoch, InvalidTxnState, OutOfOrderSequence, TxnCoordinatorFenced

# Kafka keeps the metadata of each producer's last five batches: the most a client may have in flight
MAX_CACHED_BATCHES = 5
_INT32_MAX = 2**31 - 1


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    """Where one producer batch landed: its sequence range and offset range."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    # the first offset of the producer's open transaction (-1: none), and the epoch of the coordinator
    # that wrote its last marker (older coordinators are fenced)
    current_txn_first_offset: int = -1
    coordinator_epoch: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


class VerificationGuard:
    """KIP-890's token for one transaction of one producer on one partition: made when its first
    transactional batch asks to be verified, checked by identity at the append that starts the
    transaction, void once that append or a marker clears the producer's verification state.
    `verified` is set when the coordinator said the partition is in the transaction, so the batches
    that follow before the transaction starts here need no second round trip."""

    __slots__ = ("verified",)

    def __init__(self) -> None:
        self.verified = False


# no verification asked for (Kafka's SENTINEL): passes only where none is needed
SENTINEL_GUARD = VerificationGuard()


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer verifying a transaction on this partition: its guard, epoch and since when."""

    guard: VerificationGuard
    epoch: int
    timestamp: int


@dataclass(slots=True, frozen=True)
class CompletedTxn:
    """A transaction closed by a marker at `last_offset`."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """Sequence numbers wrap from 2**31-1 to 0 (as the Java client does)."""
    return (first_seq + last_offset_delta) % (_INT32_MAX + 1)


class ProducerStateManager:
    """Per-partition producer state. Mutated only under the owning Log's append path."""

    __slots__ = ("_ongoing", "_producers", "_unreplicated", "_verifying")

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # producer id -> the transaction it is verifying (not snapshotted: a restart verifies again)
        self._verifying: dict[int, VerificationStateEntry] = {}
        # transactions whose marker is not yet below the high watermark: still unstable
        self._unreplicated: list[CompletedTxn] = []

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> Iterator[tuple[int, ProducerEntry]]:
        """(producer id, entry) pairs, for snapshots."""
        return iter(list(self._producers.items()))

    def restore(self, producer_id: int, entry: ProducerEntry) -> None:
        """Put back an entry read from a snapshot."""
        self._producers[producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            self._ongoing[producer_id] = entry.current_txn_first_offset

    # -- transactions ---------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """The first offset of an open transaction or of one whose marker is not yet replicated."""
        best: int | None = None
        if self._ongoing:
            best = min(self._ongoing.values())
        for txn in self._unreplicated:
            if best is None or txn.first_offset < best:
                best = txn.first_offset
        return best

    def has_unstable(self) -> bool:
        return bool(self._ongoing or self._unreplicated)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each open transaction."""
        return dict(self._ongoing)

    def on_high_watermark(self, hw: int) -> None:
        """Transactions whose marker is now below the high watermark are stable."""
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= hw]

    def has_ongoing_transaction(self, producer_id: int, epoch: int) -> bool:
        """Has this producer, at this epoch, a transaction open on the partition?"""
        if producer_id not in self._ongoing:
            return False
        entry = self._producers.get(producer_id)
        return entry is not None and entry.epoch == epoch

    def maybe_start_verification(
        self, producer_id: int, epoch: int, now_ms: int | Callable[[], int]
    ) -> VerificationGuard:
        """The guard a transactional batch from this producer must carry: SENTINEL_GUARD when its
        transaction is already open here (nothing to verify), else the guard of the verification
        under way for this epoch (one per transaction, shared by concurrent batches) or a new one."""
        if self.has_ongoing_transaction(producer_id, epoch):
            return SENTINEL_GUARD
        current = self._verifying.get(producer_id)
        if current is not None and current.epoch == epoch:
            return current.guard
        guard = VerificationGuard()
        now = now_ms() if callable(now_ms) else now_ms  # (a clock is read only when needed)
        self._verifying[producer_id] = VerificationStateEntry(guard, epoch, now)
        return guard

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        current = self._verifying.get(producer_id)
        return current.guard if current is not None else None

    def check_verified(self, producer_id: int, epoch: int, guard: VerificationGuard) -> None:
        """A transactional batch that would open a transaction here must carry the guard of a
        verification still current (no marker came between): INVALID_TXN_STATE otherwise."""
        if self.has_ongoing_transaction(producer_id, epoch):
            return
        current = self._verifying.get(producer_id)
        if guard is SENTINEL_GUARD or current is None or current.guard is not guard:
            raise InvalidTxnState(
                f"producer {producer_id} epoch {epoch}: the batch's partition was not verified to be "
                "in an ongoing transaction"
            )

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Vet a commit/abort marker: the producer's epoch and the coordinator's must not be older."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"marker for producer {producer_id} at epoch {epoch}, older than its epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TxnCoordinatorFenced(
                f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older "
                f"than {entry.coordinator_epoch}"
            )

    def check_transactional(self, producer_id: int, is_transactional: bool, epoch: int) -> None:
        """A plain batch from a producer with an open transaction is refused (INVALID_TXN_STATE), a
        batch from an epoch older than the producer's (fenced) with INVALID_PRODUCER_EPOCH."""
        entry = self._producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}"
            )
        if not is_transactional and producer_id in self._ongoing:
            raise InvalidTxnState(
                f"producer {producer_id} sent a non-transactional batch inside an open transaction"
            )

    def complete_txn(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        offset: int,
        commit: bool,
        timestamp: int,
    ) -> CompletedTxn:
        """A marker at `offset` closes the producer's transaction (a marker with no data before it
        spans just itself); the transaction stays unstable until the high watermark passes it."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(epoch)
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        first = self._ongoing.pop(producer_id, -1)
        self._verifying.pop(producer_id, None)  # a verification from before the marker is void
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        txn = CompletedTxn(producer_id, first if first >= 0 else offset, offset, not commit)
        self._unreplicated.append(txn)
        return txn

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO right after `txn` completes: the first offset of another open transaction, else
        the offset after the marker (stored in the aborted-transaction index, as Kafka does)."""
        others = [first for first in self._ongoing.values()]
        return min(others) if others else txn.last_offset + 1

    def check(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """Vet a batch before it is appended: None means append it, a BatchMetadata means it duplicates
        that earlier batch (answer with its offsets, append nothing); raises on a stale epoch or a gap."""
        entry = self._producers.get(producer_id)
        if entry is None:
            # unknown producer (new, or its batches were deleted by retention): any sequence starts it
            return None
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}"
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequence(
                    f"producer {producer_id} bumped its epoch to {epoch} but starts at sequence "
                    f"{first_seq}, expected 0"
                )
            return None
        for b in entry.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        expected = (entry.last_seq + 1) % (_INT32_MAX + 1) if entry.batches else first_seq
        if first_seq != expected:
            raise OutOfOrderSequence(
                f"producer {producer_id} epoch {epoch}: sequence {first_seq} out of order, "
                f"expected {expected}"
            )
        return None

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
    ) -> None:
        """Record an appended batch (after `check` allowed it, or when replaying the log)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(epoch)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(
            BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp)
        )
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

    def update_from_header(self, h: BatchHeader) -> None:
        """Record an appended data batch (control batches go through `complete_txn`)."""
        if h.producer_id < 0 or h.is_control:
            return
        if h.base_sequence >= 0:
            self.update(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                last_sequence(h.base_sequence, h.last_offset_delta),
                h.base_offset,
                h.base_offset + h.last_offset_delta,
                h.max_timestamp,
            )
        if h.is_transactional and h.producer_id not in self._ongoing:
            self._ongoing[h.producer_id] = h.base_offset
            self._verifying.pop(h.producer_id, None)  # its transaction is open: verified
            entry = self._producers.get(h.producer_id)
            if entry is None:
                entry = self._producers[h.producer_id] = ProducerEntry(h.producer_epoch)
            entry.current_txn_first_offset = h.base_offset

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producers whose last batch is older than producer.id.expiration.ms and that hold no
        open transaction; returns how many."""
        old = [
            pid
            for pid, e in self._producers.items()
            if e.last_timestamp >= 0
            and now_ms - e.last_timestamp > expiration_ms
            and pid not in self._ongoing
        ]
        for pid in old:
            del self._producers[pid]
        stale = [p for p, v in self._verifying.items() if now_ms - v.timestamp > expiration_ms]
        for pid in stale:
            del self._verifying[pid]
        return len(old)


class _SegmentLike(Protocol):
    size: int

    def read_bytes(self, position: int, length: int) -> bytes: ...


def segment_batch_headers(segment: _SegmentLike) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every batch in a (recovered) segment file, read a header at a time;
    records are skipped, so a rebuild costs one small read per batch."""
    pos = 0
    end = segment.size
    while pos + HEADER_SIZE <= end:
        raw = segment.read_bytes(pos, HEADER_SIZE)
        if len(raw) < HEADER_SIZE:
            return
        h = read_header_fields(raw)
        if h.magic != 2 or h.size <= 0 or pos + h.size > end:
            return  # recovery already cut torn tails; stop rather than trust a bad length
        yield pos, h
        pos += h.size
