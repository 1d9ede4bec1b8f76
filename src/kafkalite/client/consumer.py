"""KafkaConsumer: subscribe/assign, poll() driving the group coordinator and the fetcher, offset
resets and commits, seek/pause/position, offsets_for_times; iterating yields ConsumerRecords.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kafkalite.client.config import CONSUMER, make_config
from kafkalite.client.coordinator import ConsumerCoordinator
from kafkalite.client.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from kafkalite.client.fetcher import Fetcher
from kafkalite.client.io_thread import IOThread
from kafkalite.client.network import NetworkClient
from kafkalite.client.serialization import make_deserializer
from kafkalite.client.structs import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from kafkalite.client.subscription import EARLIEST, LATEST, SubscriptionState
from kafkalite.filters import compile_filter

log = logging.getLogger("kafkalite.client.consumer")


def _tps(parts: Iterable[Any]) -> list[TopicPartition]:
    return [TopicPartition(*tp) for tp in parts]


class KafkaConsumer:
    """A consumer for one thread. `KafkaConsumer("topic", bootstrap_servers=..., group_id=...)`.

    The rebalance listener's callbacks and the commit callbacks of `commit_async` run inside poll() /
    on the I/O thread respectively; do not call blocking consumer methods from commit callbacks.
    """

    def __init__(self, *topics: str, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.consumer_timeout_ms = kwargs.pop("consumer_timeout_ms", None)
        self.config = cfg = make_config(CONSUMER, config, kwargs)
        if cfg["filter"]:
            compile_filter(cfg["filter"])  # a bad expression: FilterError before any thread starts
        reset = str(cfg["auto.offset.reset"]).lower()
        reset = {
            "smallest": "earliest",
            "largest": "latest",
            "beginning": "earliest",
            "end": "latest",
        }.get(reset, reset)
        if reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto.offset.reset must be earliest, latest or none, not {reset!r}")
        self._io = IOThread(f"kafkalite-consumer-{cfg['client.id']}")
        self._client = NetworkClient(cfg, self._io)
        self._subs = SubscriptionState(reset)
        self._fetcher = Fetcher(
            self._client,
            self._subs,
            cfg,
            make_deserializer(cfg["key.deserializer"]),
            make_deserializer(cfg["value.deserializer"]),
        )
        self._data_ready = threading.Condition()
        self._fetcher.data_ready = self._data_ready
        self._coordinator: ConsumerCoordinator | None = None
        if cfg["group.id"]:
            self._coordinator = ConsumerCoordinator(self._client, self._subs, cfg)
            self._coordinator.before_revoke = self._commit_before_revoke
        self._auto_commit = bool(cfg["enable.auto.commit"]) and self._coordinator is not None
        self._auto_commit_interval = int(cfg["auto.commit.interval.ms"]) / 1000
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._max_poll_records = int(cfg["max.poll.records"])
        self._api_timeout = int(cfg["default.api.timeout.ms"]) / 1000
        self._iter_buffer: collections.deque[ConsumerRecord] = collections.deque()
        self._closed = False
        self._fetcher.start()
        if topics:
            self.subscribe(list(topics), listener=cfg.get("rebalance.listener"))

    # -- subscription
    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        if isinstance(topics, str):
            topics = [topics]
        topics = list(topics)
        if not topics and pattern is None:
            raise ValueError("subscribe() needs topics or a pattern")
        if self._coordinator is None:
            raise IllegalStateError("subscribe() needs group.id (or use assign())")
        self._subs.subscribe(topics, pattern, listener)
        md = self._client.metadata
        if pattern is None:
            md.want_all = False
            md.set_topics(set(topics))
        else:
            md.want_all = True
            md.request_update()
        self._coordinator.rejoin_needed = True

    def subscription(self) -> set[str]:
        return set(self._subs.topics)

    def assign(self, partitions: Iterable[Any]) -> None:
        parts = _tps(partitions)
        self._subs.assign_from_user(parts)
        self._client.metadata.set_topics({tp.topic for tp in parts})
        self._fetcher.wakeup()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    def unsubscribe(self) -> None:
        if self._coordinator is not None and self._subs.assignment and not self._subs.manual:
            self._commit_before_revoke(list(self._subs.assignment))
            self._coordinator._listener("on_partitions_revoked", list(self._subs.assignment))
            self._coordinator.leave_group()
        self._subs.unsubscribe()
        self._fetcher.wakeup()

    # -- polling
    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records fetched so far (waiting up to timeout_ms for some); also keeps group membership."""
        if self._closed:
            raise IllegalStateError("consumer is closed")
        if not self._subs.subscribed and not self._subs.assignment and not self._subs.manual:
            raise IllegalStateError(
                "consumer is not subscribed to any topic nor assigned partitions"
            )
        deadline = time.monotonic() + max(0.0, timeout_ms) / 1000
        limit = max_records or self._max_poll_records
        while True:
            if self._coordinator is not None:
                self._coordinator.poll(deadline)
            if self._fetcher.errors:
                raise self._fetcher.errors.popleft()
            self._update_positions(deadline)
            recs = self._fetcher.fetched_records(limit)
            if recs:
                self._maybe_auto_commit()
                return recs
            left = deadline - time.monotonic()
            if left <= 0:
                self._maybe_auto_commit()
                return {}
            with self._data_ready:
                if not self._fetcher.has_buffered():
                    self._data_ready.wait(min(left, 0.1))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        buf = self._iter_buffer
        if buf:
            return buf.popleft()
        started = time.monotonic()
        while True:
            wait = 1000.0
            if self.consumer_timeout_ms is not None:
                wait = max(0.0, self.consumer_timeout_ms - (time.monotonic() - started) * 1000)
            for recs in self.poll(wait).values():
                buf.extend(recs)
            if buf:
                return buf.popleft()
            if (
                self.consumer_timeout_ms is not None
                and (time.monotonic() - started) * 1000 >= self.consumer_timeout_ms
            ):
                raise StopIteration

    def _update_positions(self, deadline: float) -> None:
        subs = self._subs
        missing = subs.missing_positions()
        if missing:
            committed: dict[TopicPartition, Any] = {}
            if self._coordinator is not None:
                committed = self._committed(
                    missing, max(deadline, time.monotonic() + self._api_timeout)
                )
            for tp in missing:
                om = committed.get(tp)
                if om is not None:
                    subs.seek(tp, om.offset)
                elif subs.default_reset == "none":
                    raise NoOffsetForPartitionError(
                        f"{tp} has no committed offset (auto.offset.reset=none)"
                    )
                else:
                    subs.request_reset(tp, EARLIEST if subs.default_reset == "earliest" else LATEST)
        resets: dict[TopicPartition, int] = {}
        for tp in subs.needing_reset():
            to = subs.assignment[tp].reset_to
            if to in (EARLIEST, LATEST):
                resets[tp] = to
        if resets:
            found = self._io.run(
                self._fetcher.list_offsets(resets, self._api_timeout), self._api_timeout + 1
            )
            for tp, (offset, _ts) in found.items():
                st = subs.assignment.get(tp)
                if st is not None and st.reset_to is not None:
                    subs.seek(tp, offset)
        if missing or resets:
            self._fetcher.wakeup()

    # -- commits
    def _maybe_auto_commit(self) -> None:
        if self._auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self._auto_commit_interval
            offsets = self._consumed_offsets()
            if offsets:
                self.commit_async(offsets)

    def _consumed_offsets(
        self, parts: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        pos = self._subs.all_consumed()
        if parts is not None:
            want = set(parts)
            pos = {tp: o for tp, o in pos.items() if tp in want}
        return {tp: OffsetAndMetadata(o, "") for tp, o in pos.items()}

    def _commit_before_revoke(self, parts: list[TopicPartition]) -> None:
        if self._auto_commit:
            offsets = self._consumed_offsets(parts)
            if offsets:
                self.commit(offsets)

    def _normalize_offsets(self, offsets: Any) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for tp, om in dict(offsets).items():
            if isinstance(om, int):
                om = OffsetAndMetadata(om, "")
            elif isinstance(om, tuple) and not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(*om)
            out[TopicPartition(*tp)] = om
        return out

    def commit(self, offsets: Any = None, asynchronous: bool = False) -> None:
        """Commit `offsets` ({tp: offset | OffsetAndMetadata(offset, metadata)}) or the consumed positions."""
        coord = self._require_group()
        data = self._consumed_offsets() if offsets is None else self._normalize_offsets(offsets)
        if asynchronous:
            self.commit_async(data)
            return
        deadline = time.monotonic() + self._api_timeout
        coord.call_with_retry(lambda: coord.commit_offsets(data), deadline)

    commit_sync = commit

    def commit_async(
        self,
        offsets: Any = None,
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
        | None = None,
    ) -> concurrent.futures.Future[None]:
        coord = self._require_group()
        data = self._consumed_offsets() if offsets is None else self._normalize_offsets(offsets)

        async def go() -> None:
            if coord.coordinator is None:
                await coord._find()
            await coord.commit_offsets(data)

        fut = self._io.submit(go())

        def done(f: concurrent.futures.Future[None]) -> None:
            exc = f.exception() if not f.cancelled() else None
            if exc is not None:
                log.debug("async commit failed: %s", exc)
            if callback is not None:
                try:
                    callback(data, exc)
                except Exception:
                    log.exception("commit callback raised")

        fut.add_done_callback(done)
        return fut

    def committed(self, partition: Any, timeout: float | None = None) -> Any:
        """The committed OffsetAndMetadata of one partition (None when there is none), or a dict for a list."""
        single = (
            isinstance(partition, tuple) and len(partition) == 2 and isinstance(partition[1], int)
        )
        parts = [TopicPartition(*partition)] if single else _tps(partition)
        deadline = time.monotonic() + (self._api_timeout if timeout is None else timeout)
        res = self._committed(parts, deadline)
        return res.get(parts[0]) if single else {tp: res.get(tp) for tp in parts}

    def _committed(self, parts: list[TopicPartition], deadline: float) -> dict[TopicPartition, Any]:
        coord = self._require_group()
        result: dict[TopicPartition, Any] = coord.call_with_retry(
            lambda: coord.fetch_committed(parts), deadline
        )
        return result

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation and member id: pass it to a transactional producer's
        send_offsets_to_transaction() so the coordinator refuses offsets from a stale member."""
        coord = self._require_group()
        return ConsumerGroupMetadata(
            coord.group_id, coord.generation, coord.member_id, coord.instance_id
        )

    def _require_group(self) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise IllegalStateError("this needs group.id")
        return self._coordinator

    # -- positions
    def position(self, partition: Any, timeout: float | None = None) -> int:
        tp = TopicPartition(*partition)
        st = self._subs.state(tp)
        deadline = time.monotonic() + (self._api_timeout if timeout is None else timeout)
        while st.position is None:
            self._update_positions(deadline)
            if st.position is None and time.monotonic() > deadline:
                raise KafkaTimeoutError(f"no position for {tp}")
        return st.position

    def seek(self, partition: Any, offset: int) -> None:
        if offset < 0:
            raise ValueError("seek offset must be >= 0")
        self._subs.seek(TopicPartition(*partition), int(offset))
        self._fetcher.wakeup()

    def seek_to_beginning(self, *partitions: Any) -> None:
        for tp in _tps(partitions) or list(self._subs.assignment):
            self._subs.request_reset(tp, EARLIEST)
        self._fetcher.wakeup()

    def seek_to_end(self, *partitions: Any) -> None:
        for tp in _tps(partitions) or list(self._subs.assignment):
            self._subs.request_reset(tp, LATEST)
        self._fetcher.wakeup()

    def offsets_for_times(
        self, timestamps: dict[Any, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        query = {TopicPartition(*tp): int(ts) for tp, ts in timestamps.items()}
        found = self._io.run(
            self._fetcher.list_offsets(query, self._api_timeout), self._api_timeout + 1
        )
        return {
            tp: None if found.get(tp, (-1, -1))[0] < 0 else OffsetAndTimestamp(*found[tp])
            for tp in query
        }

    def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        query = {tp: EARLIEST for tp in _tps(partitions)}
        found = self._io.run(
            self._fetcher.list_offsets(query, self._api_timeout), self._api_timeout + 1
        )
        return {tp: v[0] for tp, v in found.items()}

    def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        query = {tp: LATEST for tp in _tps(partitions)}
        found = self._io.run(
            self._fetcher.list_offsets(query, self._api_timeout), self._api_timeout + 1
        )
        return {tp: v[0] for tp, v in found.items()}

    def pause(self, *partitions: Any) -> None:
        for tp in _tps(partitions):
            self._subs.state(tp).paused = True

    def resume(self, *partitions: Any) -> None:
        for tp in _tps(partitions):
            self._subs.state(tp).paused = False
        self._fetcher.wakeup()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._subs.assignment.items() if s.paused}

    def highwater(self, partition: Any) -> int | None:
        st = self._subs.assignment.get(TopicPartition(*partition))
        return None if st is None or st.high_watermark < 0 else st.high_watermark

    # -- metadata
    def topics(self) -> set[str]:
        md = self._client.metadata
        self._io.run(self._client.refresh_metadata(None), self._api_timeout)
        return {n for n, t in md.topics.items() if not t.is_internal}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        md = self._client.metadata
        if md.partitions_for(topic) is None:
            md.add_topics(topic)
            self._io.run(self._client.refresh_metadata([topic]), self._api_timeout)
        parts = md.partitions_for(topic)
        return None if parts is None else set(parts)

    # -- lifecycle
    def close(self, autocommit: bool = True, timeout: float = 30) -> None:
        if self._closed:
            return
        self._closed = True
        coord = self._coordinator
        try:
            if coord is not None and not self._subs.manual and coord.generation >= 0:
                parts = list(self._subs.assignment)
                if autocommit and self._auto_commit and parts:
                    try:
                        self.commit(self._consumed_offsets(parts))
                    except Exception as exc:
                        log.warning("final commit failed: %s", exc)
                if parts:
                    coord._listener("on_partitions_revoked", parts)
                coord.leave_group()
            elif coord is not None and autocommit and self._auto_commit and self._subs.manual:
                try:
                    self.commit()
                except Exception as exc:
                    log.warning("final commit failed: %s", exc)
        finally:
            if coord is not None:
                coord.close()
            try:
                self._io.run(self._client.close(), 5)
            except Exception:
                pass
            self._io.stop()

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Consumer = KafkaConsumer
