"""Remote log metadata (KIP-405): each remote segment's metadata and its states COPY_SEGMENT_STARTED /
FINISHED and DELETE_SEGMENT_STARTED / FINISHED in a table of valid previous states, the cache built by replay,
and the records that carry them in `__remote_log_metadata`.

Record encoding (kafkalite's own, documented here; Kafka's generated RemoteLogSegmentMetadataRecord is not
used): key = "<topic id>:<partition>"; value = one byte api key (0: segment metadata, 1: update, as Kafka
numbers them; 16: kafkalite's log start offset cut by DeleteRecords, which Kafka keeps in its log-start-offset
checkpoint instead), one byte version (0), then a UTF-8 JSON object with the fields named as Kafka's records name them.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import uuid
from dataclasses import dataclass

log = logging.getLogger("kafkalite.storage.remote")

METADATA_RECORD = 0  # RemoteLogSegmentMetadataRecord
UPDATE_RECORD = 1  # RemoteLogSegmentMetadataUpdateRecord
LOG_START_RECORD = 16  # kafkalite's own: the partition's log start moved by DeleteRecords
_VERSION = 0


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's RemoteLogSegmentState, with its ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


_S = RemoteLogSegmentState
# state -> the states it may follow (None: a new segment)
VALID_PREVIOUS: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState | None]] = {
    _S.COPY_SEGMENT_STARTED: frozenset({None}),
    _S.COPY_SEGMENT_FINISHED: frozenset({_S.COPY_SEGMENT_STARTED}),
    _S.DELETE_SEGMENT_STARTED: frozenset(
        {_S.COPY_SEGMENT_STARTED, _S.COPY_SEGMENT_FINISHED, _S.DELETE_SEGMENT_STARTED}
    ),
    _S.DELETE_SEGMENT_FINISHED: frozenset({_S.DELETE_SEGMENT_STARTED}),
}


class InvalidStateTransition(ValueError):
    """A metadata event that its segment's state does not allow."""


def check_transition(previous: RemoteLogSegmentState | None, new: RemoteLogSegmentState) -> None:
    if previous not in VALID_PREVIOUS[new]:
        raise InvalidStateTransition(
            f"{new.name} cannot follow {previous.name if previous is not None else 'nothing'}"
        )


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """One remote segment (Kafka's RemoteLogSegmentMetadata): offsets [start_offset, end_offset],
    the leader epochs of its batches as (epoch, first offset), its size, and its state."""

    topic_id: uuid.UUID
    topic: str
    partition: int
    segment_id: uuid.UUID
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    segment_size_in_bytes: int
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def with_state(
        self, state: RemoteLogSegmentState, event_timestamp_ms: int, broker_id: int
    ) -> RemoteLogSegmentMetadata:
        check_transition(self.state, state)
        return dataclasses.replace(
            self, state=state, event_timestamp_ms=event_timestamp_ms, broker_id=broker_id
        )

    @property
    def object_name(self) -> str:
        """The segment's name in a remote store: its start offset and its unique id."""
        return f"{self.start_offset:020d}-{self.segment_id}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentUpdate:
    """A state change of a segment (Kafka's RemoteLogSegmentMetadataUpdate)."""

    topic_id: uuid.UUID
    topic: str
    partition: int
    segment_id: uuid.UUID
    state: RemoteLogSegmentState
    event_timestamp_ms: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class RemoteLogStartOffsetUpdate:
    """DeleteRecords moved the partition's log start to `log_start_offset` across tiers: offsets below
    it are gone even where a remote segment still holds them (until the segment is deleted)."""

    topic_id: uuid.UUID
    topic: str
    partition: int
    log_start_offset: int
    event_timestamp_ms: int
    broker_id: int


RemoteLogMetadataEvent = (
    RemoteLogSegmentMetadata | RemoteLogSegmentUpdate | RemoteLogStartOffsetUpdate
)


# -- records --------------------------------------------------------------------------------------
def record_key(topic_id: uuid.UUID, partition: int) -> bytes:
    return f"{topic_id}:{partition}".encode()


