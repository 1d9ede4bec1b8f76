"""Wiring of the group coordinator into the broker: the compacted `__consumer_offsets` topic, loading it
at startup, appending the coordinator's records, and the timer task that drives `GroupCoordinator.tick`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from kafkalite.coordinator import (
    OFFSETS_TOPIC,
    CoordinatorConfig,
    CoordinatorRecord,
    Deferred,
    GroupCoordinator,
)
from kafkalite.coordinator.records import encode_batch
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records import iter_batches

log = logging.getLogger("kafkalite.broker.groups")

# topic configs Kafka gives __consumer_offsets
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}
_READ_CHUNK = 4 * 1024 * 1024
_TICK_MAX_S = 0.1

_ticker: dict[int, asyncio.Task[None]] = {}


def _now_ms() -> int:
    return int(time.time() * 1000)


def coordinator_config(broker: Any, partitions: int) -> CoordinatorConfig:
    cfg = broker.config
    defaults = CoordinatorConfig()

    def num(name: str, default: int) -> int:
        value = cfg.get(name, None)
        try:
            return int(value) if value is not None else default
        except (TypeError, ValueError):
            log.warning("ignoring %s=%r: not an integer", name, value)
            return default

    return CoordinatorConfig(
        offsets_topic_num_partitions=partitions,
        group_min_session_timeout_ms=num(
            "group.min.session.timeout.ms", defaults.group_min_session_timeout_ms
        ),
        group_max_session_timeout_ms=num(
            "group.max.session.timeout.ms", defaults.group_max_session_timeout_ms
        ),
        group_initial_rebalance_delay_ms=num(
            "group.initial.rebalance.delay.ms", defaults.group_initial_rebalance_delay_ms
        ),
        group_max_size=num("group.max.size", defaults.group_max_size),
        offsets_retention_minutes=num(
            "offsets.retention.minutes", defaults.offsets_retention_minutes
        ),
        offsets_retention_check_interval_ms=num(
            "offsets.retention.check.interval.ms", defaults.offsets_retention_check_interval_ms
        ),
        offset_metadata_max_bytes=num(
            "offset.metadata.max.bytes", defaults.offset_metadata_max_bytes
        ),
    )


def _offsets_log(broker: Any, partition: int) -> Any:
    return broker.get_log(OFFSETS_TOPIC, partition)


def _make_append(broker: Any) -> Any:
    def append(partition: int, records: list[CoordinatorRecord]) -> Deferred[ErrorCode]:
        d: Deferred[ErrorCode] = Deferred()
        lg = _offsets_log(broker, partition)
        if lg is None:
            d.complete(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return d
        try:
            lg.append(encode_batch(records, _now_ms()), leader_epoch=0)
        except Exception as exc:
            code = getattr(exc, "error_code", None)
            if code is None:
                log.exception("append to %s-%d failed", OFFSETS_TOPIC, partition)
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            else:
                log.warning("append to %s-%d failed: %s", OFFSETS_TOPIC, partition, exc)
            d.complete(ErrorCode(code))
            return d
        broker.delayed.notify((OFFSETS_TOPIC, partition))
        nf = getattr(lg, "needs_flush", None)
        if nf is not None and (nf() if callable(nf) else nf):
            # the topic's flush policy asks for an fsync: answer once it is done, off the loop thread
            loop = asyncio.get_running_loop()
            task = loop.create_task(asyncio.to_thread(lg.flush))

            def flushed(t: asyncio.Task[None]) -> None:
                exc = t.exception() if not t.cancelled() else None
                if exc is not None:
                    log.error("flush of %s-%d failed: %s", OFFSETS_TOPIC, partition, exc)
                d.complete(ErrorCode.KAFKA_STORAGE_ERROR if exc is not None else ErrorCode.NO_ERROR)

            task.add_done_callback(flushed)
        else:
            d.complete(ErrorCode.NO_ERROR)
        return d

    return append


def _read_partition(broker: Any, partition: int) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of one `__consumer_offsets` partition, oldest first (control records skipped)."""
    lg = _offsets_log(broker, partition)
    out: list[tuple[bytes | None, bytes | None]] = []
    if lg is None:
        return out
    offset = lg.log_start_offset
    end = lg.log_end_offset
    while offset < end:
        info = lg.read(offset, _READ_CHUNK)
        region = info.slice
        if region is None:
            break
        advanced = False
        for batch in iter_batches(region.read_bytes(), allow_truncated_tail=True):
            if batch.next_offset <= offset:
                continue
            advanced = True
            offset = batch.next_offset
            if batch.is_control:
                continue
            out.extend((r.key, r.value) for r in batch.records)
        if not advanced:
            break
    return out


async def start(broker: Any) -> None:
    """Create or open `__consumer_offsets`, load every partition, start the coordinator's timers."""
    wanted = int(broker.config.get("offsets.topic.num.partitions", 50) or 50)
    info = broker.metadata.get(OFFSETS_TOPIC)
    if info is None:
        info = broker.create_topic(OFFSETS_TOPIC, wanted, dict(OFFSETS_TOPIC_CONFIGS))
    elif info.partitions != wanted:
        log.warning(
            "%s has %d partitions (offsets.topic.num.partitions=%d); keeping %d so groups stay where they are",
            OFFSETS_TOPIC, info.partitions, wanted, info.partitions,
        )  # fmt: skip
    partitions = int(info.partitions)
    coordinator = GroupCoordinator(
        _make_append(broker), config=coordinator_config(broker, partitions), clock=_now_ms
    )
    for p in range(partitions):
        coordinator.begin_loading(p)
    broker.group_coordinator = coordinator
    started = time.monotonic()
    total = 0
    for p in range(partitions):
        records = await asyncio.to_thread(_read_partition, broker, p)
        for key, value in records:
            coordinator.replay(p, key, value)
        coordinator.finish_loading(p)
        total += len(records)
    log.info(
        "group coordinator loaded %d record(s) of %d %s partitions in %.0f ms: %d group(s)",
        total, partitions, OFFSETS_TOPIC, (time.monotonic() - started) * 1000, len(coordinator.groups),
    )  # fmt: skip
    _ticker[id(broker)] = asyncio.get_running_loop().create_task(_drive_timers(coordinator))


async def _drive_timers(coordinator: GroupCoordinator) -> None:
    while True:
        nxt = coordinator.next_deadline()
        delay = (
            _TICK_MAX_S if nxt is None else min(max((nxt - _now_ms()) / 1000, 0.001), _TICK_MAX_S)
        )
        await asyncio.sleep(delay)
        try:
            coordinator.tick()
        except Exception:
            log.exception("group coordinator timer failed")


async def stop(broker: Any) -> None:
    task = _ticker.pop(id(broker), None)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    coordinator = broker.group_coordinator
    if coordinator is not None:
        coordinator.shutdown()


def coordinator_of(ctx: Any) -> GroupCoordinator | None:
    coord = ctx.broker.group_coordinator
    return coord if isinstance(coord, GroupCoordinator) else None


def client_host(ctx: Any) -> str:
    """Kafka's clientHost: '/' and the peer address."""
    peer = str(getattr(ctx.connection, "peer", "") or "")
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host if host else ""
