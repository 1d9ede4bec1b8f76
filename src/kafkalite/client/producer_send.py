"""The producer's per-record hot path: send() as one closure with everything in locals, lock-free over
the C accelerator's RecordBuffer and under the accumulator's lock over its pure-Python twin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.client.futures import FutureRecordMetadata, _RecordFuture
from kafkalite.client.partitioner import murmur2
from kafkalite.client.transaction_manager import TxnState
from kafkalite.records.speedups import SPEEDUPS, now_ms

if TYPE_CHECKING:
    from kafkalite.client.producer import KafkaProducer


def make_send(producer: KafkaProducer, lock_free: bool = SPEEDUPS) -> Any:
    """send() for bytes/None key and value, no headers, a known partition count and room in the open
    batch of the partition: the record is encoded straight into that batch's RecordBuffer (the I/O
    thread drains concurrently); anything else, including a record that opens a batch, goes the slow
    way (`producer._send_slow`).

    `lock_free`: the C RecordBuffer's try_append is one C call, atomic under the GIL, and returns -1
    once the batch is sealed (the accumulator seals a batch before it is built or dropped), so the
    append needs no lock: it lands before the seal, and is in the batch, or goes the slow way. The
    pure-Python twin's try_append is many bytecodes (not atomic): it appends under the lock."""
    slow = producer._send_slow
    if not producer._raw_both:  # serializers to call: no shortcut
        return slow
    fast_map = producer._fast
    md = producer.metadata
    sticky_get = producer._sticky_map.get
    sticky_null = producer._sticky_null
    murmur_keys = producer._murmur_keys
    hash_key = murmur2
    acc = producer._acc
    acquire = acc.lock.acquire
    release = acc.lock.release
    wakeup = producer._sender.wakeup
    clock = now_ms
    new_fut = _RecordFuture
    txn = producer._txn
    open_txn = TxnState.IN_TRANSACTION

    def send_locked(
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Any = None,
    ) -> FutureRecordMetadata:
        fast = fast_map.get(topic)
        if (
            fast is not None
            and headers is None
            and (value is None or type(value) is bytes)
            and fast[0] == md.version
            and not acc.closed
            and (txn is None or txn.state is open_txn)
        ):
            p = partition
            if key is None:
                if p is None and sticky_null:
                    p = sticky_get(topic)
            elif type(key) is bytes:
                if p is None and murmur_keys:
                    p = (hash_key(key) & 0x7FFFFFFF) % fast[1]
            else:
                return slow(topic, value, key, headers, partition, timestamp_ms, callback)
            if p is not None:
                ts = clock() if timestamp_ms is None else int(timestamp_ms)
                acquire()
                try:
                    dq = fast[2].get(p)
                    if dq:
                        last = dq[-1]
                        delta = last.records.try_append(key, value, ts, last.limit)
                        wake = len(dq) > 1
                    else:
                        delta = -1
                finally:
                    release()
                if delta >= 0:
                    fut: FutureRecordMetadata = new_fut()
                    fut._r = (
                        last.outcome,
                        topic,
                        p,
                        delta,
                        ts,
                        -1 if key is None else len(key),
                        -1 if value is None else len(value),
                    )
                    if wake:
                        wakeup()
                    if callback is not None:
                        fut.add_both(callback)
                    return fut
        return slow(topic, value, key, headers, partition, timestamp_ms, callback)

    def send_lock_free(
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Any = None,
    ) -> FutureRecordMetadata:
        fast = fast_map.get(topic)
        if (
            fast is not None
            and headers is None
            and (value is None or type(value) is bytes)
            and fast[0] == md.version
            and not acc.closed
            and (txn is None or txn.state is open_txn)
        ):
            p = partition
            if key is None:
                if p is None and sticky_null:
                    p = sticky_get(topic)
            elif type(key) is bytes:
                if p is None and murmur_keys:
                    p = (hash_key(key) & 0x7FFFFFFF) % fast[1]
            else:
                return slow(topic, value, key, headers, partition, timestamp_ms, callback)
            if p is not None:
                dq = fast[2].get(p)
                if dq:
                    try:
                        last = dq[-1]
                    except IndexError:  # the I/O thread drained it a moment ago
                        return slow(topic, value, key, headers, partition, timestamp_ms, callback)
                    ts = clock() if timestamp_ms is None else int(timestamp_ms)
                    delta = last.records.try_append(key, value, ts, last.limit)
                    if delta >= 0:
                        fut: FutureRecordMetadata = new_fut()
                        fut._r = (
                            last.outcome,
                            topic,
                            p,
                            delta,
                            ts,
                            -1 if key is None else len(key),
                            -1 if value is None else len(value),
                        )
                        if len(dq) > 1:
                            wakeup()
                        if callback is not None:
                            fut.add_both(callback)
                        return fut
        return slow(topic, value, key, headers, partition, timestamp_ms, callback)

    return send_lock_free if lock_free else send_locked
