"""Incremental fetch sessions (KIP-227): the broker remembers a client's partitions and fetch positions.

Epoch 0 opens a session, -1 fetches without one; later requests carry only changes and get only changed partitions.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from kafkalite.broker.fastpath import FetchPartitionView, FetchTopicResult, FetchTopicView
from kafkalite.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

# a session's partitions are keyed by topic id (v13+) or by name, and partition
SessionKey = tuple[uuid.UUID | str | None, int]


class FetchPartitionIn(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...


class FetchTopicIn(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[FetchPartitionIn]: ...


class ForgottenTopicIn(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class FetchSessionRequest(Protocol):
    """What a session reads of a Fetch request (the fast-path view or the decoded message)."""

    @property
    def session_id(self) -> int: ...
    @property
    def session_epoch(self) -> int: ...
    @property
    def topics(self) -> Sequence[FetchTopicIn]: ...


class CachedPartition:
    __slots__ = (
        "fetch_offset",
        "last_hw",
        "last_log_start",
        "max_bytes",
        "partition",
        "topic",
        "topic_id",
    )

    def __init__(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        partition: int,
        fetch_offset: int,
        max_bytes: int,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.last_hw = -2  # never sent: the first answer includes the partition
        self.last_log_start = -2


class FetchSession:
    __slots__ = ("by_id", "epoch", "id", "last_used", "partitions")

    def __init__(self, session_id: int, by_id: bool) -> None:
        self.id = session_id
        self.by_id = by_id
        self.epoch = 1  # the epoch the next (incremental) request must carry
        self.partitions: dict[SessionKey, CachedPartition] = {}
        self.last_used = time.monotonic()

    def key(self, topic: str, topic_id: uuid.UUID | None, partition: int) -> SessionKey:
        return (topic_id if self.by_id else topic, partition)

    def update(self, topics: Sequence[FetchTopicIn], forgotten: Sequence[ForgottenTopicIn]) -> None:
        for t in topics:
            for p in t.partitions:
                k = self.key(t.topic, t.topic_id, p.partition)
                cached = self.partitions.get(k)
                if cached is None:
                    self.partitions[k] = CachedPartition(
                        t.topic, t.topic_id, p.partition, p.fetch_offset, p.partition_max_bytes
                    )
                else:
                    cached.fetch_offset = p.fetch_offset
                    cached.max_bytes = p.partition_max_bytes
        for f in forgotten:
            for part in f.partitions:
                self.partitions.pop(self.key(f.topic, f.topic_id, part), None)

    def as_topics(self) -> list[FetchTopicView]:
        """The session's partitions in the shape of a request's topics (grouped by topic, in order)."""
        groups: dict[uuid.UUID | str | None, FetchTopicView] = {}
        for c in self.partitions.values():
            gk = c.topic_id if self.by_id else c.topic
            view = groups.get(gk)
            if view is None:
                view = groups[gk] = FetchTopicView(c.topic, c.topic_id, [])
            view.partitions.append(FetchPartitionView(c.partition, c.fetch_offset, c.max_bytes))
        return list(groups.values())

    def filter_response(
        self, topics: list[FetchTopicResult], *, full: bool
    ) -> list[FetchTopicResult]:
        """Keep partitions with records, errors, or a changed high watermark / log start (all when `full`)."""
        out = []
        for t in topics:
            kept = []
            for p in t.partitions:
                cached = self.partitions.get(self.key(t.topic, t.topic_id, p.partition_index))
                changed = (
                    full
                    or cached is None
                    or p.error_code != 0
                    or bool(p.records)
                    or p.preferred_read_replica >= 0  # KIP-392: a redirect is always sent
                    or p.high_watermark != cached.last_hw
                    or p.log_start_offset != cached.last_log_start
                )
                if cached is not None:
                    cached.last_hw = p.high_watermark
                    cached.last_log_start = p.log_start_offset
                if changed:
                    kept.append(p)
            if kept:
                t.partitions = kept
                out.append(t)
        return out


class FetchSessionCache:
    """Sessions by id, least recently used evicted when `max.incremental.fetch.session.cache.slots` is reached."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self.sessions)

    def create(self, by_id: bool) -> FetchSession | None:
        if self.slots <= 0:
            return None
        while len(self.sessions) >= self.slots:
            self.sessions.popitem(last=False)
        while True:
            sid = random.randint(1, 0x7FFFFFFF)
            if sid not in self.sessions:
                break
        session = FetchSession(sid, by_id)
        self.sessions[sid] = session
        return session

    def get(self, session_id: int) -> FetchSession | None:
        s = self.sessions.get(session_id)
        if s is not None:
            self.sessions.move_to_end(session_id)
            s.last_used = time.monotonic()
        return s

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def begin(
        self, request: FetchSessionRequest, by_id: bool
    ) -> tuple[FetchSession | None, bool, ErrorCode]:
        """Apply a v7+ request's session fields: (session or None, whether it is a full fetch, error)."""
        sid, epoch = request.session_id, request.session_epoch
        if epoch == FINAL_EPOCH:
            if sid:
                self.remove(sid)
            return None, True, ErrorCode.NO_ERROR
        if epoch == INITIAL_EPOCH:
            if sid:
                self.remove(sid)
            session = self.create(by_id)
            if session is not None:
                session.update(request.topics, [])
            return session, True, ErrorCode.NO_ERROR
        session = self.get(sid)
        if session is None:
            return None, False, ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return None, False, ErrorCode.INVALID_FETCH_SESSION_EPOCH
        session.epoch = epoch + 1 if epoch < 0x7FFFFFFF else 1
        forgotten: Sequence[ForgottenTopicIn] = getattr(request, "forgotten_topics_data", []) or []
        session.update(request.topics, forgotten)
        return session, False, ErrorCode.NO_ERROR
