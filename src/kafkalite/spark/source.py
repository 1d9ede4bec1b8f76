"""The `kafkalite` Python data source: batch and micro-batch reads with Spark's Kafka source semantics
(offset specs, rate limits, Trigger.AvailableNow, data-loss checks); writes are in writer.py.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kafkalite.spark.kafkaio import (
    OffsetReader,
    read_range_columns,
    report_data_loss,
)
from kafkalite.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    TopicPartitionKey,
    from_offset_dict,
    sort_partitions,
    to_offset_dict,
)
from kafkalite.spark.options import (
    FIXED_GROUP_ID_WARNING,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from kafkalite.spark.planning import OffsetRange, backlog, plan_ranges, rate_limit
from kafkalite.spark.pushdown import push_filters, pushdown_enabled
from kafkalite.spark.schema import arrow_schema, columns_to_batch, kafka_schema

log = logging.getLogger("kafkalite.spark")
FORMAT = "kafkalite"


class RangePartition(InputPartition):
    """One Spark task: an offset range of one topic partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


def _check_schema(schema: StructType, include_headers: bool) -> None:
    expected = kafka_schema(include_headers)
    if schema.simpleString() != expected.simpleString():
        raise ValueError(
            "The kafkalite source has a fixed schema and cannot be set with a custom one "
            f"(expected {expected.simpleString()}, got {schema.simpleString()})"
        )


def resolve(
    spec: OffsetSpec,
    tps: set[TopicPartitionKey],
    reader: OffsetReader,
    *,
    name: str,
    is_start: bool,
) -> dict[TopicPartitionKey, int]:
    """Turn an offset spec into concrete offsets for `tps` (the partitions the query reads now)."""
    if spec.kind == "earliest":
        return reader.earliest(tps)
    if spec.kind == "latest":
        return reader.latest(tps)
    if spec.kind in ("offsets", "timestamps"):
        given = set(spec.offsets)
        if given != tps:
            missing = sort_partitions(tps - given)
            extra = sort_partitions(given - tps)
            raise ValueError(
                f"Option '{name}' must name exactly the partitions the query reads: "
                f"missing {missing}, not read {extra}"
            )
    if spec.kind == "offsets":
        out = dict(spec.offsets)
        early = [tp for tp, o in out.items() if o == EARLIEST]
        late = [tp for tp, o in out.items() if o == LATEST]
        out.update(reader.earliest(early))
        out.update(reader.latest(late))
        return out
    stamps = (
        {tp: int(spec.timestamp or 0) for tp in tps}
        if spec.kind == "timestamp"
        else dict(spec.offsets)
    )
    found = reader.for_times(stamps)
    out = {}
    unmatched = []
    for tp in stamps:
        off = found.get(tp)
        if off is None:
            unmatched.append(tp)
        else:
            out[tp] = off
    if unmatched:
        if is_start and spec.strategy == "error":
            raise ValueError(
                f"No offset matched the timestamp of option '{name}' for partitions "
                f"{sort_partitions(unmatched)} (no record has a timestamp at or after it); set "
                "startingOffsetsByTimestampStrategy=latest to start at the latest offset instead"
            )
        out.update(reader.latest(unmatched))
    return out


def read_partition(opts: SourceOptions, schema: StructType, rng: OffsetRange) -> Iterator[Any]:
    """Arrow batches of one offset range, through the columnar fast path (both isolation levels)."""
    pa_schema = arrow_schema(schema)
    for cols in read_range_columns(
        opts.client,
        rng,
        fail_on_data_loss=opts.fail_on_data_loss,
        poll_timeout_ms=opts.poll_timeout_ms,
        include_headers=opts.include_headers,
        fetch_filter=opts.fetch_filter,
    ):
        yield columns_to_batch(cols, rng.topic, rng.partition, pa_schema, opts.include_headers)


def offset_reader(opts: SourceOptions) -> OffsetReader:
    return OffsetReader(
        opts.client,
        num_retries=opts.fetch_offset_num_retries,
        retry_interval_ms=opts.fetch_offset_retry_interval_ms,
    )


class KafkaliteBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.pushdown: Any = None  # a kafkalite.spark.pushdown.Pushdown once filters were pushed

    def plan(self) -> list[OffsetRange]:
        opts = self.opts
        assert opts.ending is not None
        reader = offset_reader(opts)
        try:
            tps = reader.partitions(opts.subscription)
            start = resolve(opts.starting, tps, reader, name="startingOffsets", is_start=True)
            end = resolve(opts.ending, tps, reader, name="endingOffsets", is_start=False)
            if self.pushdown is not None:
                start, end = self.pushdown.cut(start, end, reader.for_times)
        finally:
            reader.close()
        for tp in sort_partitions(end):
            if tp in start and end[tp] < start[tp]:
                raise ValueError(
                    f"The ending offset {end[tp]} of {tp[0]}-{tp[1]} is before its starting offset "
                    f"{start[tp]}"
                )
        return plan_ranges(start, end, opts.min_partitions, opts.max_records_per_partition)

    def partitions(self) -> list[InputPartition]:
        return [RangePartition(r) for r in self.plan()]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, RangePartition):  # Spark reads one None partition when
            return iter(())  # partitions() planned none (nothing to read)
        return read_partition(self.opts, self.schema, partition.range)