def encode_event(event: RemoteLogMetadataEvent) -> tuple[bytes, bytes]:
    """The (key, value) of the record carrying `event`."""
    if isinstance(event, RemoteLogStartOffsetUpdate):
        body = {
            "TopicId": str(event.topic_id),
            "TopicName": event.topic,
            "Partition": event.partition,
            "LogStartOffset": event.log_start_offset,
            "BrokerId": event.broker_id,
            "EventTimestampMs": event.event_timestamp_ms,
        }
        value = (
            bytes([LOG_START_RECORD, _VERSION]) + json.dumps(body, separators=(",", ":")).encode()
        )
        return record_key(event.topic_id, event.partition), value
    base = {
        "TopicId": str(event.topic_id),
        "TopicName": event.topic,
        "Partition": event.partition,
        "SegmentId": str(event.segment_id),
        "BrokerId": event.broker_id,
        "EventTimestampMs": event.event_timestamp_ms,
        "RemoteLogSegmentState": int(event.state),
    }
    if isinstance(event, RemoteLogSegmentMetadata):
        api = METADATA_RECORD
        base.update(
            StartOffset=event.start_offset,
            EndOffset=event.end_offset,
            MaxTimestampMs=event.max_timestamp_ms,
            SegmentLeaderEpochs=[
                {"LeaderEpoch": e, "Offset": o} for e, o in event.segment_leader_epochs
            ],
            SegmentSizeInBytes=event.segment_size_in_bytes,
        )
    else:
        api = UPDATE_RECORD
    value = bytes([api, _VERSION]) + json.dumps(base, separators=(",", ":")).encode()
    return record_key(event.topic_id, event.partition), value


def decode_event(value: bytes) -> RemoteLogMetadataEvent:
    """The event a record's value carries; ValueError when it is not one."""
    if (
        len(value) < 2
        or value[0] not in (METADATA_RECORD, UPDATE_RECORD, LOG_START_RECORD)
        or value[1] != _VERSION
    ):
        raise ValueError("not a remote log metadata record of a known api key / version")
    d = json.loads(value[2:])
    if value[0] == LOG_START_RECORD:
        return RemoteLogStartOffsetUpdate(
            topic_id=uuid.UUID(d["TopicId"]),
            topic=str(d["TopicName"]),
            partition=int(d["Partition"]),
            log_start_offset=int(d["LogStartOffset"]),
            event_timestamp_ms=int(d["EventTimestampMs"]),
            broker_id=int(d["BrokerId"]),
        )
    common = dict(
        topic_id=uuid.UUID(d["TopicId"]),
        topic=str(d["TopicName"]),
        partition=int(d["Partition"]),
        segment_id=uuid.UUID(d["SegmentId"]),
        broker_id=int(d["BrokerId"]),
        event_timestamp_ms=int(d["EventTimestampMs"]),
        state=RemoteLogSegmentState(int(d["RemoteLogSegmentState"])),
    )
    if value[0] == UPDATE_RECORD:
        return RemoteLogSegmentUpdate(**common)  # type: ignore[arg-type]
    return RemoteLogSegmentMetadata(
        start_offset=int(d["StartOffset"]),
        end_offset=int(d["EndOffset"]),
        max_timestamp_ms=int(d["MaxTimestampMs"]),
        segment_leader_epochs=tuple(
            (int(e["LeaderEpoch"]), int(e["Offset"])) for e in d["SegmentLeaderEpochs"]
        ),
        segment_size_in_bytes=int(d["SegmentSizeInBytes"]),
        **common,  # type: ignore[arg-type]
    )


# -- the cache --------------------------------------------------------------------------------------
TopicPartitionKey = tuple[str, int]


