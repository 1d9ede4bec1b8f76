"""The exactly-once streaming sink: the prepared-transaction client helper, the task and driver halves of
the two-phase commit against a real broker, and a real streaming query read back with read_committed."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from spark_support import consume_all, consume_committed, produce

from kafkalite.client import KafkaProducer
from kafkalite.client.prepared_transactions import (
    PreparedTransaction,
    PreparedTransactionFencedError,
    end_prepared_transactions,
)
from kafkalite.spark.exactly_once import (
    TaskInfo,
    abort_prepared,
    commit_prepared,
    committed_batches,
    transactional_id,
    write_prepared,
)
from kafkalite.spark.options import parse_sink_options


def _prepare(broker, topic, tid, values):
    p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    try:
        p.init_transactions()
        p.begin_transaction()
        for v in values:
            p.send(topic, value=v, partition=0)
        return p.prepare_transaction()
    finally:
        p.close()


def test_prepared_transaction_is_invisible_until_ended_elsewhere(broker, topic):
    broker.create_topic(topic, 1)
    cfg = {"bootstrap.servers": broker.bootstrap_servers}
    txn = _prepare(broker, topic, "prep-" + topic, [b"a", b"b"])
    assert isinstance(txn, PreparedTransaction) and txn.producer_id >= 0
    assert len(consume_all(broker, topic)) == 2  # written ...
    assert consume_committed(broker, topic, timeout=3) == []  # ... but not committed
    end_prepared_transactions(cfg, [txn], commit=True)
    assert [r.value for r in consume_committed(broker, topic)] == [b"a", b"b"]
    end_prepared_transactions(cfg, [txn], commit=True)  # a repeated commit is answered NO_ERROR
    with pytest.raises(Exception, match="INVALID_TXN_STATE"):
        end_prepared_transactions(cfg, [txn], commit=False)  # the other outcome is refused


def test_a_newer_producer_fences_a_prepared_transaction(broker, topic):
    broker.create_topic(topic, 1)
    tid = "fence-" + topic
    old = _prepare(broker, topic, tid, [b"zombie"])
    newer = _prepare(broker, topic, tid, [b"fresh"])  # init_transactions aborts `old`
    with pytest.raises(PreparedTransactionFencedError, match="already aborted it"):
        end_prepared_transactions({"bootstrap.servers": broker.bootstrap_servers}, [old], True)
    end_prepared_transactions({"bootstrap.servers": broker.bootstrap_servers}, [newer], True)
    assert [r.value for r in consume_committed(broker, topic)] == [b"fresh"]


def _opts(broker, topic, **extra):
    return parse_sink_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "topic": topic,
            "kafkalite.sink.exactlyOnce": "true",
            **extra,
        }
    )


def _batches(values):
    return iter([pa.RecordBatch.from_pydict({"value": values})])


def test_task_and_driver_halves_give_each_record_once(broker, topic):
    broker.create_topic(topic, 2)
    opts = _opts(broker, topic, **{"kafkalite.sink.transactionalIdPrefix": "eos-" + topic})
    query = str(uuid.uuid4())
    rows = {p: [b"b0-p%d-%d" % (p, i) for i in range(5)] for p in (0, 1)}

    def task(batch, part, attempt=0):
        return write_prepared(opts, _batches(rows[part]), TaskInfo(batch, part, query, attempt))

    assert transactional_id(opts, TaskInfo(0, 1, query)) == f"eos-{topic}-p1"
    # attempt 0 of partition 0 prepares and dies; attempt 1 fences it and prepares again
    lost = task(0, 0)
    msgs = [task(0, 0, attempt=1), task(0, 1)]
    assert [m.records for m in msgs] == [5, 5]
    assert consume_committed(broker, topic, timeout=3) == []
    # the driver commits partition 0, then crashes before partition 1 and before Spark's commit log
    assert commit_prepared(opts, msgs[:1], 0) == 1
    with pytest.raises(Exception, match="already aborted"):
        commit_prepared(opts, [lost], 0)
    # the restarted query re-runs batch 0: partition 0 skips, partition 1 writes again
    again = [task(0, 0, attempt=0), task(0, 1, attempt=0)]
    assert [(m.already_committed, m.transaction is None) for m in again] == [
        (True, True),
        (False, False),
    ]
    assert commit_prepared(opts, again, 0) == 1
    commit_prepared(opts, again, 0)  # the driver retrying the commit is harmless
    got = sorted(r.value for r in consume_committed(broker, topic))
    assert got == sorted(rows[0] + rows[1])
    # an aborted batch leaves nothing; an empty task prepares nothing
    aborted = [task(1, 0)]
    abort_prepared(opts, aborted, 1)
    empty = write_prepared(opts, iter([]), TaskInfo(1, 1, query))
    assert empty.transaction is None and empty.records == 0
    assert sorted(r.value for r in consume_committed(broker, topic)) == got


def test_a_failed_task_aborts_its_own_transaction(broker, topic):
    from kafkalite.client import KafkaAdminClient
    from kafkalite.spark.writer import KafkaliteWriteError

    broker.create_topic(topic, 1, max_message_bytes=200)
    opts = _opts(broker, topic, **{"kafkalite.sink.transactionalIdPrefix": "fail-" + topic})
    task = TaskInfo(0, 0, str(uuid.uuid4()))
    with pytest.raises(KafkaliteWriteError, match=r"(?i)MESSAGE_TOO_LARGE|too large"):
        write_prepared(opts, _batches([b"ok", b"z" * 3000]), task)
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        state = admin.describe_transactions([transactional_id(opts, task)])
    # aborted (then Empty after the epoch bump that follows a failed, sequenced batch)
    assert state[transactional_id(opts, task)].state in ("CompleteAbort", "Empty")
    produce(broker, topic, [{"value": b"after"}])  # the last stable offset is not held back
    assert [r.value for r in consume_committed(broker, topic, timeout=5)] == [b"after"]


def test_bookkeeping_ignores_offsets_of_another_query():
    from kafkalite.client.structs import OffsetAndMetadata, TopicPartition

    tp = TopicPartition("t", 0)
    mine = {tp: OffsetAndMetadata(4, '{"batchId": 3, "queryId": "q1"}')}
    assert committed_batches(mine, "q1") == 4
    assert committed_batches(mine, "q2") == 0  # a new checkpoint reusing the prefix starts over
    assert committed_batches({}, "q1") == 0


@pytest.mark.spark
def test_streaming_query_writes_each_record_once(spark, broker, topic, tmp_path):
    source, sink = topic + "-in", topic + "-out"
    broker.create_topic(source, 2)
    broker.create_topic(sink, 2)
    produce(broker, source, [{"value": b"%d" % i, "partition": i % 2} for i in range(200)])
    df = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "50")
        .load()
        .selectExpr("value", "partition")
    )
    query = (
        df.writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", sink)
        .option("kafkalite.sink.exactlyOnce", "true")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert sum(p["numInputRows"] for p in query.recentProgress) == 200
    got = sorted(int(r.value) for r in consume_committed(broker, sink))
    assert got == list(range(200))
    with pytest.raises(Exception, match="streaming writes only"):
        df_batch = spark.createDataFrame([("x",)], "value string")
        (
            df_batch.write.format("kafkalite")
            .mode("append")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("topic", sink)
            .option("kafkalite.sink.exactlyOnce", "true")
            .save()
        )
