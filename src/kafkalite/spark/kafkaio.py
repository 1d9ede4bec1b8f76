"""The connector's narrow adapter over the kafkalite client's public classes: partition discovery and
offset lookups on the driver, reading one offset range into Arrow record batches on an executor.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from kafkalite.client import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaError,
    KafkaTimeoutError,
    TopicPartition,
)
from kafkalite.client.config import COMMON
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


T = TypeVar("T")


class DataLossError(RuntimeError):
    """Offsets the query needed are gone (retention, DeleteRecords, deleted partitions)."""


class FetchTimeoutError(TimeoutError):
    """A range read gained no offset within kafkaConsumer.pollTimeoutMs. The task fails and Spark
    retries it (spark.task.maxFailures); no offset is skipped and nothing is labelled data loss."""


class DataLossCounter:
    """Data-loss events skipped under failOnDataLoss=false in this process (driver or executor)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events = 0

    def add(self) -> int:
        with self._lock:
            self.events += 1
            return self.events


DATA_LOSS_SKIPPED = DataLossCounter()


def report_data_loss(what: str, fail_on_data_loss: bool, *, how: str = "skipping them") -> None:
    """Spark's rule: fail the query (failOnDataLoss=true) or log a warning and count the event."""
    if fail_on_data_loss:
        raise DataLossError(data_loss_message(what))
    n = DATA_LOSS_SKIPPED.add()
    log.warning(
        "Data loss: %s; %s (failOnDataLoss=false; data-loss events skipped in this process: %d)",
        what,
        how,
        n,
    )


def fetch_timeout_message(where: str, position: int, until: int, poll_timeout_ms: int) -> str:
    return (
        f"Timed out after {poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs) reading {where} at "
        f"offset {position} (the task's range ends at {until}). This is not data loss: the task "
        "fails and is retried; no offset is skipped."
    )


def bounded_client(client: Mapping[str, Any], poll_timeout_ms: int) -> dict[str, Any]:
    """Client settings for a range read: no single request or API call may wait longer than the
    poll timeout (so kafkaConsumer.pollTimeoutMs bounds every wait of the read)."""
    cfg: dict[str, Any] = dict(client)
    for prop, default in (
        ("request.timeout.ms", 30_000),
        ("default.api.timeout.ms", 60_000),
        ("socket.connection.setup.timeout.ms", 10_000),
    ):
        try:
            given = int(cfg.get(prop, default))
        except (TypeError, ValueError):
            given = default
        cfg[prop] = max(1, min(given, poll_timeout_ms))
    return cfg


def with_retries(what: str, fn: Callable[[], T], retries: int, interval_ms: int) -> T:
    """Run an offset lookup, retrying it `retries` times `interval_ms` apart
    (fetchOffset.numRetries / fetchOffset.retryIntervalMs)."""
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:  # as Spark: any non-fatal failure of a lookup is retried
            if attempt >= retries:
                raise
            attempt += 1
            log.warning(
                "%s failed (attempt %d of %d), retrying in %d ms: %s",
                what,
                attempt,
                retries + 1,
                interval_ms,
                exc,
            )
            time.sleep(interval_ms / 1000)