class RemoteLogMetadataCache:
    """Every partition's remote segments, built only by `apply` (a write and a replay at start are the
    same code path). Segments whose deletion finished are dropped."""

    def __init__(self) -> None:
        self._segments: dict[TopicPartitionKey, dict[uuid.UUID, RemoteLogSegmentMetadata]] = {}
        self._log_start_cut: dict[TopicPartitionKey, int] = {}  # DeleteRecords, across tiers

    def apply(self, event: RemoteLogMetadataEvent) -> RemoteLogSegmentMetadata | None:
        """Apply one event; InvalidStateTransition when its segment's state does not allow it.
        Returns the segment's new metadata (None once its deletion finished)."""
        key = (event.topic, event.partition)
        if isinstance(event, RemoteLogStartOffsetUpdate):  # the log start only moves forward
            cut = self._log_start_cut.get(key, -1)
            self._log_start_cut[key] = max(cut, event.log_start_offset)
            return None
        segs = self._segments.setdefault(key, {})
        old = segs.get(event.segment_id)
        if isinstance(event, RemoteLogSegmentMetadata):
            check_transition(old.state if old is not None else None, event.state)
            segs[event.segment_id] = event
            return event
        if old is None:
            raise InvalidStateTransition(
                f"{event.state.name} for unknown remote segment {event.segment_id}"
            )
        new = old.with_state(event.state, event.event_timestamp_ms, event.broker_id)
        if new.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            del segs[event.segment_id]
            return None
        segs[event.segment_id] = new
        return new

    def replay(self, event: RemoteLogMetadataEvent) -> None:
        """Apply an event read back from the topic: one that does not fit is logged and skipped."""
        try:
            self.apply(event)
        except InvalidStateTransition as exc:
            log.warning("remote log metadata of %s-%d: %s", event.topic, event.partition, exc)

    def segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """Every segment of the partition in any state, by start offset."""
        return sorted(
            self._segments.get((topic, partition), {}).values(),
            key=lambda m: (m.start_offset, m.end_offset),
        )

    def copied_segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """The readable segments (COPY_SEGMENT_FINISHED), by start offset."""
        return [
            m
            for m in self.segments(topic, partition)
            if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        ]

    def highest_copied_offset(self, topic: str, partition: int) -> int:
        """The last offset held in the remote tier (-1: none)."""
        return max((m.end_offset for m in self.copied_segments(topic, partition)), default=-1)

    def log_start_offset(self, topic: str, partition: int) -> int | None:
        """The first offset readable from the remote tier (None: none): the first copied segment's
        start, or the log start DeleteRecords set inside it."""
        segs = [
            m
            for m in self.copied_segments(topic, partition)
            if m.end_offset >= self.log_start_cut(topic, partition)
        ]
        if not segs:
            return None
        return max(segs[0].start_offset, self.log_start_cut(topic, partition))

    def log_start_cut(self, topic: str, partition: int) -> int:
        """The log start DeleteRecords last set for the partition (-1: never)."""
        return self._log_start_cut.get((topic, partition), -1)

    def below_log_start(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """The segments (any state but DELETE_SEGMENT_STARTED) wholly below the DeleteRecords cut."""
        cut = self.log_start_cut(topic, partition)
        return [
            m
            for m in self.segments(topic, partition)
            if m.end_offset < cut and m.state is not RemoteLogSegmentState.DELETE_SEGMENT_STARTED
        ]

    def size_in_bytes(self, topic: str, partition: int) -> int:
        return sum(m.segment_size_in_bytes for m in self.copied_segments(topic, partition))

    def segment_for_offset(
        self, topic: str, partition: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The copied segment holding `offset`, or the first one after it (a gap left by
        retention or a compacted batch), or None when nothing remote is at or after it."""
        offset = max(offset, self.log_start_cut(topic, partition))
        for m in self.copied_segments(topic, partition):
            if m.end_offset >= offset:
                return m
        return None

    def partitions(self) -> list[TopicPartitionKey]:
        return [k for k, v in self._segments.items() if v]

    def forget_partition(self, topic: str, partition: int) -> None:
        self._segments.pop((topic, partition), None)
        self._log_start_cut.pop((topic, partition), None)
