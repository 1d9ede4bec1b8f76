"""LogProducers: the idempotent-producer side of a partition Log — its ProducerStateManager, built
from the newest snapshot plus the batch headers past it, checked before appends, saved at rolls.

A base class of Log (storage/log.py): every method here runs under (or takes) the Log's lock.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from kafkalite.records.header import BatchHeader
from kafkalite.storage.config import LogConfig
from kafkalite.storage.producer_snapshot import latest_snapshot, write_snapshot
from kafkalite.storage.producer_state import (
    ProducerStateManager,
    last_sequence,
    segment_batch_headers,
)
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.types import AppendResult

log = logging.getLogger("kafkalite.storage.log")  # the Log's messages keep one logger name


class LogProducers:
    """Producer state for Log; the state it works on is the Log's (declared here for mypy)."""

    dir: Path
    config: LogConfig
    _lock: threading.RLock
    _segments: tuple[LogSegment, ...]
    _leo: int
    _log_start: int
    _producer_state: ProducerStateManager | None

    @property
    def producer_state(self) -> ProducerStateManager:
        """Idempotent producers' state, rebuilt from the batch headers of the log on first use."""
        with self._lock:
            return self._producer_state_locked()

    def _producer_state_locked(self) -> ProducerStateManager:
        state = self._producer_state
        if state is None:
            # the newest snapshot, then the batch headers past it (all of them without one)
            snap = latest_snapshot(self.dir, self._leo)
            since, state = snap if snap is not None else (-1, ProducerStateManager())
            for seg in self._segments:
                if seg.next_offset > since:
                    for h in segment_batch_headers(seg):
                        if h.base_offset >= since:
                            state.update_from_header(h)
            self._producer_state = state
        return state

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
