"""LogProducers: a partition log's producer side — its ProducerStateManager (built from the newest
snapshot plus the batch headers past it, checked before appends, saved at rolls), transaction markers,
the aborted-transaction index of each segment, and the last stable offset.

A part of Log (storage/log.py) over its LocalLog: every method runs under (or takes) the log's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.batch import decode_batch
from kafkalite.records.control import parse_end_txn_marker
from kafkalite.records.header import BatchHeader
from kafkalite.storage.local_log import LocalLog
from kafkalite.storage.producer_snapshot import (
    delete_snapshots_above,
    latest_snapshot,
    write_snapshot,
)
from kafkalite.storage.producer_state import (
    ProducerStateManager,
    VerificationGuard,
    last_sequence,
    segment_batch_headers,
)
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.txn_index import AbortedTxn
from kafkalite.storage.types import AppendResult

log = logging.getLogger("kafkalite.storage.log")  # the Log's messages keep one logger name


class LogProducers:
    """The producer state of one log, built on first need (None until then)."""

    def __init__(self, local: LocalLog, state: ProducerStateManager | None = None) -> None:
        self._local = local
        self.state = state

    def loaded(self, high_watermark: int) -> ProducerStateManager:
        """Under the lock: the state, built from the log now if it was not yet."""
        state = self.state
        if state is None:
            state = self.state = self.load(high_watermark)
        return state

    def load(self, high_watermark: int) -> ProducerStateManager:
        """The newest snapshot at or below the recovery point, then every batch header past it. The
        markers met on the way re-add their aborted transactions to the segments' indexes (entries
        a segment already holds are kept once), so an index lost in a crash is rebuilt."""
        local = self._local
        snap = latest_snapshot(
            local.dir, min(local.recovery_point, local.log_end_offset), local.names
        )
        since, state = snap if snap is not None else (-1, ProducerStateManager())
        for seg in local.segments:
            if seg.next_offset <= since:
                continue
            for pos, h in segment_batch_headers(seg):
                if h.base_offset < since:
                    continue
                if h.is_control:
                    self.apply_marker(state, seg, seg.read_bytes(pos, h.size), 0, h)
                else:
                    state.update_from_header(h)
        state.on_high_watermark(high_watermark)
        return state

    def apply_marker(
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
                self._local.dir.name,
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

    def applied(
        self,
        seg: LogSegment,
        buf: bytes | bytearray | memoryview,
        headers: list[tuple[int, BatchHeader]],
    ) -> None:
        """Under the lock: batches were appended to `seg` (state updated when it is built)."""
        state = self.state
        if state is None:
            return
        for pos, h in headers:
            if h.producer_id < 0:
                continue
            if h.is_control:
                self.apply_marker(state, seg, buf, pos, h)
            else:
                state.update_from_header(h)

    def on_high_watermark(self, hw: int) -> None:
        state = self.state
        if state is not None:
            state.on_high_watermark(hw)

    def last_stable_offset(self, hw: int) -> int:
        """Offsets below it belong to no open transaction: read_committed consumers read below it."""
        state = self.state
        if state is None or not state.has_unstable():
            return hw
        first = state.first_unstable_offset()
        return hw if first is None or first > hw else first

    def first_unstable_offset(self) -> int | None:
        state = self.state
        return state.first_unstable_offset() if state is not None else None

    def collect_aborted_transactions(self, start: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper_bound), for a read_committed fetch."""
        segs, _ = self._local.snapshot
        out: list[AbortedTxn] = []
        for seg in segs:
            if seg.next_offset <= start and seg is not segs[-1]:
                continue
            found, complete = seg.txn_index.collect(start, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def last_offsets(self, high_watermark: int) -> dict[int, int]:
        return {
            pid: e.batches[-1].last_offset
            for pid, e in self.loaded(high_watermark).entries()
            if e.batches
        }

    def take_snapshot(self, *, fsync: bool = False) -> None:
        """Under the lock: save the producer state as of the log end (when it has been built)."""
        state = self.state
        if state is None:
            return
        local = self._local
        try:
            write_snapshot(local.dir, local.log_end_offset, state, fsync=fsync)
        except OSError as exc:  # a missing snapshot only costs a longer header scan on restart
            log.warning("could not write a producer snapshot in %s: %s", local.dir, exc)

    def remove_expired(self, now: int, expiration_ms: int) -> int:
        state = self.state
        return state.remove_expired(now, expiration_ms) if state is not None else 0

    def check(
        self, h: BatchHeader, high_watermark: int, log_append_time: bool
    ) -> AppendResult | None:
        """Under the lock: None to append `h`, or the result of the earlier append it duplicates;
        raises on a sequence gap or a fenced epoch (KIP-98 idempotence, no transactions)."""
        last_seq = last_sequence(h.base_sequence, h.last_offset_delta)
        state = self.loaded(high_watermark)
        dup = state.check(h.producer_id, h.producer_epoch, h.base_sequence, last_seq)
        if dup is None:
            return None
        append_time = dup.timestamp if log_append_time else -1
        start = self._local.log_start_offset
        return dup.first_offset, dup.last_offset, append_time, dup.timestamp, start, 0, 0

    def check_leader_append(
        self,
        headers: list[tuple[int, BatchHeader]],
        producers: list[BatchHeader],
        high_watermark: int,
        log_append_time: bool,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendResult | None:
        """Under the lock, before a leader's append: the earlier result when an idempotent batch
        is a duplicate, else None; raises on a sequence gap or a fenced producer epoch, and (when a
        `verification_guard` is given: a client's append with KIP-890 verification on) on a
        transactional batch opening a transaction the coordinator did not vouch for."""
        if producers:
            h0 = producers[0]
            dup = self.check(h0, high_watermark, log_append_time)
            if dup is not None:
                return dup
            state = self.loaded(high_watermark)
            state.check_transactional(h0.producer_id, h0.is_transactional, h0.producer_epoch)
            if verification_guard is not None and h0.is_transactional:
                state.check_verified(h0.producer_id, h0.producer_epoch, verification_guard)
            return None
        # a coordinator's transactional batch (TxnOffsetCommit: no sequence) is still fenced by
        # the producer's epoch
        for _, h in headers:
            if h.producer_id >= 0 and h.is_transactional and not h.is_control:
                self.loaded(high_watermark).check_transactional(
                    h.producer_id, True, h.producer_epoch
                )
        return None

    def maybe_start_verification(
        self, producer_id: int, epoch: int, now_ms: Callable[[], int], high_watermark: int
    ) -> VerificationGuard:
        """Under the lock: the guard a transactional batch of this producer must carry (KIP-890)."""
        return self.loaded(high_watermark).maybe_start_verification(producer_id, epoch, now_ms)

    def truncated(self, high_watermark: int) -> None:
        """Under the lock, after the log was truncated: snapshots past its new end go, and the
        state is rebuilt from one below (transactions whose markers were cut are open again)."""
        delete_snapshots_above(self._local.dir, self._local.log_end_offset)
        self.state = None
        self.state = self.load(high_watermark)

    def cleared(self) -> None:
        """Under the lock, after the log was emptied: no producers, no snapshots."""
        self.state = ProducerStateManager()
        delete_snapshots_above(self._local.dir, -1)
