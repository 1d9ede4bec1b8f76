"""KafkaProducer: serializers, partitioners, the RecordAccumulator and the Sender on a background I/O
thread; `send()` returns a future usable with `.get()`, callbacks or `await`; transactions with transactional.id.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from kafkalite.client.accumulator import RECORD_OVERHEAD, RecordAccumulator
from kafkalite.client.config import PRODUCER, make_config, normalize_key
from kafkalite.client.errors import IllegalStateError, KafkaTimeoutError
from kafkalite.client.futures import FutureRecordMetadata, RecordMetadata
from kafkalite.client.io_thread import IOThread
from kafkalite.client.network import NetworkClient
from kafkalite.client.partitioner import (
    DefaultPartitioner,
    UniformStickyPartitioner,
    make_partitioner,
)
from kafkalite.client.prepared_transactions import PreparedTransaction
from kafkalite.client.producer_send import make_send
from kafkalite.client.sender import Sender
from kafkalite.client.serialization import make_serializer
from kafkalite.client.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from kafkalite.client.transaction_manager import TransactionManager
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.records.compression import Compression
from kafkalite.records.speedups import now_ms

log = logging.getLogger("kafkalite.client.producer")

Header = tuple[str, bytes | None]


def _compression_id(name: Any) -> int:
    if name in (None, "none", "", 0):
        return 0
    if isinstance(name, int):
        return int(Compression(name))
    return int(Compression.from_name(str(name)))


class KafkaProducer:
    """A thread-safe producer. Config by Kafka names: `KafkaProducer({"linger.ms": 5})` or `linger_ms=5`.

    Ordering: with enable.idempotence=false a retried batch mutes its partition (one batch in flight) until
    it lands, so a single retry keeps order; batches already in flight behind it may still land first unless
    max.in.flight.requests.per.connection=1 (as with the Java client). With idempotence the broker's sequence
    checks keep order.
    """

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = cfg = make_config(PRODUCER, config, kwargs)
        transactional = bool(cfg["transactional.id"])
        if transactional:  # transactions build on idempotence, as in Kafka's clients
            given = {normalize_key(k) for k in [*(config or {}), *kwargs]}
            if "enable.idempotence" in given and not cfg["enable.idempotence"]:
                raise ValueError("transactional.id requires enable.idempotence=true")
            cfg["enable.idempotence"] = True
        acks = str(cfg["acks"]).lower()
        if cfg["enable.idempotence"]:
            if acks not in ("all", "-1"):
                raise ValueError("enable.idempotence requires acks=all")
            if int(cfg["max.in.flight.requests.per.connection"]) > 5:
                raise ValueError(
                    "enable.idempotence requires max.in.flight.requests.per.connection <= 5"
                )
        self._raw_keys = cfg["key.serializer"] in (None, "bytes")
        self._raw_values = cfg["value.serializer"] in (None, "bytes")
        self._key_ser = make_serializer(cfg["key.serializer"])
        self._value_ser = make_serializer(cfg["value.serializer"])
        self._partitioner = make_partitioner(
            cfg["partitioner"], bool(cfg["partitioner.ignore.keys"])
        )
        self._max_request = int(cfg["max.request.size"])
        self._max_block = int(cfg["max.block.ms"]) / 1000
        self._io = IOThread(f"kafkalite-producer-{cfg['client.id']}")
        self._client = NetworkClient(cfg, self._io)
        self.metadata = self._client.metadata
        self._acc = RecordAccumulator(cfg, _compression_id(cfg["compression.type"]))
        self._txn = TransactionManager(cfg, self._client, self._acc) if transactional else None
        self._sender = Sender(self._client, self._acc, cfg, self._txn)
        self._parts: dict[str, tuple[int, list[int], list[int]]] = {}
        # topic -> (metadata version, partition count, the accumulator's deques by partition)
        self._fast: dict[str, tuple[int, int, dict[int, Any]]] = {}
        p = self._partitioner
        self._sticky_null = isinstance(p, UniformStickyPartitioner) and not getattr(
            p, "ignore_keys", False
        )
        self._sticky_map = getattr(p, "_sticky", {})
        self._murmur_keys = type(p) is DefaultPartitioner and not p.ignore_keys
        self._raw_both = self._raw_keys and self._raw_values
        self._sticky_all = self._sticky_null and (
            not isinstance(p, DefaultPartitioner) or p.ignore_keys
        )
        self._closed = False
        try:
            self._io.run(self._client.refresh_metadata([]), timeout=self._max_block)
            if cfg["enable.idempotence"] and not transactional:  # init_transactions() does it
                self._io.run(self._sender.init_producer_id(), timeout=self._max_block)
        except BaseException:
            self._closed = True
            self._io.stop()
            raise
        self._sender.start()
        self.send = self._make_send()  # type: ignore[method-assign]

    # -- metadata
    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        parts = self.metadata.partitions_for(topic)
        if parts is not None:
            return parts
        self.metadata.add_topics(topic)
        deadline = time.monotonic() + (self._max_block if timeout is None else timeout)
        last_err = 0
        while True:
            try:
                self._io.run(
                    self._client.ensure_metadata(), timeout=max(0.01, deadline - time.monotonic())
                )
            except KafkaTimeoutError:
                pass
            parts = self.metadata.partitions_for(topic)
            if parts is not None:
                return parts
            last_err = self.metadata.topic_error(topic)
            if last_err and not KafkaError(last_err).retriable:
                raise KafkaError(last_err, f"topic {topic!r}")
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"topic {topic!r} not present in metadata after {self._max_block} s"
                    + (f" ({ErrorCode.name_of(last_err)})" if last_err else "")
                )
            self.metadata.request_update()
            time.sleep(0.02)

    def _partitions_cached(self, topic: str) -> tuple[int, list[int], list[int]]:
        md = self.metadata
        t = md.topics.get(topic)
        if t is None or not t.partitions or t.error_code:
            self.partitions_for(topic)
            t = md.topics[topic]
        parts = sorted(t.partitions)
        available = [p for p in parts if t.partitions[p].leader >= 0]
        entry = (md.version, parts, available)
        self._parts[topic] = entry
        if parts == list(range(len(parts))):
            with self._acc.lock:  # the hot path reaches this topic's deques without the tuple key
                by_part = self._acc.topic_deques.setdefault(topic, {})
            self._fast[topic] = (md.version, len(parts), by_part)
        return entry

    # -- sending
    def _send_slow(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Iterable[Header] | dict[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Any = None,
    ) -> FutureRecordMetadata:
        """Queue one record; returns its future. `callback(metadata, exception)` runs on the I/O thread."""
        if self._closed:
            raise IllegalStateError("cannot send after the producer is closed")
        kb = (
            key
            if self._raw_keys and (key is None or type(key) is bytes)
            else self._key_ser(topic, key)
        )
        vb = (
            value
            if self._raw_values and (value is None or type(value) is bytes)
            else self._value_ser(topic, value)
        )
        hdrs: Any = ()
        if headers:
            hdrs = list(headers.items()) if isinstance(headers, dict) else list(headers)
            hdrs = [
                (k, None if v is None else bytes(v) if not isinstance(v, str) else v.encode())
                for k, v in hdrs
            ]
        size = RECORD_OVERHEAD + (len(kb) if kb else 0) + (len(vb) if vb else 0)
        if hdrs:
            size += sum(len(k) + (len(v) if v else 0) + 4 for k, v in hdrs)
        if size + 61 > self._max_request:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record of about {size} bytes exceeds max.request.size ({self._max_request})",
            )
        cached = self._parts.get(topic)
        if cached is None or cached[0] != self.metadata.version:
            cached = self._partitions_cached(topic)
        _, parts, available = cached
        sticky = False
        if partition is None:
            if kb is None and self._sticky_null:
                partition = self._partitioner._sticky.get(topic)
                if partition is None:
                    partition = self._partitioner.partition(topic, kb, parts, available)
                sticky = True
            else:
                partition = self._partitioner.partition(topic, kb, parts, available)
                sticky = self._sticky_all
        elif partition not in parts:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of {topic!r} (it has {len(parts)})",
            )
        ts = now_ms() if timestamp_ms is None else int(timestamp_ms)
        acc = self._acc
        tp = (topic, partition)
        txn = self._txn
        if txn is not None:
            txn.maybe_add_partition(tp)
        got, full, new_batch = acc.append(tp, ts, kb, vb, hdrs, None, sticky)
        if got is None:  # KIP-480: a new batch is due, move the sticky partition first
            self._partitioner.on_new_batch(topic, partition)
            partition = self._partitioner.partition(topic, kb, parts, available)
            if txn is not None:
                txn.maybe_add_partition((topic, partition))
            got, full, new_batch = acc.append((topic, partition), ts, kb, vb, hdrs)
        assert got is not None
        fut = got
        if full or new_batch:
            self._sender.wakeup()
            if full and new_batch and not self._io.in_loop:  # (a callback's send must not wait)
                acc.yield_to_sender(tp)
        if callback is not None:
            fut.add_both(callback)
        return fut

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Iterable[Header] | dict[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Any = None,
    ) -> FutureRecordMetadata:
        """Queue one record; returns its future (`.get()`, `.result()`, callbacks, or `await`).

        `callback(metadata, exception)` runs on the I/O thread. (Replaced per instance by a faster closure
        with the same signature; this method is the documented entry point.)"""
        return self._send_slow(topic, value, key, headers, partition, timestamp_ms, callback)

    def _make_send(self) -> Any:
        """The per-record hot path (kafkalite.client.producer_send): lock-free over the C buffer."""
        return make_send(self)

    def send_and_wait(
        self, topic: str, value: Any = None, key: Any = None, **kw: Any
    ) -> RecordMetadata:
        fut = self.send(topic, value, key, **kw)
        self.flush()
        return fut.get()

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring linger.ms) and wait until every record is acknowledged."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._acc.lock:
            self._acc.flushing += 1
            pending = list(self._acc.incomplete)
        try:
            self._sender.wakeup()
            for b in pending:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not b.outcome.wait(left):
                    raise KafkaTimeoutError(f"flush did not finish within {timeout} s")
        finally:
            with self._acc.lock:
                self._acc.flushing -= 1

    # -- transactions (transactional.id); each call raises the fatal error again once fenced
    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError("transactions need the transactional.id configuration")
        if self._closed:
            raise IllegalStateError("the producer is closed")
        return self._txn

    def _txn_call(
        self,
        operation: str,
        start: Callable[[], Coroutine[Any, Any, None]],
        timeout: float | None,
    ) -> None:
        """Run a transaction step on the I/O thread. On timeout the step goes on: calling the same
        method again waits for it (as Kafka's clients); another transaction method is refused until then."""
        txn = self._transactions()
        pending = txn.pending
        if pending is not None and pending[0] != operation:
            raise IllegalStateError(
                f"{pending[0]}() timed out and is still under way: call it again to wait for it"
            )
        if pending is not None:
            fut = pending[1]
        else:
            fut = self._io.submit(start())
            txn.pending = (operation, fut)
        wait = self._max_block if timeout is None else timeout
        try:
            fut.result(wait)
        except concurrent.futures.TimeoutError:
            raise KafkaTimeoutError(
                f"{operation}() did not finish within {wait} s; call it again to keep waiting"
            ) from None
        finally:
            if fut.done():
                txn.pending = None

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of transactional.id, fencing any older producer using it and
        completing its open transaction. Once per producer, before the first begin_transaction()."""

        def start() -> Coroutine[Any, Any, None]:
            txn.begin_init()
            return txn.initialize()

        txn = self._transactions()
        self._txn_call("init_transactions", start, timeout)

    def begin_transaction(self) -> None:
        """Open a transaction: records sent until commit or abort belong to it."""
        self._transactions().begin_transaction()

    def send_offsets_to_transaction(
        self,
        offsets: dict[Any, Any],
        group: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit consumer offsets ({tp: offset | OffsetAndMetadata}) as part of the transaction: they
        become the group's committed offsets only if it commits. `group` is the consumer's
        `group_metadata()` (its generation and member id are checked) or a group id."""
        meta = ConsumerGroupMetadata(group) if isinstance(group, str) else group
        data: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in dict(offsets).items():
            if isinstance(om, int):
                om = OffsetAndMetadata(om, "")
            elif not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(*om)
            data[TopicPartition(*tp)] = om

        def start() -> Coroutine[Any, Any, None]:
            txn.check_send_offsets()
            return txn.send_offsets(data, meta)

        txn = self._transactions()
        if data:
            self._txn_call("send_offsets_to_transaction", start, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it. Raises TransactionAbortableError when
        something in it failed (then call abort_transaction()), a FatalProducerError when fenced."""

        def start() -> Coroutine[Any, Any, None]:
            txn.begin_commit()
            return txn.end_transaction(True)

        txn = self._transactions()
        self._txn_call("commit_transaction", start, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not yet sent fail with TransactionAbortedError, and
        read_committed consumers never see the ones already written."""

        def start() -> Coroutine[Any, Any, None]:
            txn.begin_abort()
            return txn.end_transaction(False)

        txn = self._transactions()
        self._txn_call("abort_transaction", start, timeout)

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """First phase of a two-phase commit: send every record of the open transaction and return what
        another process needs to end it (prepared_transactions.end_prepared_transactions). Close this
        producer afterwards without committing or aborting; the transaction stays open until someone
        ends it, a newer producer with the same transactional.id fences it, or transaction.timeout.ms."""
        txn = self._transactions()
        txn.check_send_offsets()  # raises the abortable or fatal error; needs an open transaction
        self.flush(timeout)
        txn.check_send_offsets()  # a batch may have failed while flushing
        with txn.lock:
            if not txn.transaction_started:
                raise IllegalStateError(
                    "prepare_transaction() needs a transaction the coordinator knows of: send a "
                    "record or offsets first"
                )
            return PreparedTransaction(txn.transactional_id, txn.producer_id, txn.producer_epoch)

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (up to `timeout`), then stop the I/O thread."""
        if self._closed:
            return
        self._closed = True
        try:
            if timeout is None or timeout > 0:
                try:
                    self.flush(timeout)
                except KafkaTimeoutError:
                    log.warning("producer closed with undelivered records")
        finally:
            self._sender.running = False
            self._sender.force_close = True
            self._sender.wakeup()
            with self._acc.lock:
                self._acc.closed = True
                self._acc._space.notify_all()
            try:
                self._io.run(self._shutdown(), timeout=5)
            except Exception:
                pass
            self._io.stop()

    async def _shutdown(self) -> None:
        task = self._sender._task
        if task is not None:
            try:
                import asyncio

                await asyncio.wait_for(task, 3)
            except Exception:
                pass
        await self._client.close()

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            try:
                self.close(0)
            except Exception:
                pass


Producer = KafkaProducer
