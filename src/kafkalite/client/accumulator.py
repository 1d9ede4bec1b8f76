"""RecordAccumulator: per-partition deques of ProducerBatch, batch.size / linger.ms readiness,
buffer.memory accounting with blocking up to max.block.ms, and draining per leader node for the Sender.
"""

from __future__ import annotations

import collections
import struct
import threading
import time
from collections.abc import Iterable
from typing import Any

from crc32c import crc32c

from kafkalite.client.errors import KafkaTimeoutError
from kafkalite.client.futures import BatchOutcome, FutureRecordMetadata
from kafkalite.client.metadata import ClusterMetadata
from kafkalite.records.compression import compress
from kafkalite.records.header import TRANSACTIONAL_MASK
from kafkalite.records.speedups import RecordBuffer

TopicPartition = tuple[str, int]
RECORD_OVERHEAD = 21  # worst-case varints + attributes of one record without headers
HEADER_SIZE = 61
_PREFIX = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, crc
_BODY = struct.Struct(">hiqqqhii")  # attributes .. record count (the CRC-covered header)
_KEEP_GIL = 0  # crc32c's gil_release_mode: never release
PACE_BATCHES = 4  # full batches of a partition queued before send() yields to the Sender
PACE_WAIT = 0.005  # the longest such yield, in seconds
PACE_STALL = 0.1  # no yield when the Sender wrote nothing for this long


class BatchWriter:
    """One producer batch (RecordBatch v2): its records encoded as they arrive into a RecordBuffer
    (the C accelerator's, or its pure-Python twin) after room for the header, written at build().

    The producer's send() closure appends small records straight through `records.try_append`.
    """

    __slots__ = (
        "compression",
        "compression_level",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "records",
    )

    def __init__(
        self, compression: int = 0, compression_level: int | None = None, capacity: int = 0
    ) -> None:
        self.compression = compression
        self.compression_level = compression_level
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.is_transactional = False
        self.records = RecordBuffer(capacity)

    def __len__(self) -> int:
        return self.records.count

    @property
    def estimated_size(self) -> int:
        return self.records.size

    def append(self, key: bytes | None, value: bytes | None, headers: Any, ts: int) -> int:
        return self.records.append(key, value, ts, headers or None)

    def build(self, copy: bool = True) -> bytes | bytearray | memoryview:
        """The finished batch. With `copy=False` an uncompressed batch is a view of the records buffer
        itself (header written in place; no more appends while the view lives): the Sender's way."""
        r = self.records
        count = r.count
        view = r.view()
        out: bytearray | memoryview = view
        attrs = 0
        if self.compression and count:
            out = bytearray(HEADER_SIZE)
            out += compress(self.compression, view[HEADER_SIZE:], level=self.compression_level)
            attrs = self.compression
            view.release()
        if self.is_transactional:
            attrs |= TRANSACTIONAL_MASK
        _BODY.pack_into(
            out,
            21,
            attrs,
            max(count - 1, 0),
            r.base_timestamp,
            r.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            count,
        )
        with memoryview(out) as covered:
            # the I/O thread keeps the GIL: a release here makes it wait for the user thread's
            # switch interval (5 ms) to get it back, far longer than the checksum itself takes
            crc = crc32c(covered[21:], 0, _KEEP_GIL)
        _PREFIX.pack_into(out, 0, 0, len(out) - 12, -1, 2, crc)
        if not copy:
            return out
        data = bytes(out)
        if out is view:
            view.release()
        return data


class ProducerBatch:
    """Records for one partition, built into one v2 batch when drained."""

    __slots__ = (
        "tp",
        "builder",
        "records",
        "outcome",
        "created",
        "limit",
        "reserved",
        "attempts",
        "retry_at",
        "built",
        "drained_at",
        "in_retry",
    )

    def __init__(self, tp: TopicPartition, builder: BatchWriter, limit: int, now: float):
        self.tp = tp
        self.builder = builder
        self.records = builder.records  # the producer's hot path appends here
        self.outcome = BatchOutcome()
        self.created = now
        self.limit = limit
        self.reserved = limit
        self.attempts = 0
        self.retry_at = 0.0
        self.built: bytes | bytearray | memoryview | None = None
        self.drained_at = 0.0
        self.in_retry = False

    @property
    def record_count(self) -> int:
        return len(self.builder)

    def try_append(
        self, key: bytes | None, value: bytes | None, headers: Any, ts: int, size: int
    ) -> FutureRecordMetadata | None:
        b = self.builder
        if len(b) and b.estimated_size + size > self.limit:
            return None
        delta = b.append(key, value, headers, ts)
        return FutureRecordMetadata(
            self.outcome,
            self.tp[0],
            self.tp[1],
            delta,
            ts,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )

    def seal(self) -> None:
        """Take no more records (drained, expired or aborted; a retried batch back in the deque
        stays sealed). Called under the accumulator's lock, before the batch leaves its deque's
        end: the C buffer's try_append is atomic under the GIL, so send()'s lock-free append
        either lands before the seal (and is in the batch) or returns -1 and goes the slow way."""
        self.limit = 0
        self.records.seal()

    def build(self) -> bytes | bytearray | memoryview:
        """The batch's wire bytes, built once (a retry resends the same bytes); no copy made."""
        if self.built is None:
            self.built = self.builder.build(copy=False)
        return self.built


