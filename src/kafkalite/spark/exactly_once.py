"""Exactly-once streaming writes (`kafkalite.sink.exactlyOnce`): each task writes its rows in a Kafka
transaction it prepares but does not commit; the driver commits them all when Spark commits the batch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from kafkalite.client.prepared_transactions import (
    PreparedTransaction,
    PreparedTransactionFencedError,
    end_prepared_transactions,
)
from kafkalite.spark.options import SinkOptions
from kafkalite.spark.writer import KafkaliteWriteError, SendTracker, send_rows

log = logging.getLogger("kafkalite.spark.exactly_once")

DEFAULT_PREFIX = "kafkalite-spark-"
END_TXN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class TaskInfo:
    """Where a write task runs: its micro-batch, Spark partition and query (from Spark's TaskContext)."""

    batch_id: int
    partition_id: int
    query_id: str
    attempt: int = 0

    @staticmethod
    def current() -> TaskInfo:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            raise KafkaliteWriteError("the exactly-once sink must run inside a Spark task")
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        query = ctx.getLocalProperty("sql.streaming.queryId")
        if batch is None or query is None:
            raise KafkaliteWriteError(
                "the exactly-once sink needs a streaming query (no micro-batch id in the task)"
            )
        return TaskInfo(int(batch), ctx.partitionId(), query, ctx.attemptNumber())


def transactional_id(opts: SinkOptions, task: TaskInfo) -> str:
    """`<prefix>-p<partition>`; the default prefix is derived from the query id (kept in the checkpoint,
    so it survives restarts; a new checkpoint is a new query with new ids)."""
    prefix = opts.transactional_id_prefix or DEFAULT_PREFIX + task.query_id
    return f"{prefix}-p{task.partition_id}"


@dataclass
class PreparedPartitionWrite(WriterCommitMessage):
    """One task's outcome: a transaction for the driver to commit, or None when there is nothing to
    commit (no rows, or this batch was committed for this partition before a restart)."""

    batch_id: int
    partition_id: int
    records: int
    transaction: PreparedTransaction | None
    already_committed: bool = False


def _bookkeeping_metadata(task: TaskInfo) -> str:
    return json.dumps({"queryId": task.query_id, "batchId": task.batch_id}, sort_keys=True)


def committed_batches(committed: dict[Any, Any], query_id: str) -> int:
    """From a bookkeeping group's committed offsets: how many batches of `query_id` are committed
    (the greatest batchId + 1; 0 when none, or when the offsets belong to another query)."""
    best = 0
    for om in committed.values():
        try:
            meta = json.loads(om.metadata or "{}")
        except ValueError:
            meta = {}
        if meta.get("queryId", query_id) == query_id:
            best = max(best, int(om.offset))
    return best


def _admin_config(client: dict[str, str]) -> dict[str, Any]:
    from kafkalite.client.config import ADMIN, normalize_key

    return {k: v for k, v in client.items() if normalize_key(k) in ADMIN}


def write_prepared(
    opts: SinkOptions, batches: Iterator[Any], task: TaskInfo
) -> PreparedPartitionWrite:
    """The executor side: write the task's rows in a prepared (flushed, uncommitted) transaction."""
    from kafkalite.client import KafkaAdminClient, KafkaProducer

    it = iter(batches)
    first = next((b for b in it if b.num_rows), None)
    if first is None:  # nothing to write, on this attempt and (deterministic batches) on any other
        return PreparedPartitionWrite(task.batch_id, task.partition_id, 0, None)
    tid = transactional_id(opts, task)
    cfg: dict[str, Any] = dict(opts.client)
    cfg["transactional.id"] = tid
    cfg.setdefault("client.id", f"{tid}-b{task.batch_id}-a{task.attempt}")
    producer = KafkaProducer(config=cfg)
    tracker = SendTracker()
    try:
        producer.init_transactions()
        # after init_transactions no transaction of `tid` is pending: the group's offset is final
        with KafkaAdminClient(config=_admin_config(opts.client)) as admin:
            done = committed_batches(admin.list_consumer_group_offsets(tid), task.query_id)
        if done > task.batch_id:
            log.info("%s: batch %d already committed, skipping", tid, task.batch_id)
            return PreparedPartitionWrite(
                task.batch_id, task.partition_id, 0, None, already_committed=True
            )
        producer.begin_transaction()

        def rows() -> Iterator[Any]:
            yield first
            yield from it

        try:
            count, topic = send_rows(producer, opts, rows(), tracker)
            tracker.raise_first()
            assert topic is not None
            producer.send_offsets_to_transaction(
                {(topic, 0): (task.batch_id + 1, _bookkeeping_metadata(task))}, tid
            )
            try:
                prepared = producer.prepare_transaction()
            except Exception as exc:
                tracker.raise_first()
                raise KafkaliteWriteError(f"writing to kafkalite failed: {exc}") from exc
            tracker.raise_first()
        except BaseException:
            # a failed task ends its own transaction, so read_committed readers are not held until a
            # retry fences it or transaction.timeout.ms passes (best effort: it may be fenced already)
            try:
                producer.abort_transaction(timeout=10)
            except Exception as exc:  # pragma: no cover - best effort
                log.info("%s: aborting the failed write: %s", tid, exc)
            raise
        return PreparedPartitionWrite(task.batch_id, task.partition_id, count, prepared)
    finally:
        # a prepared transaction stays open for the driver: closing the producer does not end it
        try:
            producer.close(timeout=10)
        except Exception:  # pragma: no cover - best effort
            pass


def _prepared(
    messages: list[WriterCommitMessage | None], batch_id: int
) -> list[PreparedTransaction]:
    out = []
    for m in messages:
        if not isinstance(m, PreparedPartitionWrite) or m.transaction is None:
            continue
        if m.batch_id != batch_id:
            raise KafkaliteWriteError(
                f"commit message of batch {m.batch_id} offered to batch {batch_id}"
            )
        out.append(m.transaction)
    return out


def commit_prepared(
    opts: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int
) -> int:
    """The driver side of a batch commit: EndTxn(commit) for every prepared transaction. Returns how many
    were committed. A failure fails the batch; a restarted query re-runs it and the partitions already
    committed skip their writes."""
    txns = _prepared(messages, batch_id)
    try:
        end_prepared_transactions(opts.client, txns, commit=True, timeout=END_TXN_TIMEOUT_S)
    except PreparedTransactionFencedError as exc:
        raise KafkaliteWriteError(
            f"micro-batch {batch_id}: {exc.error_message}. The batch's other partitions may already be "
            "visible; restart the query: it re-runs the batch and writes only the partitions not "
            "committed. Raise kafka.transaction.timeout.ms if batches take longer than it."
        ) from exc
    return len(txns)


def abort_prepared(
    opts: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int
) -> None:
    """Spark gave up on the batch: abort the transactions its tasks prepared (best effort; the next
    attempt's init_transactions or transaction.timeout.ms aborts any left over)."""
    txns = _prepared(messages, batch_id)
    try:
        end_prepared_transactions(opts.client, txns, commit=False, timeout=30)
    except Exception as exc:
        log.warning("micro-batch %d: aborting prepared transactions failed: %s", batch_id, exc)


class KafkaliteExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    """Two-phase commit per micro-batch. For (batch, Spark partition p) a task uses transactional id
    `<prefix>-p<p>` (the same for every batch and attempt): init_transactions() fences any earlier
    attempt and aborts its open transaction (or waits for a commit under way), then the committed offset
    of the bookkeeping group `<prefix>-p<p>` tells whether this batch of this query was committed for p
    already (then the task writes nothing). Otherwise it opens a transaction, sends the rows, adds the
    offset batchId + 1 for the group (TxnOffsetCommit on partition 0 of the first row's topic, the query
    id in its metadata) and flushes; its commit message carries the transactional id, producer id and
    epoch. commit() ends every prepared transaction with EndTxn(commit), abort() with EndTxn(abort); a
    retried EndTxn that already completed is answered NO_ERROR."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_prepared(self.opts, iterator, TaskInfo.current())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_prepared(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        abort_prepared(self.opts, messages, batchId)
