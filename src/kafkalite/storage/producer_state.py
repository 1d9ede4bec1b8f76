"""Idempotent producers' state in one partition log: producer id -> epoch and its last five batches.

Checked before each append (KIP-98 without transactions): a retried batch is answered with the offsets it
got the first time, a gap in the sequence or a stale epoch is refused; rebuilt from batch headers on load.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kafkalite.records.batch import NO_SEQUENCE
from kafkalite.records.header import HEADER_SIZE, BatchHeader, read_header_fields

from .errors import InvalidProducerEpoch, OutOfOrderSequence

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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """Sequence numbers wrap from 2**31-1 to 0 (as the Java client does)."""
    return (first_seq + last_offset_delta) % (_INT32_MAX + 1)


class ProducerStateManager:
    """Per-partition producer state. Mutated only under the owning Log's append path."""

    __slots__ = ("_producers",)

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

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
        if entry is None or epoch != entry.epoch:
            entry = ProducerEntry(epoch)
            self._producers[producer_id] = entry
        entry.batches.append(
            BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp)
        )

    def update_from_header(self, h: BatchHeader) -> None:
        if h.producer_id < 0 or h.is_control or h.base_sequence < 0:
            return
        self.update(
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            last_sequence(h.base_sequence, h.last_offset_delta),
            h.base_offset,
            h.base_offset + h.last_offset_delta,
            h.max_timestamp,
        )

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or past `offset` (the log was truncated there)."""
        for pid in list(self._producers):
            entry = self._producers[pid]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self._producers[pid]
            elif len(kept) != len(entry.batches):
                entry.batches = deque(kept, maxlen=MAX_CACHED_BATCHES)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producers whose last batch is older than producer.id.expiration.ms; returns how many."""
        old = [
            pid
            for pid, e in self._producers.items()
            if e.batches and now_ms - e.batches[-1].timestamp > expiration_ms
        ]
        for pid in old:
            del self._producers[pid]
        return len(old)


class _SegmentLike(Protocol):
    size: int

    def read_bytes(self, position: int, length: int) -> bytes: ...


def segment_batch_headers(segment: _SegmentLike) -> Iterator[BatchHeader]:
    """The header of every batch in a (recovered) segment file, read a header at a time; records are
    skipped, so a rebuild costs one small read per batch."""
    pos = 0
    end = segment.size
    while pos + HEADER_SIZE <= end:
        raw = segment.read_bytes(pos, HEADER_SIZE)
        if len(raw) < HEADER_SIZE:
            return
        h = read_header_fields(raw)
        if h.magic != 2 or h.size <= 0 or pos + h.size > end:
            return  # recovery already cut torn tails; stop rather than trust a bad length
        yield h
        pos += h.size