class RecordAccumulator:
    def __init__(self, config: dict[str, Any], compression: int) -> None:
        self.batch_size = max(1, int(config["batch.size"]))
        self.linger = max(0, int(config["linger.ms"])) / 1000
        self.buffer_memory = int(config["buffer.memory"])
        self.max_block = int(config["max.block.ms"]) / 1000
        self.delivery_timeout = int(config["delivery.timeout.ms"]) / 1000
        self.retry_backoff = int(config["retry.backoff.ms"]) / 1000
        self.compression = compression
        self.compression_level = config.get("compression.level")
        self.lock = threading.Lock()
        self._space = threading.Condition(self.lock)
        self._written = threading.Condition(self.lock)
        self.last_write = 0.0
        self.batches: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        # the same deques by topic then partition, for the producer's hot path (no tuple to hash)
        self.topic_deques: dict[str, dict[int, collections.deque[ProducerBatch]]] = {}
        self.used = 0
        self.flushing = 0
        self.closed = False
        self.in_flight: dict[TopicPartition, int] = {}
        self.muted: set[TopicPartition] = set()
        self.incomplete: set[ProducerBatch] = set()

    # -- user thread
    def append(
        self,
        tp: TopicPartition,
        ts: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        max_block: float | None = None,
        abort_on_new_batch: bool = False,
    ) -> tuple[FutureRecordMetadata | None, bool, bool]:
        """Append a record; returns (future, a batch is full, a new batch was created).

        With `abort_on_new_batch` the future is None when the record needs a new batch (the sticky
        partitioner then picks another partition first, KIP-480)."""
        size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
        if headers:
            size += sum(len(k) + (len(v) if v else 0) + 4 for k, v in headers)
        with self.lock:
            if self.closed:
                raise RuntimeError("producer is closed")
            dq = self.batches.get(tp)
            if dq is None:
                dq = self.batches[tp] = collections.deque()
                self.topic_deques.setdefault(tp[0], {})[tp[1]] = dq
            if dq:
                last = dq[-1]
                if not headers:
                    delta = last.records.try_append(key, value, ts, last.limit)
                elif last.records.size + size <= last.limit:
                    delta = last.records.append(key, value, ts, headers)
                else:
                    delta = -1
                if delta >= 0:
                    fut = FutureRecordMetadata(
                        last.outcome,
                        tp[0],
                        tp[1],
                        delta,
                        ts,
                        -1 if key is None else len(key),
                        -1 if value is None else len(value),
                    )
                    return fut, len(dq) > 1, False
            if abort_on_new_batch:
                return None, False, True
            limit = max(self.batch_size, size + 61)
            self._reserve(limit, self.max_block if max_block is None else max_block)
            builder = BatchWriter(self.compression, self.compression_level, limit)
            batch = ProducerBatch(tp, builder, limit, time.monotonic())
            first = batch.try_append(key, value, headers, ts, size)
            assert first is not None
            dq.append(batch)
            self.incomplete.add(batch)
            return first, len(dq) > 1, True

    def _reserve(self, n: int, max_block: float) -> None:
        if self.used + n <= self.buffer_memory:
            self.used += n
            return
        if n > self.buffer_memory:
            raise ValueError(f"a record of {n} bytes exceeds buffer.memory ({self.buffer_memory})")
        deadline = time.monotonic() + max_block
        while self.used + n > self.buffer_memory:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaTimeoutError(
                    f"buffer.memory ({self.buffer_memory} bytes) full for max.block.ms ({max_block} s)"
                )
            self._space.wait(left)
            if self.closed:
                raise RuntimeError("producer is closed")
        self.used += n

    def release(self, batch: ProducerBatch) -> None:
        with self.lock:
            self.used -= batch.reserved
            batch.reserved = 0
            self.incomplete.discard(batch)
            self._space.notify_all()

    # -- sender thread
    def ready(self, metadata: ClusterMetadata, now: float) -> tuple[set[int], float, set[str]]:
        """Nodes with a sendable batch, seconds until the next batch may become ready, unknown-leader topics."""
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_check = 3600.0
        exhausted = self.used > self.buffer_memory * 0.9
        with self.lock:
            for tp, dq in self.batches.items():
                if not dq:
                    continue
                leader = metadata.leader_for(tp[0], tp[1])
                if leader < 0:
                    unknown.add(tp[0])
                    continue
                if leader in nodes:
                    continue
                first = dq[0]
                if first.retry_at > now:
                    next_check = min(next_check, first.retry_at - now)
                    continue
                waited = now - first.created
                full = len(dq) > 1 or first.builder.estimated_size >= self.batch_size
                if full or waited >= self.linger or exhausted or self.flushing or self.closed:
                    nodes.add(leader)
                else:
                    next_check = min(next_check, self.linger - waited)
        return nodes, next_check, unknown

    def drain(
        self,
        metadata: ClusterMetadata,
        nodes: Iterable[int],
        max_size: int,
        per_partition: int,
        now: float,
        allowed: set[TopicPartition] | None = None,
    ) -> dict[int, list[ProducerBatch]]:
        """Take up to `max_size` bytes of ready batches per node (`allowed`: only these partitions,
        the transactional producer's partitions already added to the transaction)."""
        out: dict[int, list[ProducerBatch]] = {}
        with self.lock:
            by_node: dict[int, list[TopicPartition]] = {}
            wanted = set(nodes)
            for tp, dq in self.batches.items():
                if dq:
                    leader = metadata.leader_for(tp[0], tp[1])
                    if leader in wanted:
                        by_node.setdefault(leader, []).append(tp)
            for node, tps in by_node.items():
                size = 0
                chosen: list[ProducerBatch] = []
                for tp in tps:
                    if allowed is not None and tp not in allowed:
                        continue
                    limit = 1 if tp in self.muted else per_partition
                    if self.in_flight.get(tp, 0) >= limit:
                        continue
                    dq = self.batches[tp]
                    first = dq[0]
                    if first.retry_at > now:
                        continue
                    est = first.builder.estimated_size
                    if chosen and size + est > max_size:
                        break
                    dq.popleft()
                    first.seal()
                    # a record appended by send() (no lock) between `est` and the seal is counted
                    est = first.builder.estimated_size
                    size += est
                    first.drained_at = now
                    chosen.append(first)
                    self.in_flight[tp] = self.in_flight.get(tp, 0) + 1
                if chosen:
                    out[node] = chosen
        return out

    def batches_written(self) -> None:
        """The Sender wrote a Produce request (I/O thread): wake a send() yielding to it."""
        with self.lock:
            self.last_write = time.monotonic()
            self._written.notify_all()

    def yield_to_sender(self, tp: TopicPartition) -> None:
        """Called by send() after it opened a batch: when full batches of `tp` are piling up while the
        Sender is writing, wait (briefly) until it writes its next request.

        The wait hands the GIL to the I/O thread at once; otherwise that thread gets it back only
        every switch interval (5 ms) while the user thread appends, and the batches queue up unsent
        (then all go after the user's loop: no overlap with the broker, and every queued batch is a
        freshly faulted buffer). A stalled Sender (no leader, broker down) is never waited for."""
        with self.lock:
            dq = self.batches.get(tp)
            if dq is None or len(dq) <= PACE_BATCHES or self.flushing or self.closed:
                return
            if time.monotonic() - self.last_write > PACE_STALL:
                return
            self._written.wait(PACE_WAIT)

    def batch_done(self, batch: ProducerBatch) -> None:
        with self.lock:
            n = self.in_flight.get(batch.tp, 1) - 1
            if n <= 0:
                self.in_flight.pop(batch.tp, None)
            else:
                self.in_flight[batch.tp] = n

    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch to retry back at the front of its partition's deque (ordered by sequence)."""
        with self.lock:
            batch.attempts += 1
            batch.retry_at = now + min(self.retry_backoff * (2 ** min(batch.attempts - 1, 5)), 1.0)
            batch.in_retry = True
            dq = self.batches[batch.tp]
            seq = batch.builder.base_sequence
            i = 0
            while i < len(dq) and dq[i].in_retry and 0 <= dq[i].builder.base_sequence < seq:
                i += 1
            dq.insert(i, batch)

    def expired(self, now: float) -> list[ProducerBatch]:
        """Queued batches older than delivery.timeout.ms (removed from their deques)."""
        out = []
        with self.lock:
            for dq in self.batches.values():
                while dq and now - dq[0].created > self.delivery_timeout:
                    dq[0].seal()
                    out.append(dq.popleft())
        return out

    def has_undrained(self) -> bool:
        with self.lock:
            return any(self.batches.values())

    def has_incomplete(self) -> bool:
        return bool(self.incomplete)

    def abort_all(self) -> list[ProducerBatch]:
        with self.lock:
            out = [b for dq in self.batches.values() for b in dq]
            for b in out:
                b.seal()
            for dq in self.batches.values():
                dq.clear()
            return out
