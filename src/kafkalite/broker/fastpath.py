"""Hand-unrolled codecs for the hottest messages: Produce request/response v3-11, Fetch request/response v4-16.

They must produce exactly what the schema codecs do (tests/unit/broker/test_fastpath.py checks every version);
anything unusual (record errors, error messages) falls back to the schema codec.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence, Sized
from typing import Protocol

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.fetch import FILTER_ERROR_TAG, FILTER_TAG

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_HI = struct.Struct(">hi")
_IHQQQ = struct.Struct(">ihqqq")
_IHQQ = struct.Struct(">ihqq")
_QQ = struct.Struct(">qq")
_IHQ = struct.Struct(">ihq")


class PartitionData:
    __slots__ = ("index", "records")

    def __init__(self, index: int, records: bytes | memoryview | None) -> None:
        self.index = index
        self.records = records


class TopicData:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: list[PartitionData]) -> None:
        self.name = name
        self.partition_data = partition_data


class ProduceRequestView:
    """What the produce handler reads from a request, without the generic decoder's objects."""

    __slots__ = ("acks", "timeout_ms", "topic_data", "transactional_id")

    def __init__(
        self, transactional_id: str | None, acks: int, timeout_ms: int, topic_data: list[TopicData]
    ) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data


def _uvarint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if shift > 28:
            raise DecodeError("uvarint too long")
        b = buf[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return result, pos
        shift += 7


def _skip_tags(buf: bytes | bytearray, pos: int) -> int:
    n, pos = _uvarint(buf, pos)
    for _ in range(n):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    if pos > len(buf):
        raise DecodeError("tagged fields run past the end")
    return pos


def decode_produce(buf: bytes | bytearray, pos: int, version: int) -> ProduceRequestView:
    """Decode ProduceRequest v3-11 (raises DecodeError on anything malformed)."""
    try:
        return _decode_produce(buf, pos, version)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"ProduceRequest v{version}: {type(exc).__name__}: {exc}") from None


def _decode_produce(buf: bytes | bytearray, pos: int, version: int) -> ProduceRequestView:
    end = len(buf)
    view = memoryview(buf)
    flexible = version >= 9
    tid: str | None
    if flexible:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        n = _H.unpack_from(buf, pos)[0]
        pos += 2
    if n < 0:
        tid = None
    else:
        if pos + n > end:
            raise DecodeError("transactional id runs past the end")
        tid = buf[pos : pos + n].decode()
        pos += n
    acks, timeout = _HI.unpack_from(buf, pos)
    pos += 6
    if flexible:
        ntopics, pos = _uvarint(buf, pos)
        ntopics -= 1
    else:
        ntopics = _I.unpack_from(buf, pos)[0]
        pos += 4
    if ntopics < 0 or ntopics > end - pos:
        raise DecodeError(f"topic count {ntopics} is impossible")
    topics = []
    for _ in range(ntopics):
        if flexible:
            n, pos = _uvarint(buf, pos)
            n -= 1
        else:
            n = _H.unpack_from(buf, pos)[0]
            pos += 2
        if n < 0 or pos + n > end:
            raise DecodeError("topic name is null or runs past the end")
        name = buf[pos : pos + n].decode()
        pos += n
        if flexible:
            nparts, pos = _uvarint(buf, pos)
            nparts -= 1
        else:
            nparts = _I.unpack_from(buf, pos)[0]
            pos += 4
        if nparts < 0 or nparts > end - pos:
            raise DecodeError(f"partition count {nparts} is impossible")
        parts = []
        for _ in range(nparts):
            index = _I.unpack_from(buf, pos)[0]
            pos += 4
            if flexible:
                size, pos = _uvarint(buf, pos)
                size -= 1
            else:
                size = _I.unpack_from(buf, pos)[0]
                pos += 4
            if size < 0:
                records = None
            else:
                if pos + size > end:
                    raise DecodeError("records run past the end of the request")
                records = view[pos : pos + size]  # no copy: validation copies once into a bytearray
                pos += size
            if flexible:
                pos = _skip_tags(buf, pos)
            parts.append(PartitionData(index, records))
        if flexible:
            pos = _skip_tags(buf, pos)
        topics.append(TopicData(name, parts))
    if flexible:
        pos = _skip_tags(buf, pos)
    if pos > end:
        raise DecodeError("ProduceRequest runs past the end of the frame")
    return ProduceRequestView(tid, acks, timeout, topics)


