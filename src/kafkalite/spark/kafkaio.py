"""The connector's narrow adapter over the kafkalite client's public classes: partition discovery and
offset lookups on the driver, reading one offset range into Arrow record batches on an executor.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaError, TopicPartition
from kafkalite.spark.offsets import TopicPartitionKey
from kafkalite.spark.options import Subscription
from kafkalite.spark.planning import OffsetRange

log = logging.getLogger("kafkalite.spark")

OFFSET_OUT_OF_RANGE = 1
# The source tracks offsets itself: these client settings are forced, whatever kafka.* says.
_FORCED = {
    "enable.auto.commit": False,
    "auto.offset.reset": "none",
    "group.id": None,
    "allow.auto.create.topics": False,
}


class DataLossError(RuntimeError):
    """Offsets the query needed are gone (retention, DeleteRecords, deleted partitions)."""


def consumer_config(client: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {k: v for k, v in client.items() if k != "group.id"}
    cfg.update(extra)
    cfg.update(_FORCED)
    return cfg


def data_loss_message(what: str) -> str:
    return (
        f"Data loss: {what}. The offsets the query needed are no longer available in kafkalite "
        "(removed by retention or DeleteRecords, or the topic/partition was deleted). "
        "Set the source option failOnDataLoss=false to skip ahead instead of failing."
    )


class OffsetReader:
    """Driver-side metadata and ListOffsets through one KafkaConsumer (no group, never commits)."""

    def __init__(self, client: Mapping[str, Any]) -> None:
        self.consumer = KafkaConsumer(config=consumer_config(client))
        admin_cfg = {k: v for k, v in client.items() if k != "group.id"}
        admin_cfg["allow.auto.create.topics"] = False  # a read never creates topics
        self.admin = KafkaAdminClient(config=admin_cfg)

    def partitions(self, sub: Subscription) -> set[TopicPartitionKey]:
        """The partitions the subscription covers now (fresh metadata, so new partitions show up)."""
        if sub.kind == "assign":
            return set(sub.assigned)
        out: set[TopicPartitionKey] = set()
        for desc in self.admin.describe_topics(None):
            if desc.is_internal and sub.kind != "subscribe":
                continue
            if sub.matches(desc.name):
                out.update((desc.name, p.partition) for p in desc.partitions)
        return out

    def earliest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        parts = [TopicPartition(*tp) for tp in tps]
        if not parts:
            return {}
        return {
            (tp.topic, tp.partition): o for tp, o in self.consumer.beginning_offsets(parts).items()
        }

    def latest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        parts = [TopicPartition(*tp) for tp in tps]
        if not parts:
            return {}
        return {(tp.topic, tp.partition): o for tp, o in self.consumer.end_offsets(parts).items()}

    def for_times(
        self, stamps: Mapping[TopicPartitionKey, int]
    ) -> dict[TopicPartitionKey, int | None]:
        if not stamps:
            return {}
        found = self.consumer.offsets_for_times(
            {TopicPartition(*tp): ts for tp, ts in stamps.items()}
        )
        return {
            (tp.topic, tp.partition): (None if ot is None else ot.offset)
            for tp, ot in found.items()
        }

    def close(self) -> None:
        try:
            self.consumer.close(autocommit=False, timeout=5)
        except Exception:  # pragma: no cover - best effort
            log.debug("closing the offset reader's consumer failed", exc_info=True)
        try:
            self.admin.close()
        except Exception:  # pragma: no cover - best effort
            log.debug("closing the offset reader's admin client failed", exc_info=True)


# -- executor side ---------------------------------------------------------------------------------


def _consumer(client: Mapping[str, Any]) -> KafkaConsumer:
    cfg = consumer_config(
        client,
        **{
            "max.poll.records": 50_000,
            "max.partition.fetch.bytes": max(
                int(client.get("max.partition.fetch.bytes", 0) or 0), 4 * 1024 * 1024
            ),
            "client.id": client.get("client.id", "kafkalite-spark"),
        },
    )
    return KafkaConsumer(config=cfg)


def read_range(
    client: Mapping[str, Any],
    rng: OffsetRange,
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[list[Any]]:
    """Yield lists of ConsumerRecords covering offsets [from, until) of one partition, in order.

    Offsets below the log start are data loss: an error when fail_on_data_loss, else skipped.
    """
    consumer = _consumer(client)
    tp = TopicPartition(rng.topic, rng.partition)
    try:
        start = rng.from_offset
        until = rng.until_offset
        begin = consumer.beginning_offsets([tp])[tp]
        if start < begin:
            what = f"offsets {start} to {min(begin, until) - 1} of {rng.topic}-{rng.partition} were deleted (log start offset is now {begin})"
            if fail_on_data_loss:
                raise DataLossError(data_loss_message(what))
            log.warning("%s; skipping them (failOnDataLoss=false)", what)
            start = begin
        if start >= until:
            return
        consumer.assign([tp])
        consumer.seek(tp, start)
        position = start
        last_progress = time.monotonic()
        while position < until:
            try:
                got = consumer.poll(timeout_ms=200).get(tp)
            except KafkaError as exc:
                if getattr(exc, "code", None) != OFFSET_OUT_OF_RANGE:
                    raise
                begin = consumer.beginning_offsets([tp])[tp]
                what = f"offset {position} of {rng.topic}-{rng.partition} is out of range (log start offset is now {begin})"
                if fail_on_data_loss or begin <= position:
                    raise DataLossError(data_loss_message(what)) from exc
                log.warning("%s; skipping ahead (failOnDataLoss=false)", what)
                position = min(begin, until)
                consumer.seek(tp, position)
                continue
            if got:
                last_progress = time.monotonic()
                if got[-1].offset >= until:
                    got = [r for r in got if r.offset < until]
                if got:
                    if fail_on_data_loss and got[0].offset > position and position == start:
                        pass  # a gap left by compaction or transaction markers is not data loss
                    yield got
                    position = got[-1].offset + 1
                if position < until:
                    position = max(position, consumer.position(tp))
            else:
                position = max(position, consumer.position(tp))
                if time.monotonic() - last_progress > poll_timeout_ms / 1000:
                    what = f"timed out after {poll_timeout_ms} ms reading {rng.topic}-{rng.partition} at offset {position} (wanted up to {until})"
                    if fail_on_data_loss:
                        raise DataLossError(data_loss_message(what))
                    log.warning("%s; giving up on the rest of the range", what)
                    break
    finally:
        try:
            consumer.close(autocommit=False, timeout=5)
        except Exception:  # pragma: no cover - best effort
            log.debug("closing the range consumer failed", exc_info=True)


def read_range_columns(
    client: Mapping[str, Any],
    rng: OffsetRange,
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[Any]:
    """The fast path of `read_range`: yields `columnar.Columns` chunks covering [from, until).

    Raw Fetch through the client's NetworkClient and decoding straight into columns (read_uncommitted).
    """
    from kafkalite.spark.columnar import RangeFetcher

    fetcher = RangeFetcher(consumer_config(client))
    where = f"{rng.topic}-{rng.partition}"
    try:
        position, until = rng.from_offset, rng.until_offset
        begin = fetcher.log_start(rng.topic, rng.partition)
        while position < until:
            if position < begin:
                what = (
                    f"offsets {position} to {min(begin, until) - 1} of {where} were deleted "
                    f"(log start offset is now {begin})"
                )
                if fail_on_data_loss:
                    raise DataLossError(data_loss_message(what))
                log.warning("%s; skipping them (failOnDataLoss=false)", what)
                position = begin
                continue
            for kind, value in fetcher.read(
                rng.topic, rng.partition, position, until, poll_timeout_ms
            ):
                if kind == "columns":
                    position = value.offsets[-1] + 1
                    yield value
                    continue
                if kind == "out_of_range":
                    position = value
                    begin = fetcher.log_start(rng.topic, rng.partition)
                    if begin <= position:
                        raise DataLossError(
                            data_loss_message(f"offset {position} of {where} is out of range")
                        )
                    break
                what = (
                    f"timed out after {poll_timeout_ms} ms reading {where} at offset {value} "
                    f"(wanted up to {until})"
                )
                if fail_on_data_loss:
                    raise DataLossError(data_loss_message(what))
                log.warning("%s; giving up on the rest of the range", what)
                return
            else:
                return
    finally:
        fetcher.close()
