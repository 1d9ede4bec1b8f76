"""Batch and streaming writes to kafkalite (Spark's Kafka sink columns: value required, key, topic or the
`topic` option, partition, headers); at-least-once unless exactly-once streaming (exactly_once.py) is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from kafkalite.spark.options import SinkOptions


class KafkaliteWriteError(RuntimeError):
    """A record could not be written; the message carries the broker's (or client's) error."""


@dataclass
class WrittenCount(WriterCommitMessage):
    records: int


def _type_of(schema: StructType, name: str) -> Any:
    for f in schema.fields:
        if f.name.lower() == name:
            return f.dataType
    return None


def validate_input_schema(schema: StructType, opts: SinkOptions) -> None:
    """Reject a DataFrame the Kafka sink would reject, with the same meaning."""
    value = _type_of(schema, "value")
    if value is None:
        raise ValueError("Required attribute 'value' not found")
    if not isinstance(value, (StringType, BinaryType)):
        raise ValueError(
            f"value attribute type must be a string or binary, not {value.simpleString()}"
        )
    key = _type_of(schema, "key")
    if key is not None and not isinstance(key, (StringType, BinaryType)):
        raise ValueError(f"key attribute type must be a string or binary, not {key.simpleString()}")
    topic = _type_of(schema, "topic")
    if topic is None and opts.topic is None:
        raise ValueError(
            "topic option required when no 'topic' attribute is present. Use the topic option "
            "for setting a topic."
        )
    if topic is not None and not isinstance(topic, StringType):
        raise ValueError(f"topic attribute type must be a string, not {topic.simpleString()}")
    part = _type_of(schema, "partition")
    if part is not None and not isinstance(part, IntegerType):
        raise ValueError(f"partition attribute type must be an int, not {part.simpleString()}")
    headers = _type_of(schema, "headers")
    if headers is not None:
        ok = (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]
            and isinstance(headers.elementType.fields[0].dataType, StringType)
            and isinstance(headers.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise ValueError(
                "headers attribute type must be array<struct<key:string,value:binary>>, not "
                f"{headers.simpleString()}"
            )


def _binary_list(column: Any) -> list[bytes | None]:
    """An Arrow string or binary column as Python bytes (None for nulls): strings become their UTF-8
    bytes inside Arrow, so no per-row Python conversion."""
    import pyarrow as pa

    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    out: list[bytes | None] = column.to_pylist()
    return out


class SendTracker:
    """Delivery outcomes of the records sent: one per producer batch (records of a batch share it),
    so no callback is registered per record. `check()` collects the errors of finished batches."""

    def __init__(self) -> None:
        self.failures: list[BaseException] = []
        self.pending: dict[int, Any] = {}  # id(outcome) -> outcome, for outcomes not yet done
        self.last: Any = None

    def check(self) -> bool:
        """Collect the errors of the batches finished so far; True when any failed."""
        for key, outcome in list(self.pending.items()):
            if outcome.done:
                del self.pending[key]
                if outcome.error is not None:
                    self.failures.append(outcome.error)
        return bool(self.failures)

    def raise_first(self) -> None:
        self.check()
        if self.failures:
            first = self.failures[0]
            raise KafkaliteWriteError(f"writing to kafkalite failed: {first}") from first


def send_rows(
    producer: Any, opts: SinkOptions, batches: Iterable[Any], tracker: SendTracker
) -> tuple[int, str | None]:
    """producer.send() every row of the Arrow batches (stops early once a send failed); returns the
    number of rows and the topic of the first one."""
    count = 0
    first_topic: str | None = None
    send = producer.send
    pending = tracker.pending
    last = tracker.last
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        names = {n.lower(): n for n in batch.schema.names}
        values = _binary_list(batch.column(names["value"]))
        keys = _binary_list(batch.column(names["key"])) if "key" in names else [None] * n
        if opts.topic is not None:
            topics = [opts.topic] * n
        else:
            topics = batch.column(names["topic"]).to_pylist()
            if None in topics:
                raise KafkaliteWriteError(
                    "null topic present in the data. Use the topic option for setting a topic."
                )
        if first_topic is None:
            first_topic = topics[0]
        parts = batch.column(names["partition"]).to_pylist() if "partition" in names else None
        headers = batch.column(names["headers"]).to_pylist() if "headers" in names else None
        try:
            if parts is None and headers is None:
                for topic, value, key in zip(topics, values, keys, strict=True):
                    outcome = send(topic, value, key).outcome
                    if outcome is not last:
                        pending[id(outcome)] = last = outcome
            else:
                parts = parts or [None] * n
                headers = headers or [None] * n
                for topic, value, key, part, hdrs in zip(
                    topics, values, keys, parts, headers, strict=True
                ):
                    hs = [(h["key"], h["value"]) for h in hdrs] if hdrs else None
                    outcome = send(topic, value, key, hs, part).outcome
                    if outcome is not last:
                        pending[id(outcome)] = last = outcome
        except Exception as exc:
            raise KafkaliteWriteError(f"writing to kafkalite topic failed: {exc}") from exc
        count += n
        tracker.last = last
        if tracker.check():
            break
    return count, first_topic


def write_batches(opts: SinkOptions, batches: Iterator[Any]) -> int:
    """Send every row of the Arrow batches; flush; raise KafkaliteWriteError on the first failure."""
    from kafkalite.client import KafkaProducer

    cfg: dict[str, Any] = dict(opts.client)
    cfg.setdefault("client.id", "kafkalite-spark-writer")
    producer = KafkaProducer(config=cfg)
    tracker = SendTracker()
    try:
        count, _ = send_rows(producer, opts, batches, tracker)
        producer.flush()
    finally:
        try:
            producer.close(timeout=10)
        except Exception:  # pragma: no cover - best effort
            pass
    tracker.raise_first()
    return count


class KafkaliteBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return WrittenCount(write_batches(self.opts, iterator))


class KafkaliteStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return WrittenCount(write_batches(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are acknowledged by the broker in write(); nothing more to do (at-least-once)."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records already sent stay written (at-least-once, as with Spark's Kafka sink)."""