def consumer_config(client: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {k: v for k, v in client.items() if k != "group.id"}
    cfg.update(extra)
    cfg.update(_FORCED)
    return cfg


def admin_config(client: Mapping[str, Any]) -> dict[str, Any]:
    """The connection and security settings of `client` (consumer-only settings such as
    isolation.level or group.id mean nothing to an admin client and would only draw warnings)."""
    cfg = {
        k: v
        for k, v in client.items()
        if k in COMMON or k.startswith(("security.", "ssl.", "sasl."))
    }
    cfg["allow.auto.create.topics"] = False  # a read never creates topics
    return cfg


def data_loss_message(what: str) -> str:
    return (
        f"Data loss: {what}. The offsets the query needed are no longer available in kafkalite "
        "(removed by retention or DeleteRecords, or the topic/partition was deleted). "
        "Set the source option failOnDataLoss=false to skip ahead instead of failing."
    )


class OffsetReader:
    """Driver-side metadata and ListOffsets through one KafkaConsumer (no group, never commits)."""

    def __init__(
        self, client: Mapping[str, Any], *, num_retries: int = 3, retry_interval_ms: int = 1000
    ) -> None:
        self.consumer = KafkaConsumer(config=consumer_config(client))
        admin_cfg = admin_config(client)
        self.admin = KafkaAdminClient(config=admin_cfg)
        self.num_retries = num_retries
        self.retry_interval_ms = retry_interval_ms

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        return with_retries(what, fn, self.num_retries, self.retry_interval_ms)

    def partitions(self, sub: Subscription) -> set[TopicPartitionKey]:
        """The partitions the subscription covers now (fresh metadata, so new partitions show up)."""
        if sub.kind == "assign":
            return set(sub.assigned)
        return self._retry("listing the partitions to read", lambda: self._partitions(sub))

    def _partitions(self, sub: Subscription) -> set[TopicPartitionKey]:
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
        found = self._retry(
            "fetching the earliest offsets", lambda: self.consumer.beginning_offsets(parts)
        )
        return {(tp.topic, tp.partition): o for tp, o in found.items()}

    def latest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        parts = [TopicPartition(*tp) for tp in tps]
        if not parts:
            return {}
        found = self._retry("fetching the latest offsets", lambda: self.consumer.end_offsets(parts))
        return {(tp.topic, tp.partition): o for tp, o in found.items()}

    def for_times(
        self, stamps: Mapping[TopicPartitionKey, int]
    ) -> dict[TopicPartitionKey, int | None]:
        if not stamps:
            return {}
        query = {TopicPartition(*tp): ts for tp, ts in stamps.items()}
        found = self._retry(
            "fetching offsets by timestamp", lambda: self.consumer.offsets_for_times(query)
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

    Offsets below the log start are data loss: an error when fail_on_data_loss, else skipped
    (logged and counted). No progress for poll_timeout_ms raises FetchTimeoutError (never a short
    range).
    """
    where = f"{rng.topic}-{rng.partition}"
    consumer = _consumer(bounded_client(client, poll_timeout_ms))
    tp = TopicPartition(rng.topic, rng.partition)
    position = start = rng.from_offset
    until = rng.until_offset
    try:
        try:
            begin = consumer.beginning_offsets([tp])[tp]
        except KafkaTimeoutError as exc:
            raise FetchTimeoutError(
                fetch_timeout_message(where, start, until, poll_timeout_ms)
            ) from exc
        if start < begin:
            what = (
                f"offsets {start} to {min(begin, until) - 1} of {where} were deleted (log start "
                f"offset is now {begin})"
            )
            report_data_loss(what, fail_on_data_loss)
            position = start = begin
        if start >= until:
            return
        consumer.assign([tp])
        consumer.seek(tp, start)
        last_progress = time.monotonic()
        while position < until:
            if time.monotonic() - last_progress > poll_timeout_ms / 1000:
                raise FetchTimeoutError(
                    fetch_timeout_message(where, position, until, poll_timeout_ms)
                )
            try:
                got = consumer.poll(timeout_ms=min(200, poll_timeout_ms)).get(tp)
            except KafkaTimeoutError:
                continue  # the loop's own deadline decides
            except KafkaError as exc:
                if getattr(exc, "code", None) != OFFSET_OUT_OF_RANGE:
                    raise
                try:
                    begin = consumer.beginning_offsets([tp])[tp]
                except KafkaTimeoutError as texc:
                    raise FetchTimeoutError(
                        fetch_timeout_message(where, position, until, poll_timeout_ms)
                    ) from texc
                what = f"offset {position} of {where} is out of range (log start offset is now {begin})"
                if begin <= position:  # not below the log start: the log went backwards
                    report_data_loss(
                        f"{what}: the log went backwards",
                        fail_on_data_loss,
                        how="skipping the rest of the range",
                    )
                    return
                report_data_loss(what, fail_on_data_loss, how="skipping ahead")
                position = min(begin, until)
                last_progress = time.monotonic()
                consumer.seek(tp, position)
                continue
            if got:
                last_progress = time.monotonic()
                if got[-1].offset >= until:
                    got = [r for r in got if r.offset < until]
                if got:
                    # a gap before got[0] is compaction or transaction markers, not data loss
                    yield got
                    position = got[-1].offset + 1
            try:
                now_at = consumer.position(tp, timeout=0.2)
            except KafkaTimeoutError:
                continue
            if now_at > position:  # past markers / aborted records: that is progress too
                position = now_at
                last_progress = time.monotonic()
    finally:
        try:
            consumer.close(autocommit=False, timeout=min(5.0, poll_timeout_ms / 1000))
        except Exception:  # pragma: no cover - best effort
            log.debug("closing the range consumer failed", exc_info=True)


def read_range_columns(
    client: Mapping[str, Any],
    rng: OffsetRange,
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    include_headers: bool = True,
    fetch_filter: str | None = None,
) -> Iterator[Any]:
    """The fast path of `read_range`: yields `columnar.new_columns()` chunks covering [from, until)
    (headers decoded only when include_headers).

    Raw Fetch through the client's NetworkClient and decoding straight into columns, with the same
    rules: read_committed honoured, data loss failed or skipped+counted, a stall raises
    FetchTimeoutError.
    """
    from kafkalite.spark.columnar import FetchTimeout, RangeFetcher

    fetcher = RangeFetcher(
        consumer_config(bounded_client(client, poll_timeout_ms)),
        poll_timeout_ms,
        fetch_filter=fetch_filter,
    )
    where = f"{rng.topic}-{rng.partition}"
    position, until = rng.from_offset, rng.until_offset
    try:
        begin = fetcher.log_start(rng.topic, rng.partition)
        while position < until:
            if position < begin:
                what = (
                    f"offsets {position} to {min(begin, until) - 1} of {where} were deleted "
                    f"(log start offset is now {begin})"
                )
                report_data_loss(what, fail_on_data_loss)
                position = begin
                continue
            chunks = fetcher.read(rng.topic, rng.partition, position, until, include_headers)
            for kind, value in chunks:
                if kind == "columns":
                    position = value.last_offset + 1
                    yield value
                    continue
                # out of range
                position = value
                begin = fetcher.log_start(rng.topic, rng.partition)
                if begin <= position:
                    report_data_loss(
                        f"offset {position} of {where} is out of range (log start offset "
                        f"{begin}): the log went backwards",
                        fail_on_data_loss,
                        how="skipping the rest of the range",
                    )
                    return
                break
            else:
                return
    except FetchTimeout as exc:
        raise FetchTimeoutError(
            fetch_timeout_message(where, position, until, poll_timeout_ms) + f" ({exc})"
        ) from exc
    finally:
        fetcher.close()