def _write_uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _write_count(out: bytearray, n: int, flexible: bool) -> None:
    """An array count (or a bytes length): compact uvarint n+1 when flexible, else int32."""
    if flexible:
        _write_uvarint(out, n + 1)
    else:
        out += _I.pack(n)


def _write_name(out: bytearray, name: str, flexible: bool) -> None:
    """A non-null string: compact (uvarint length+1) when flexible, else int16 length."""
    raw = name.encode()
    if flexible:
        _write_uvarint(out, len(raw) + 1)
    else:
        out += _H.pack(len(raw))
    out += raw


class ProducePartitionAnswer(Protocol):
    """What the fast codec reads of one partition's produce answer."""

    @property
    def index(self) -> int: ...
    @property
    def error_code(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def log_append_time_ms(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def record_errors(self) -> Sized: ...
    @property
    def error_message(self) -> str | None: ...


class ProduceTopicAnswer(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partition_responses(self) -> Sequence[ProducePartitionAnswer]: ...


class ProduceAnswer(Protocol):
    """A produce answer as the fast codec reads it (the handler's own slots or a ProduceResponse)."""

    @property
    def responses(self) -> Sequence[ProduceTopicAnswer]: ...
    @property
    def throttle_time_ms(self) -> int: ...


def can_encode_fast(response: ProduceAnswer) -> bool:
    for t in response.responses:
        for p in t.partition_responses:
            if p.record_errors or p.error_message is not None:
                return False
    return True


def encode_produce_response(out: bytearray, response: ProduceAnswer, version: int) -> None:
    """ProduceResponse v3-11 without record errors or error messages (see can_encode_fast)."""
    flexible = version >= 9
    topics = response.responses
    _write_count(out, len(topics), flexible)
    for t in topics:
        _write_name(out, t.name, flexible)
        parts = t.partition_responses
        _write_count(out, len(parts), flexible)
        for p in parts:
            if version >= 5:
                out += _IHQQQ.pack(
                    p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset
                )
            else:
                out += _IHQQ.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 8:
                out += (
                    b"\x01\x00" if flexible else b"\x00\x00\x00\x00\xff\xff"
                )  # no record errors, null message
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _I.pack(response.throttle_time_ms)
    if flexible:
        out.append(0)


# ---------------------------------------------------------------------------------------------
# Fetch (v4-16): the request fields the fetch handler reads, and the response it sends

_IIIBII = struct.Struct(">iiibii")
_IIIB = struct.Struct(">iiib")
_III = struct.Struct(">iii")
_IQI = struct.Struct(">iqi")
_IIQI = struct.Struct(">iiqi")
_IIQIQI = struct.Struct(">iiqiqi")
_IIQQI = struct.Struct(">iiqqi")
_IHQQQ_PART = struct.Struct(">ihqqq")
_IHI = struct.Struct(">ihi")
_IQQI = struct.Struct(">iqqi")


class FetchPartitionView:
    __slots__ = (
        "current_leader_epoch",
        "fetch_offset",
        "log_start_offset",
        "partition",
        "partition_max_bytes",
    )

    def __init__(
        self,
        partition: int,
        fetch_offset: int,
        partition_max_bytes: int,
        current_leader_epoch: int = -1,
        log_start_offset: int = -1,
    ) -> None:
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.log_start_offset = log_start_offset  # v5+: a follower's log start offset


class FetchTopicView:
    __slots__ = ("partitions", "topic", "topic_id")

    def __init__(
        self, topic: str, topic_id: uuid.UUID | None, partitions: list[FetchPartitionView]
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partitions = partitions


class FetchRequestView:
    __slots__ = (
        "forgotten_topics_data",
        "isolation_level",
        "max_bytes",
        "max_wait_ms",
        "min_bytes",
        "rack_id",
        "replica_id",
        "session_epoch",
        "session_id",
        "topics",
        "filter",
    )

    def __init__(self) -> None:
        self.filter: str | None = None  # v12+ tag 10035: kafkalite's fetch filter (issue 35)
        self.max_wait_ms = 0
        self.min_bytes = 0
        self.max_bytes = 0
        self.isolation_level = 0
        self.replica_id = -1  # a follower broker's id; -1 for consumers
        self.session_id = 0
        self.session_epoch = -1
        self.topics: list[FetchTopicView] = []
        self.forgotten_topics_data: list[ForgottenTopicView] = []
        self.rack_id = ""  # v11+: the consumer's client.rack (KIP-392)


class ForgottenTopicView:
    __slots__ = ("partitions", "topic", "topic_id")

    def __init__(self, topic: str, topic_id: uuid.UUID | None, partitions: list[int]) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partitions = partitions


def decode_fetch(buf: bytes, pos: int, version: int) -> FetchRequestView:
    """Decode FetchRequest v4-16."""
    try:
        return _decode_fetch(buf, pos, version)
    except (IndexError, struct.error, UnicodeDecodeError, ValueError) as exc:
        raise DecodeError(f"FetchRequest v{version}: {type(exc).__name__}: {exc}") from None


def _count(buf: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        n = _I.unpack_from(buf, pos)[0]
        pos += 4
    if n < 0 or n > len(buf) - pos:
        raise DecodeError(f"array count {n} is impossible")
    return n, pos


def _string(buf: bytes, pos: int, flexible: bool) -> tuple[str, int]:
    if flexible:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        n = _H.unpack_from(buf, pos)[0]
        pos += 2
    if n < 0 or pos + n > len(buf):
        raise DecodeError("string is null or runs past the end")
    return buf[pos : pos + n].decode(), pos + n


def _decode_fetch(buf: bytes, pos: int, version: int) -> FetchRequestView:
    flexible = version >= 12
    by_id = version >= 13
    req = FetchRequestView()
    if version <= 14:
        req.replica_id = _I.unpack_from(buf, pos)[0]
        pos += 4
    if version >= 7:
        (
            req.max_wait_ms,
            req.min_bytes,
            req.max_bytes,
            req.isolation_level,
            req.session_id,
            req.session_epoch,
        ) = _IIIBII.unpack_from(buf, pos)
        pos += _IIIBII.size
    else:
        req.max_wait_ms, req.min_bytes, req.max_bytes, req.isolation_level = _IIIB.unpack_from(
            buf, pos
        )
        pos += _IIIB.size
        req.session_id, req.session_epoch = 0, -1
    ntopics, pos = _count(buf, pos, flexible)
    for _ in range(ntopics):
        if by_id:
            if pos + 16 > len(buf):
                raise DecodeError("topic id runs past the end")
            topic_id = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
            pos += 16
            name = ""
        else:
            topic_id = None
            name, pos = _string(buf, pos, flexible)
        nparts, pos = _count(buf, pos, flexible)
        parts = []
        for _ in range(nparts):
            if version >= 12:
                partition, epoch, offset, _last_epoch, log_start, pmax = _IIQIQI.unpack_from(
                    buf, pos
                )
                pos += _IIQIQI.size
            elif version >= 9:
                partition, epoch, offset, log_start, pmax = _IIQQI.unpack_from(buf, pos)
                pos += _IIQQI.size
            elif version >= 5:
                partition, offset, log_start, pmax = _IQQI.unpack_from(buf, pos)
                pos += 24
            else:
                partition, offset, pmax = _IQI.unpack_from(buf, pos)
                pos += _IQI.size
                log_start = -1
            if version < 9:
                epoch = -1
            if flexible:
                pos = _skip_tags(buf, pos)
            parts.append(FetchPartitionView(partition, offset, pmax, epoch, log_start))
        if flexible:
            pos = _skip_tags(buf, pos)
        req.topics.append(FetchTopicView(name, topic_id, parts))
    if version >= 7:
        nforgotten, pos = _count(buf, pos, flexible)
        for _ in range(nforgotten):
            ftopic, fid = "", None
            if by_id:
                if pos + 16 > len(buf):
                    raise DecodeError("topic id runs past the end")
                fid = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
                pos += 16
            else:
                ftopic, pos = _string(buf, pos, flexible)
            n, pos = _count(buf, pos, flexible)
            fparts = list(struct.unpack_from(f">{n}i", buf, pos))
            pos += 4 * n
            if flexible:
                pos = _skip_tags(buf, pos)
            req.forgotten_topics_data.append(ForgottenTopicView(ftopic, fid, fparts))
    if version >= 11:
        req.rack_id, pos = _string(buf, pos, flexible)
    if flexible:  # the top-level tags: the fetch filter is read, the others skipped
        n, pos = _uvarint(buf, pos)
        for _ in range(n):
            tag, pos = _uvarint(buf, pos)
            size, pos = _uvarint(buf, pos)
            if tag == FILTER_TAG and size > 0:
                length, at = _uvarint(buf, pos)
                req.filter = buf[at : at + length - 1].decode() if length else None
            pos += size
    if pos > len(buf):
        raise DecodeError("FetchRequest runs past the end of the frame")
    return req


class FetchPartitionResult:
    __slots__ = (
        "aborted_transactions",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "partition_index",
        "preferred_read_replica",
        "records",
    )

    def __init__(self, partition_index: int, error_code: int) -> None:
        self.partition_index = partition_index
        self.error_code = error_code
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.preferred_read_replica = -1  # v11+: KIP-392, the replica to fetch from instead
        self.records: bytes | None = b""
        # read_committed: (producer id, first offset) of aborted transactions in the returned range
        self.aborted_transactions: list[tuple[int, int]] | None = None


class FetchTopicResult:
    __slots__ = ("partitions", "topic", "topic_id")

    def __init__(
        self, topic: str, topic_id: uuid.UUID, partitions: list[FetchPartitionResult]
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partitions = partitions


class FetchResult:
    __slots__ = (
        "error_code",
        "filter_error",
        "filtered",
        "responses",
        "session_id",
        "throttle_time_ms",
    )

    def __init__(self, responses: list[FetchTopicResult], error_code: int = 0) -> None:
        self.filtered = False  # v12+ tag 10035: the fetch filter was applied
        self.filter_error: str | None = None  # v12+ tag 10036: why the filter was refused
        self.throttle_time_ms = 0
        self.error_code = error_code
        self.session_id = 0
        self.responses = responses


def encode_fetch_response(out: bytearray, resp: FetchResult, version: int) -> None:
    """FetchResponse v4-16: default tags."""
    flexible = version >= 12
    if version >= 7:
        out += _IHI.pack(resp.throttle_time_ms, resp.error_code, resp.session_id)
    else:
        out += _I.pack(resp.throttle_time_ms)
    topics = resp.responses
    _write_count(out, len(topics), flexible)
    for t in topics:
        if version >= 13:
            out += t.topic_id.bytes
        else:
            _write_name(out, t.topic, flexible)
        parts = t.partitions
        _write_count(out, len(parts), flexible)
        for p in parts:
            if version >= 5:
                out += _IHQQQ_PART.pack(
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                )
            else:
                out += _IHQQ.pack(
                    p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                )
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"  # null
            else:
                _write_count(out, len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    out += _QQ.pack(producer_id, first_offset)
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _I.pack(p.preferred_read_replica)
            rec = p.records
            if rec is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                _write_count(out, len(rec), flexible)
                out += rec
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        tags = []
        if resp.filtered:
            tags.append((FILTER_TAG, b"\x01"))
        if resp.filter_error is not None:
            raw = resp.filter_error.encode()
            size = bytearray()
            _write_uvarint(size, len(raw) + 1)
            tags.append((FILTER_ERROR_TAG, bytes(size) + raw))
        _write_uvarint(out, len(tags))
        for tag, data in tags:
            _write_uvarint(out, tag)
            _write_uvarint(out, len(data))
            out += data