class KafkalitePushdownReader(KafkaliteBatchReader):
    """The batch reader with `pushFilters` (option kafkalite.pushdown=true): partition and offset
    filters prune and cut ranges, timestamp filters cut ranges through ListOffsets and join key
    filters in the broker's fetch filter (kafkalite.spark.pushdown). Spark applies what it returns."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.pushdown, rest = push_filters(filters)
        self.opts = replace(
            self.opts, fetch_filter=self.pushdown.fetch_filter(self.opts.fetch_filter)
        )
        log.info("pushed down: %s; fetch filter: %s", self.pushdown.pushed, self.opts.fetch_filter)
        return rest


class KafkaliteStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Offsets are {"topic": {"partition": next offset}}; Spark's offset log and
    commit log in the checkpoint are the source of truth. With `kafka.group.id` or `groupIdPrefix`
    the offsets of each finished micro-batch are also committed to that broker-side group, so the
    broker's consumer-lag metrics show how far the query is behind (reads never use the group)."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._reader: OffsetReader | None = None
        self._target: dict[TopicPartitionKey, int] | None = None
        self._last_trigger = time.monotonic()
        self.data_loss_skipped = 0  # data-loss events skipped by this reader (failOnDataLoss=false)
        self._reported: set[str] = set()
        self.group_id = opts.group_id or (
            f"{opts.group_id_prefix}-{uuid.uuid4()}" if opts.group_id_prefix else None
        )
        self._group_committed: dict[TopicPartitionKey, int] = {}
        if opts.group_id:
            log.warning(FIXED_GROUP_ID_WARNING)

    # -- driver side
    @property
    def reader(self) -> OffsetReader:
        if self._reader is None:
            self._reader = offset_reader(self.opts)
        return self._reader

    def _report_data_loss(self, what: str, how: str = "skipping them") -> None:
        if what in self._reported:  # latestOffset may see the same event again before a batch
            return
        report_data_loss(what, self.opts.fail_on_data_loss, how=how)
        self._reported.add(what)
        self.data_loss_skipped += 1

    def initialOffset(self) -> dict[str, Any]:
        tps = self.reader.partitions(self.opts.subscription)
        start = resolve(self.opts.starting, tps, self.reader, name="startingOffsets", is_start=True)
        return to_offset_dict(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.reader.partitions(self.opts.subscription)
        self._target = self.reader.latest(tps)

    def _latest(self) -> tuple[set[TopicPartitionKey], dict[TopicPartitionKey, int]]:
        """(every partition the subscription covers now, their latest offsets capped by the
        Trigger.AvailableNow target)."""
        tps = self.reader.partitions(self.opts.subscription)
        latest = self.reader.latest(tps)
        if self._target is not None:
            latest = {
                tp: min(o, self._target[tp]) for tp, o in latest.items() if tp in self._target
            }
        return tps, latest

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return to_offset_dict(self._latest()[1])

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next batch's end offsets, after Spark's KafkaSource data-loss rules (checked here, on
        the driver, before the batch is written to the offset log): partitions gone, a new partition
        whose log no longer starts at 0, offsets going backwards, offsets removed by retention."""
        # Spark plans a batch once the previous one is committed: `start` has been processed
        self._commit_to_group(start)
        begin = from_offset_dict(start)
        tps, latest = self._latest()
        gone = sort_partitions(set(begin) - tps)
        if gone:
            self._report_data_loss(
                f"partitions {[f'{t}-{p}' for t, p in gone]} are gone (deleted)",
                how="no longer reading them",
            )
        new = [tp for tp in latest if tp not in begin]
        base = {tp: begin[tp] for tp in latest if tp in begin}
        earliest = self.reader.earliest(latest)
        for tp in sort_partitions(latest):
            where = f"{tp[0]}-{tp[1]}"
            first = earliest.get(tp, 0)
            if tp not in base:  # discovered since the last batch: its log must start at 0
                if first > 0:
                    self._report_data_loss(
                        f"new partition {where} starts at offset {first}, not 0: records 0 to "
                        f"{first - 1} were removed before the query saw them",
                        how="reading it from its log start",
                    )
                base[tp] = first
            elif latest[tp] < base[tp]:
                self._report_data_loss(
                    f"the offset of {where} went back from {base[tp]} to {latest[tp]} (the "
                    "partition was deleted and re-created, or its log was truncated)",
                    how=f"continuing from offset {latest[tp]}",
                )
                base[tp] = latest[tp]
            elif base[tp] < first and self.opts.fail_on_data_loss:
                # under failOnDataLoss=false the executors skip (and count) the deleted offsets
                self._report_data_loss(
                    f"offsets {base[tp]} to {min(first, latest[tp]) - 1} of {where} were deleted "
                    f"(log start offset is now {first})"
                )
        if new:
            log.info("new partitions %s: reading them from their log start", new)
        if isinstance(limit, ReadAllAvailable):
            end = latest
        else:
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            max_rows = max_rows or self.opts.max_offsets_per_trigger
            min_rows = self.opts.min_offsets_per_trigger
            if min_rows and self._target is None:
                waited_ms = (time.monotonic() - self._last_trigger) * 1000
                if backlog(base, latest) < min_rows and waited_ms < self.opts.max_trigger_delay_ms:
                    return start
            end = rate_limit(max_rows, base, latest) if max_rows else latest
        result = to_offset_dict(end)
        if end != begin:
            self._last_trigger = time.monotonic()
        return result

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Ranges from start to end (data loss was judged in latestOffset). Only partitions new in
        this batch need the broker: they start at their log start, as in Spark."""
        begin = from_offset_dict(start)
        until = from_offset_dict(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.reader.earliest(new))
        # a partition whose offset went back (until < begin) has no range this batch
        return [
            RangePartition(r)
            for r in plan_ranges(
                begin, until, self.opts.min_partitions, self.opts.max_records_per_partition
            )
        ]

    def commit(self, end: dict[str, Any]) -> None:
        """Spark's checkpoint holds the offsets; this only feeds the monitoring group, if any."""
        self._commit_to_group(end)

    def _commit_to_group(self, processed: dict[str, Any]) -> None:
        """With a group id configured, commit offsets the query has finished processing to it (only
        so the broker's consumer-lag metrics show the query's lag; reads never use the group)."""
        if self.group_id is None:
            return
        offsets = from_offset_dict(processed)
        if not offsets or offsets == self._group_committed:
            return
        try:
            self.reader.admin.alter_consumer_group_offsets(self.group_id, offsets)
            self._group_committed = offsets
        except Exception as exc:  # monitoring only: never fails the query
            log.warning(
                "could not commit the query's offsets to group %s (used for lag monitoring only): "
                "%s",
                self.group_id,
                exc,
            )

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = None
        return state

    # -- executor side
    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, RangePartition):  # Spark reads one None partition when
            return iter(())  # partitions() planned none (nothing to read)
        return read_partition(self.opts, self.schema, partition.range)


