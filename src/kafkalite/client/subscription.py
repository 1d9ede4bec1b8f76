"""SubscriptionState: what the consumer subscribed to or was assigned, and per partition its position,
pause flag, pending offset reset, and the fetcher's bookkeeping (shared by the poll and I/O threads).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from kafkalite.client.structs import ConsumerRebalanceListener, TopicPartition

EARLIEST = -2
LATEST = -1


class PartitionState:
    __slots__ = (
        "position",
        "fetch_offset",
        "epoch",
        "paused",
        "reset_to",
        "buffered",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "leader_epoch",
    )

    def __init__(self) -> None:
        self.position: int | None = None  # next offset poll() returns
        self.fetch_offset: int | None = None  # next offset the fetcher asks for (runs ahead)
        self.epoch = 0  # bumped on every seek: stale fetched data is dropped
        self.paused = False
        self.reset_to: int | None = None  # EARLIEST / LATEST when a reset is pending
        self.buffered = 0
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.leader_epoch = -1

    @property
    def fetchable(self) -> bool:
        return not self.paused and self.fetch_offset is not None and self.reset_to is None


class SubscriptionState:
    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset  # earliest | latest | none
        self.lock = threading.RLock()
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.manual = False
        self.listener: ConsumerRebalanceListener | None = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.version = 0  # bumped when the assignment changes

    @property
    def subscribed(self) -> bool:
        return bool(self.topics) or self.pattern is not None

    def subscribe(self, topics: Any, pattern: str | None, listener: Any) -> None:
        with self.lock:
            if self.manual and self.assignment:
                raise ValueError("subscribe() after assign(): call unsubscribe() first")
            self.manual = False
            self.pattern = re.compile(pattern) if pattern is not None else None
            self.topics = set(topics or ())
            self.listener = listener

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(topic) is not None
        return topic in self.topics

    def assign_from_user(self, partitions: list[TopicPartition]) -> None:
        with self.lock:
            if self.subscribed:
                raise ValueError("assign() after subscribe(): call unsubscribe() first")
            self.manual = True
            self.set_assignment(partitions)

    def set_assignment(self, partitions: list[TopicPartition]) -> None:
        with self.lock:
            new = {}
            for tp in partitions:
                tp = TopicPartition(*tp)
                new[tp] = self.assignment.get(tp) or PartitionState()
            self.assignment = new
            self.version += 1

    def add(self, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.assignment = {
                **self.assignment,
                **{tp: PartitionState() for tp in partitions if tp not in self.assignment},
            }
            self.version += 1

    def remove(self, partitions: list[TopicPartition]) -> None:
        with self.lock:
            drop = set(partitions)
            self.assignment = {tp: s for tp, s in self.assignment.items() if tp not in drop}
            self.version += 1

    def unsubscribe(self) -> None:
        with self.lock:
            self.topics = set()
            self.pattern = None
            self.manual = False
            self.assignment = {}
            self.version += 1

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self.lock:
            st = self.state(tp)
            st.position = offset
            st.fetch_offset = offset
            st.reset_to = None
            st.epoch += 1
            st.buffered = 0

    def request_reset(self, tp: TopicPartition, to: int) -> None:
        with self.lock:
            st = self.state(tp)
            st.reset_to = to
            st.position = None
            st.fetch_offset = None
            st.epoch += 1
            st.buffered = 0

    def state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise ValueError(f"partition {tp} is not assigned to this consumer")
        return st

    def missing_positions(self) -> list[TopicPartition]:
        return [
            tp for tp, s in self.assignment.items() if s.position is None and s.reset_to is None
        ]

    def needing_reset(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.reset_to is not None]

    def all_consumed(self) -> dict[TopicPartition, int]:
        return {tp: s.position for tp, s in self.assignment.items() if s.position is not None}
