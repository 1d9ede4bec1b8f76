"""Single-node mode's topics at startup: every topic's partitions led here and published in the metadata
cache, topics found on disk only registered again, and after a crash logs recovered while serving led as they come.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Callable

from kafkalite.cluster.metadata import MetadataError, MetadataStore, TopicInfo
from kafkalite.cluster.metadata_cache import MetadataCache, local_topic_metadata
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.storage import Log, LogManager

log = logging.getLogger("kafkalite.broker")

# a broker that loaded at least this many logs freezes its startup objects out of the collector
# (embedded test brokers, with a few logs each, do not: frozen objects are never freed)
FREEZE_AFTER_LOADING_LOGS = 10_000


class HandOver:
    """Logs recovered on the loading thread, for the event loop: whatever came in the last tenth
    of a second is taken in one go (each topic's metadata is then published once for hundreds of
    its partitions, not once for each: 100,000 partitions after a crash)."""

    WAIT_S = 0.1

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: list[Log] = []
        self._scheduled = False

    def hand_over(
        self, logs: list[Log], loop: asyncio.AbstractEventLoop, drain: Callable[[], None]
    ) -> None:
        with self._lock:
            self._logs.extend(logs)
            if self._scheduled:
                return
            self._scheduled = True
        loop.call_soon_threadsafe(loop.call_later, self.WAIT_S, drain)

    def take(self) -> list[Log]:
        with self._lock:
            logs, self._logs = self._logs, []
            self._scheduled = False
            return logs


def recovered_while_serving(tp: tuple[str, int]) -> bool:
    """User topics' logs; the internal ones (`__consumer_offsets`, ...) are recovered first."""
    return not tp[0].startswith("__")


def settle_collector(log_manager: LogManager, enabled: bool) -> None:
    """After loading: many logs are frozen out of the collector's sight, and it runs again."""
    if len(log_manager.partitions()) >= FREEZE_AFTER_LOADING_LOGS:
        gc.freeze()  # (no full pass first: 3 s at 100,000 logs, for little garbage)
    if enabled:
        gc.enable()


class LocalTopics:
    """A single node's topics: it leads every partition and publishes each topic in its cache."""

    def __init__(
        self,
        broker_id: int,
        metadata_store: MetadataStore,
        metadata_cache: MetadataCache,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        stopping: Callable[[], bool],
    ) -> None:
        self.broker_id = broker_id
        self.metadata_store = metadata_store
        self.metadata_cache = metadata_cache
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self._stopping = stopping
        self._recovered = HandOver()  # logs recovered while serving, for the event loop to lead

    def recover_later(self, gc_enabled: bool) -> None:
        """After a crash: the logs left to recover are led as they come (on this event loop)."""
        loop = asyncio.get_running_loop()
        self.log_manager.load_later(
            lambda logs: self._recovered.hand_over(logs, loop, self.serve_recovered),
            lambda: loop.call_soon_threadsafe(self.all_recovered, gc_enabled),
        )

    def serve_recovered(self) -> None:
        """Logs recovered while serving are led here at once."""
        if self._stopping():
            return
        get = self.log_manager.get_log
        # (one deleted since it was recovered is not taken up again)
        logs = [lg for lg in self._recovered.take() if get(lg.topic, lg.partition) is lg]
        self.replica_manager.adopt_loaded_logs(logs)
        topics: dict[str, TopicInfo] = {}
        for lg in logs:
            info = self.metadata_store.get(lg.topic)
            if info is None or lg.partition >= info.partitions:
                continue  # (a topic found on disk only: registered once every log is known)
            try:
                self.replica_manager.create_local_leader(
                    info.name, lg.partition, info.topic_id, info.configs
                )
            except Exception:
                log.exception("cannot lead the recovered partition %s-%d", lg.topic, lg.partition)
                continue
            topics[info.name] = info
        for info in topics.values():
            self.publish(info)

    def all_recovered(self, gc_enabled: bool) -> None:
        if self._stopping():
            return
        self.reconcile()  # (topics found on disk only, now that every log is known)
        settle_collector(self.log_manager, gc_enabled)
        log.info("every log is recovered: all %d partitions serving",
                 len(self.log_manager.partitions()))  # fmt: skip

    def reconcile(self) -> None:
        """Topics whose logs exist on disk but not in the metadata file are registered again;
        every partition of every topic is created (if missing) and led here. While logs are still
        being recovered (after a crash) their partitions wait: they are led as they come, and
        topics found on disk only are registered once every log is known."""
        if self.log_manager.loading_partitions():
            for known in self.metadata_store.topics():
                self.host(known)
            return
        seen: dict[str, int] = {}
        for lg in self.log_manager.logs():
            seen[lg.topic] = max(seen.get(lg.topic, 0), lg.partition + 1)
        for topic, count in seen.items():
            info = self.metadata_store.get(topic)
            if info is None:
                log.warning(
                    "log directory of topic %s has no metadata entry; registering it again", topic
                )
                found = self.log_manager.get_log(topic, 0)
                try:
                    self.metadata_store.create_topic(
                        topic, count, topic_id=found.topic_id if found is not None else None
                    )
                except MetadataError as exc:
                    log.error("cannot register topic %s found on disk: %s", topic, exc)
            elif info.partitions < count:
                self.metadata_store.set_partitions(topic, count)
        for info in self.metadata_store.topics():
            self.host(info)

    def host(self, info: TopicInfo) -> None:
        """Lead every partition of `info` here (but those whose logs are still being recovered)
        and publish it in the cache."""
        loading = self.log_manager.is_loading
        for part in range(info.partitions):
            if not loading(info.name, part):
                self.replica_manager.create_local_leader(
                    info.name, part, info.topic_id, info.configs
                )
        self.publish(info)

    def publish(self, info: TopicInfo) -> None:
        loading = self.log_manager.is_loading
        offline = {p for p in range(info.partitions) if loading(info.name, p)}
        self.metadata_cache.put_topic(
            local_topic_metadata(info.name, info.topic_id, info.partitions, self.broker_id, offline)
        )