class KafkaliteDataSource(DataSource):
    """`spark.read.format("kafkalite")` / `readStream` / `write` / `writeStream`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _include_headers(self) -> bool:
        opts: Mapping[str, str] = self.options
        return str(opts.get("includeHeaders", "false")).strip().lower() == "true"

    def schema(self) -> StructType:
        return kafka_schema(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_source_options(self.options, streaming=False)
        _check_schema(schema, opts.include_headers)
        if pushdown_enabled(self.options):  # needs spark.sql.python.filterPushdown.enabled=true
            return KafkalitePushdownReader(opts, schema)
        return KafkaliteBatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_source_options(self.options, streaming=True)
        _check_schema(schema, opts.include_headers)
        return KafkaliteStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from kafkalite.spark.options import EXACTLY_ONCE
        from kafkalite.spark.writer import KafkaliteBatchWriter, validate_input_schema

        if overwrite:  # PySpark itself refuses Ignore and ErrorIfExists for Python data sources
            raise ValueError(
                "Save mode Overwrite is not allowed for kafkalite (as for Spark's Kafka sink, a "
                "topic cannot be overwritten): use mode('append')"
            )
        opts = parse_sink_options(self.options)
        if opts.exactly_once:
            raise ValueError(f"Option '{EXACTLY_ONCE}' applies to streaming writes only")
        validate_input_schema(schema, opts)
        return KafkaliteBatchWriter(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from kafkalite.spark.writer import KafkaliteStreamWriter, validate_input_schema

        opts = parse_sink_options(self.options)
        validate_input_schema(schema, opts)
        if opts.exactly_once:
            from kafkalite.spark.exactly_once import KafkaliteExactlyOnceStreamWriter

            return KafkaliteExactlyOnceStreamWriter(opts, schema)
        return KafkaliteStreamWriter(opts, schema)
