"""The producer's Sender: a coroutine on the I/O thread that drains ready batches per leader node,
sends Produce requests (acks 0/1/all), retries retriable errors with backoff, and completes futures.

With a TransactionManager it sends only partitions already added to the transaction (starting the
AddPartitionsToTxn for new ones), and fails queued batches when the transaction is aborted or lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from kafkalite.client.accumulator import ProducerBatch, RecordAccumulator
from kafkalite.client.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    UnsupportedFeatureError,
)
from kafkalite.client.network import NetworkClient, retrieve_auth_error
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages.produce import ProduceRequest
from kafkalite.protocol.messages.txn import InitProducerIdRequest

if TYPE_CHECKING:
    from kafkalite.client.transaction_manager import TransactionManager

log = logging.getLogger("kafkalite.client.producer")
PRODUCE = 0
INIT_PRODUCER_ID = 22
_LEADER_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
}


class Sender:
    def __init__(
        self,
        client: NetworkClient,
        accumulator: RecordAccumulator,
        config: dict[str, Any],
        txn: TransactionManager | None = None,
    ) -> None:
        self.client = client
        self.acc = accumulator
        self.metadata = client.metadata
        acks = str(config["acks"]).lower()
        self.acks = -1 if acks == "all" else int(acks)
        self.retries = int(config["retries"])
        self.request_timeout_ms = int(config["request.timeout.ms"])
        self.max_request_size = int(config["max.request.size"])
        self.max_in_flight = max(1, int(config["max.in.flight.requests.per.connection"]))
        self.txn = txn
        self.idempotent = bool(config["enable.idempotence"]) or txn is not None
        self.transactional_id = None if txn is None else txn.transactional_id
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._node_in_flight: dict[int, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._event: asyncio.Event | None = None
        self._wake_pending = False
        self.running = True
        self.force_close = False
        self._task: asyncio.Task[None] | None = None
        self.fatal: BaseException | None = None
        if txn is not None:
            txn.wakeup = self.wakeup
            txn.on_producer_id = self.set_producer_id

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """A new producer id or epoch (I/O thread): sequence numbers start again at 0."""
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self._sequences.clear()

    # -- waking from the user thread
    def wakeup(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            self.client.io.call_soon(self._set)

    def _set(self) -> None:
        self._wake_pending = False
        if self._event is not None:
            self._event.set()

    def start(self) -> None:
        self.client.io.call_soon(self._start)

    def _start(self) -> None:
        self._event = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def init_producer_id(self) -> None:
        """Get a producer id for idempotence; UnsupportedFeatureError when the broker has no InitProducerId."""
        node = self.client.least_loaded_node()
        conn = await self.client.connection(node)
        if INIT_PRODUCER_ID not in conn.versions:
            raise UnsupportedFeatureError(
                "enable.idempotence=true needs InitProducerId (API 22), which this broker does not offer"
            )
        req = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        for _ in range(20):
            resp = await conn.send(req)
            if resp.error_code == 0:
                self.producer_id = resp.producer_id
                self.producer_epoch = resp.producer_epoch
                return
            if not ErrorCode(resp.error_code).retriable:
                raise KafkaError(resp.error_code, "InitProducerId failed")
            await asyncio.sleep(0.1)
        raise KafkaTimeoutError("InitProducerId kept failing")

    # -- the loop
    async def run(self) -> None:
        assert self._event is not None
        while True:
            if not self.running and (self.force_close or not self.acc.has_incomplete()):
                break
            try:
                wait = await self._run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("producer sender iteration failed")
                wait = 0.1
            if wait > 0:
                self._event.clear()
                try:
                    await asyncio.wait_for(self._event.wait(), wait)
                except TimeoutError:
                    pass
        if self.force_close:
            self._fail_all(KafkaConnectionError("producer closed before delivery"))

    def _fail_all(self, err: BaseException) -> None:
        for b in self.acc.abort_all():
            self._complete(b, -1, -1, err, drained=False)

    async def _run_once(self) -> float:
        now = time.monotonic()
        md = self.metadata
        for b in self.acc.expired(now):
            self._complete(
                b, -1, -1, KafkaTimeoutError("delivery.timeout.ms expired before send"), False
            )
        allowed = None
        txn = self.txn
        if txn is not None:
            abandon = txn.undrained_batch_error()
            if abandon is not None:
                self._fail_all(abandon)
            if txn.wants_add_partitions():
                self._spawn(txn.add_partitions())
            allowed = txn.sendable_partitions()
        nodes, next_check, unknown = self.acc.ready(md, now)
        if unknown:
            md.add_topics(*unknown)
            md.request_update()
        if md.needs_update():
            self._spawn(self.client.ensure_metadata())
            if unknown:
                next_check = min(next_check, 0.05)
        sendable = set()
        for node in nodes:
            if self._node_in_flight.get(node, 0) >= self.max_in_flight:
                continue
            if not self.client.connected(node):
                self._spawn(self._connect(node))
                continue
            sendable.add(node)
        if sendable:
            per_partition = self.max_in_flight if self.idempotent or self.max_in_flight == 1 else 5
            drained = self.acc.drain(
                md, sendable, self.max_request_size, per_partition, now, allowed
            )
            for node, batches in drained.items():
                self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
                self._spawn(self._send_produce(node, batches))
            if drained:
                return 0.0
        return min(next_check, md.time_to_next_update() + 0.001, 1.0)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(retrieve_auth_error)

    async def _connect(self, node: int) -> None:
        try:
            await self.client.connection(node)
        except Exception as exc:
            log.debug("connect to node %s failed: %s", node, exc)
            self.metadata.request_update()
        self._set()

    def _prepare(self, batch: ProducerBatch) -> bytes | bytearray | memoryview:
        if batch.built is None and self.idempotent:
            b = batch.builder
            seq = self._sequences.get(batch.tp, 0)
            b.producer_id = self.producer_id
            b.producer_epoch = self.producer_epoch
            b.base_sequence = seq
            b.is_transactional = self.txn is not None
            self._sequences[batch.tp] = (seq + len(b)) & 0x7FFFFFFF
        return batch.build()

    async def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        try:
            by_topic: dict[str, list[Any]] = {}
            req_cls = ProduceRequest
            for b in batches:
                by_topic.setdefault(b.tp[0], []).append(
                    req_cls.TopicProduceData.PartitionProduceData(
                        index=b.tp[1], records=self._prepare(b)
                    )
                )
            req = req_cls(
                transactional_id=self.transactional_id,
                acks=self.acks,
                timeout_ms=self.request_timeout_ms,
                topic_data=[
                    req_cls.TopicProduceData(name=t, partition_data=ps)
                    for t, ps in by_topic.items()
                ],
            )
            try:
                conn = await self.client.connection(node)
                version = conn.version(PRODUCE)
                if version < 3:
                    raise UnsupportedFeatureError(
                        "the broker's Produce is older than v3 (no v2 batches)"
                    )
                written = self.acc.batches_written
                if self.acks == 0:
                    await conn.send(req, version=version, expect_response=False, on_written=written)
                    for b in batches:
                        self._complete(b, -1, -1, None)
                    return
                resp = await conn.send(
                    req,
                    version=version,
                    timeout=self.request_timeout_ms / 1000 + 5,
                    on_written=written,
                )
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as exc:
                self.metadata.request_update()
                for b in batches:
                    self._retry_or_fail(b, exc)
                return
            except Exception as exc:
                for b in batches:
                    self._complete(b, -1, -1, exc)
                return
            results: dict[tuple[str, int], Any] = {}
            for t in resp.responses:
                for pr in t.partition_responses:
                    results[(t.name, pr.index)] = pr
            for b in batches:
                p = results.get(b.tp)
                if p is None:
                    self._retry_or_fail(b, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer"))
                    continue
                code = p.error_code
                if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                    self._complete(b, p.base_offset, p.log_append_time_ms, None)
                    continue
                err = KafkaError(code, p.error_message)
                if self.idempotent and code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                    # an earlier batch of this partition failed and is being retried: wait for it
                    self._retry_or_fail(b, err)
                    continue
                if code in _LEADER_ERRORS:
                    self.metadata.request_update()
                if err.retriable:
                    self._retry_or_fail(b, err)
                else:
                    self._complete(b, -1, -1, err)
        finally:
            self._node_in_flight[node] = self._node_in_flight.get(node, 1) - 1
            self._set()

    def _retry_or_fail(self, batch: ProducerBatch, err: BaseException) -> None:
        now = time.monotonic()
        if (
            (self.running or not self.force_close)
            and batch.attempts < self.retries
            and now - batch.created < self.acc.delivery_timeout
        ):
            log.debug("retrying batch for %s after %s", batch.tp, err)
            self.acc.batch_done(batch)
            if not self.idempotent:
                self.acc.muted.add(batch.tp)  # keep order: one batch in flight until this one lands
            self.acc.reenqueue(batch, now)
        else:
            self._complete(batch, -1, -1, err)

    def _complete(
        self,
        batch: ProducerBatch,
        base_offset: int,
        log_append_time: int,
        err: BaseException | None,
        drained: bool = True,
    ) -> None:
        if drained:
            self.acc.batch_done(batch)
        if err is not None and self.txn is not None:
            err = self.txn.on_batch_failed(err, batch.built is not None)
        if batch.in_retry:
            self.acc.muted.discard(batch.tp)
        self.acc.release(batch)
        batch.outcome.complete(base_offset, log_append_time, err)
