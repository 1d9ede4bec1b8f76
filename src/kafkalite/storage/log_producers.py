"""LogProducers: the producer side of a partition Log — its ProducerStateManager (built when the log
opens from the newest snapshot plus the batch headers past it, checked before appends, saved at rolls),
transaction markers, the aborted-transaction index of each segment, and the last stable offset.

A base class of Log (storage/log.py): every method here runs under (or takes) the Log's lock.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.batch import decode_batch
from kafkalite.records.control import parse_end_txn_marker
from kafkalite.records.header import BatchHeader
from kafkalite.storage.config import LogConfig
from kafkalite.storage.producer_snapshot import latest_snapshot, write_snapshot
from kafkalite.storage.producer_state import (
    ProducerStateManager,
    last_sequence,
    segment_batch_headers,
)
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.txn_index import AbortedTxn
from kafkalite.storage.types import AppendResult

log = logging.getLogger("kafkalite.storage.log")  # the Log's messages keep one logger name


class LogProducers:
    """Producer state for Log; the state it works on is the Log's (declared here for mypy)."""

    dir: Path
    config: LogConfig
    _lock: threading.RLock
    _segments: tuple[LogSegment, ...]
    _leo: int
    _hw: int
    _log_start: int
    _recovery_point: int
    _snapshot: tuple[tuple[LogSegment, ...], tuple[int, ...]]
    _producer_state: ProducerStateManager | None
    _names: set[str] | None

    @property
    def producer_state(self) -> ProducerStateManager:
        """Idempotent producers' state, rebuilt from the batch headers of the log on first use."""
        with self._lock:
            return self._producer_state_locked()

    def _producer_state_locked(self) -> ProducerStateManager:
        state = self._producer_state
        if state is None:
            state = self._producer_state = self._load_producer_state()
        return state

    def _load_producer_state(self) -> ProducerStateManager:
        """The newest snapshot at or below the recovery point, then every batch header past it. The
        markers met on the way re-add their aborted transactions to the segments' indexes (entries
        a segment already holds are kept once), so an index lost in a crash is rebuilt."""
        snap = latest_snapshot(self.dir, min(self._recovery_point, self._leo), self._names)
        since, state = snap if snap is not None else (-1, ProducerStateManager())
        for seg in self._segments:
            if seg.next_offset <= since:
                continue
            for pos, h in segment_batch_headers(seg):
                if h.base_offset < since:
                    continue
                if h.is_control:
                    self._apply_marker(state, seg, seg.read_bytes(pos, h.size), 0, h)
                else:
                    state.update_from_header(h)
        state.on_high_watermark(self._hw)
        return state

    def _apply_marker(
        self,
        state: ProducerStateManager,
        seg: LogSegment,
        buf: bytes | bytearray | memoryview,
        pos: int,
        h: BatchHeader,
    ) -> None:
        """A control batch was appended at `h.base_offset` in `seg`: close its producer's transaction
        and index it when aborted. Control batches that are not transaction markers are skipped."""
        if h.producer_id < 0:
            return
        try:
            batch = decode_batch(buf, pos)
            marker = parse_end_txn_marker(batch.records[0])
        except (DecodeError, IndexError) as exc:
            log.warning(
                "%s: control batch at %d is not a transaction marker: %s",
                self.dir.name,
                h.base_offset,
                exc,
            )
            return
        txn = state.complete_txn(
            h.producer_id,
            h.producer_epoch,
            marker.coordinator_epoch,
            h.base_offset,
            marker.is_commit,
            h.max_timestamp,
        )
        if txn.is_aborted:
            lso = state.last_stable_offset_after(txn)
            seg.txn_index.append(
                AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
            )

    @property
    def last_stable_offset(self) -> int:
        """Offsets below it belong to no open transaction: read_committed consumers read below it."""
        hw = self._hw
        state = self._producer_state
        if state is None or not state.has_unstable():
            return hw
        first = state.first_unstable_offset()
        return hw if first is None or first > hw else first

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of an open (or not yet replicated) transaction; None when there is none.
        Taken under the lock: the cleaner asks from its own thread while appends change the state."""
        with self._lock:
            state = self._producer_state
            return state.first_unstable_offset() if state is not None else None

    def collect_aborted_transactions(self, start: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper_bound), for a read_committed fetch."""
        segs, _ = self._snapshot
        out: list[AbortedTxn] = []
        for seg in segs:
            if seg.next_offset <= start and seg is not segs[-1]:
                continue
            found, complete = seg.txn_index.collect(start, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction (DescribeProducers)."""
        with self._lock:
            return self._producer_state_locked().ongoing_transactions()

    def producer_last_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its newest batch: the batches compaction must not remove
        entirely, or a restart that replays the log would forget the producer's sequence."""
        with self._lock:
            return {
                pid: e.batches[-1].last_offset
                for pid, e in self._producer_state_locked().entries()
                if e.batches
            }

    def _snapshot_producers(self, *, fsync: bool = False) -> None:
        """Under the lock: save the producer state as of the log end (when it has been built)."""
        state = self._producer_state
        if state is None:
            return
        try:
            write_snapshot(self.dir, self._leo, state, fsync=fsync)
        except OSError as exc:  # a missing snapshot only costs a longer header scan on restart
            log.warning("could not write a producer snapshot in %s: %s", self.dir, exc)

    def remove_expired_producers(self, now: int, expiration_ms: int) -> int:
        """Forget idempotent producers whose last batch is older than `expiration_ms`."""
        with self._lock:
            state = self._producer_state
            return state.remove_expired(now, expiration_ms) if state is not None else 0

    def _check_producer(self, h: BatchHeader) -> AppendResult | None:
        """Under the lock: None to append `h`, or the result of the earlier append it duplicates;
        raises on a sequence gap or a fenced epoch (KIP-98 idempotence, no transactions)."""
        last_seq = last_sequence(h.base_sequence, h.last_offset_delta)
        state = self._producer_state_locked()
        dup = state.check(h.producer_id, h.producer_epoch, h.base_sequence, last_seq)
        if dup is None:
            return None
        append_time = dup.timestamp if self.config.log_append_time else -1
        return dup.first_offset, dup.last_offset, append_time, dup.timestamp, self._log_start, 0, 0
