"""The executors' fast read path: Fetch one partition's offset range through the client's NetworkClient
and decode record batches straight into columns (no per-record objects), then into Arrow.
"""

from __future__ import annotations

import concurrent.futures
import logging
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from kafkalite.client.config import CONSUMER, make_config
from kafkalite.client.io_thread import IOThread
from kafkalite.client.network import NetworkClient
from kafkalite.filters import CompiledFilter, compile_filter
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.fetch import FetchRequest
from kafkalite.protocol.messages.offsets import ListOffsetsRequest
from kafkalite.records.batch import iter_batches
from kafkalite.records.compression import decompress
from kafkalite.records.control import ControlRecordType, control_type_of
from kafkalite.records.speedups import ColumnBuilder
from kafkalite.spark.pushdown import FetchFilterError, filter_answer

log = logging.getLogger("kafkalite.spark")

FETCH = 1
LIST_OFFSETS = 2
_HEAD = struct.Struct(">qiibIhiqqqhii")  # v2 batch header, 61 bytes
_LEADER_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.REPLICA_NOT_AVAILABLE,
}


class Columns:
    """Column lists of the records decoded so far: the pure-Python twin of the C
    `kafkalite.records._columns.ColumnBuilder` (used when it is not built)."""

    __slots__ = ("keys", "values", "offsets", "timestamps", "types", "headers")

    def __init__(self, include_headers: bool = True) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def last_offset(self) -> int:
        return self.offsets[-1] if self.offsets else -1

    def add_v2(
        self,
        data: bytes,
        count: int,
        base_offset: int,
        base_ts: int,
        max_ts: int,
        ts_type: int,
        start: int,
        until: int,
    ) -> int:
        before = len(self.offsets)
        log_append_ts = max_ts if ts_type else None
        _decode_records(
            data, count, base_offset, base_ts, log_append_ts, ts_type, start, until, self
        )
        return len(self.offsets) - before

    def add(
        self,
        offset: int,
        timestamp: int,
        ts_type: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.offsets.append(offset)
        self.timestamps.append(timestamp)
        self.types.append(ts_type)
        self.headers.append(headers or None)


def new_columns(include_headers: bool) -> Any:
    """An empty column chunk: the C ColumnBuilder (Arrow buffers, no per-record Python objects) when
    it is built, else `Columns`."""
    if ColumnBuilder is not None:
        return ColumnBuilder(include_headers)
    return Columns(include_headers)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (any length) at pos -> (value, next pos)."""
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint is too long")


def _decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    log_append_ts: int | None,
    ts_type: int,
    start: int,
    until: int,
    cols: Columns,
) -> None:
    """The pure-Python decoder of `count` v2 records into `cols` (offsets in [start, until) only)."""
    keys, values, offsets = cols.keys, cols.values, cols.offsets
    stamps, types, headers = cols.timestamps, cols.types, cols.headers
    p = 0
    for _ in range(count):
        b = data[p]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            length, p = _varint(data, p)
        rec_end = p + length
        p += 1  # record attributes (unused)
        b = data[p]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            ts_delta, p = _varint(data, p)
        b = data[p]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            off_delta, p = _varint(data, p)
        offset = base_offset + off_delta
        if offset < start or offset >= until:
            p = rec_end
            continue
        b = data[p]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            klen, p = _varint(data, p)
        if klen < 0:
            keys.append(None)
        else:
            keys.append(data[p : p + klen])
            p += klen
        b = data[p]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            vlen, p = _varint(data, p)
        if vlen < 0:
            values.append(None)
        else:
            values.append(data[p : p + vlen])
            p += vlen
        b = data[p]
        if b == 0:
            headers.append(None)
        else:
            n, p = _varint(data, p)
            hs: list[tuple[str, bytes | None]] = []
            for _h in range(n):
                hk, p = _varint(data, p)
                name = data[p : p + hk].decode("utf-8")
                p += hk
                hv, p = _varint(data, p)
                if hv < 0:
                    hs.append((name, None))
                else:
                    hs.append((name, data[p : p + hv]))
                    p += hv
            headers.append(hs or None)
        offsets.append(offset)
        stamps.append(base_ts + ts_delta if log_append_ts is None else log_append_ts)
        types.append(ts_type)
        p = rec_end


def _is_abort_marker(batch_bytes: bytes) -> bool:
    """A control batch holding an ABORT marker (a malformed control key counts as not)."""
    for batch in iter_batches(batch_bytes):
        for r in batch.records:
            try:
                return control_type_of(r) == ControlRecordType.ABORT
            except DecodeError:
                return False
    return False


def decode_blob(
    blob: bytes,
    start: int,
    until: int,
    cols: Any,
    aborted: Sequence[tuple[int, int]] | None = None,
) -> int:
    """Decode the complete batches of a fetched blob into `cols` (a `new_columns()` chunk; offsets in
    [start, until) only).

    Returns the offset after the last complete batch (or `start` when there was none).
    Control batches are skipped; legacy (magic 0/1) batches go through kafkalite.records.
    `aborted` (read_committed): the fetch response's aborted transactions as (first offset, producer
    id); as in Kafka's consumer, a producer's transactional batches are dropped from the first offset
    of its aborted transaction until its ABORT marker.
    """
    pos = 0
    end = len(blob)
    nxt = start
    pending = sorted(aborted or (), reverse=True)
    aborted_pids: set[int] = set()
    while pos + 17 <= end:
        base, blen = struct.unpack_from(">qi", blob, pos)
        size = blen + 12
        if blen < 0 or pos + size > end:
            break
        magic = blob[pos + 16]
        if magic != 2 or pos + 61 > end:
            for batch in iter_batches(blob[pos : pos + size]):
                tt = batch.timestamp_type
                for r in batch.records:
                    if start <= r.offset < until:
                        cols.add(r.offset, r.timestamp, tt, r.key, r.value, list(r.headers) or None)
                nxt = max(nxt, batch.last_offset + 1)
            pos += size
            continue
        (_, _, _, _, _, attrs, last_delta, base_ts, max_ts, pid, _, _, count) = _HEAD.unpack_from(
            blob, pos
        )
        last = base + last_delta
        nxt = max(nxt, last + 1)
        while pending and pending[-1][0] <= last:
            aborted_pids.add(pending.pop()[1])
        if attrs & 0x20:  # control batch: never a row; an ABORT marker ends its producer's abort
            if aborted_pids and pid in aborted_pids and _is_abort_marker(blob[pos : pos + size]):
                aborted_pids.discard(pid)
            pos += size
            continue
        if aborted_pids and attrs & 0x10 and pid in aborted_pids:
            pos += size
            continue
        if last >= start and base < until:
            codec = attrs & 0x07
            payload = blob[pos + 61 : pos + size]
            data = decompress(codec, payload) if codec else payload
            cols.add_v2(data, count, base, base_ts, max_ts, (attrs >> 3) & 1, start, until)
        pos += size
    return nxt


class FetchTimeout(Exception):
    """No progress within the poll timeout (raised by `RangeFetcher`; kafkaio turns it into the
    task's timeout error)."""


class RangeFetcher:
    """Fetch requests for one partition at a time over the client's NetworkClient (no group, no
    commits). Every wait is bounded by `poll_timeout_ms`; read_committed stops at the last stable
    offset and drops aborted transactions' records, as the consumer's row path does."""

    def __init__(
        self,
        client: Mapping[str, Any],
        poll_timeout_ms: int = 120_000,
        max_bytes: int = 8 * 1024 * 1024,
        fetch_filter: str | None = None,
    ) -> None:
        cfg = make_config(CONSUMER, dict(client), {})
        # the fetch filter (Fetch tag 10035); applied here when the broker did not (filter_answer)
        self.filter: CompiledFilter | None = compile_filter(fetch_filter) if fetch_filter else None
        isolation = str(cfg.get("isolation.level") or "read_uncommitted").lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ValueError(
                f"isolation.level must be read_uncommitted or read_committed, not {isolation!r}"
            )
        self.read_committed = isolation == "read_committed"
        self.io = IOThread("kafkalite-spark-fetch")
        self.net = NetworkClient(cfg, self.io)
        self.max_bytes = max_bytes
        self.poll_timeout = poll_timeout_ms / 1000
        self.timeout = min(int(cfg["request.timeout.ms"]) / 1000, self.poll_timeout)

    async def _leader(self, topic: str, partition: int, refresh: bool = False) -> int:
        md = self.net.metadata
        if refresh or md.leader_for(topic, partition) < 0:
            md.add_topics(topic)
            await self.net.refresh_metadata([topic])
        return md.leader_for(topic, partition)

    async def _fetch(
        self, topic: str, partition: int, offset: int
    ) -> tuple[int, bytes, list[tuple[int, int]] | None]:
        """(error code, records blob, aborted transactions as (first offset, producer id)) of one
        Fetch."""
        leader = await self._leader(topic, partition)
        if leader < 0:
            return int(ErrorCode.LEADER_NOT_AVAILABLE), b"", None
        conn = await self.net.connection(leader)
        version = conn.version(FETCH, 12)
        req_cls = FetchRequest
        req = req_cls(
            replica_id=-1,
            max_wait_ms=int(min(500, max(1, self.poll_timeout * 250))),
            min_bytes=1,
            max_bytes=self.max_bytes,
            isolation_level=1 if self.read_committed else 0,
            session_id=0,
            session_epoch=-1,
            topics=[
                req_cls.FetchTopic(
                    topic=topic,
                    partitions=[
                        req_cls.FetchTopic.FetchPartition(
                            partition=partition,
                            fetch_offset=offset,
                            partition_max_bytes=self.max_bytes,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
            filter=self.filter.expression if self.filter is not None else None,
        )
        resp = await conn.send(req, version=version, timeout=self.timeout + 1)
        if resp.error_code:
            if resp.filter_error:
                raise FetchFilterError(f"the broker refused the fetch filter: {resp.filter_error}")
            return int(resp.error_code), b"", None
        for t in resp.responses:
            for p in t.partitions:
                if p.partition_index == partition:
                    code = int(p.error_code)
                    if code in _LEADER_ERRORS:
                        await self._leader(topic, partition, refresh=True)
                    aborted = None
                    if self.read_committed:
                        aborted = [
                            (int(a.first_offset), int(a.producer_id))
                            for a in (p.aborted_transactions or ())
                        ]
                    blob = p.records or b""
                    if self.filter is not None and blob and not resp.filtered:
                        blob = filter_answer(blob, self.filter, aborted)
                    return code, blob, aborted
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), b"", None

    async def _log_start(self, topic: str, partition: int) -> int:
        leader = await self._leader(topic, partition)
        conn = await self.net.connection(leader)
        req_cls = ListOffsetsRequest
        req = req_cls(
            replica_id=-1,
            isolation_level=0,
            topics=[
                req_cls.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        req_cls.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=partition, timestamp=-2
                        )
                    ],
                )
            ],
        )
        version = conn.version(LIST_OFFSETS)
        resp = await conn.send(req, version=version, timeout=self.timeout + 1)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise RuntimeError(
                        f"ListOffsets {topic}-{partition} failed: {ErrorCode(p.error_code).name}"
                    )
                return int(p.offset) if version > 0 else int((p.old_style_offsets or [-1])[0])
        raise RuntimeError(f"ListOffsets {topic}-{partition}: no answer")

    def log_start(self, topic: str, partition: int) -> int:
        """The partition's log start offset; FetchTimeout when no answer within the poll timeout
        (failed attempts are retried until then)."""
        deadline = time.monotonic() + self.poll_timeout
        while True:
            left = deadline - time.monotonic()
            fut = self.io.submit(self._log_start(topic, partition))
            last: Exception | None = None
            try:
                return fut.result(max(left, 0.001))
            except concurrent.futures.TimeoutError:
                fut.cancel()
            except Exception as exc:  # a request timeout, a lost connection, a moving leader
                last = exc
            if time.monotonic() >= deadline:
                raise FetchTimeout(
                    f"no answer to ListOffsets for {topic}-{partition} within "
                    f"{int(self.poll_timeout * 1000)} ms"
                    + (f" (last error: {last})" if last else "")
                ) from last
            time.sleep(0.05)

    def read(
        self, topic: str, partition: int, start: int, until: int, include_headers: bool = True
    ) -> Iterator[tuple[str, Any]]:
        """Yield ("columns", `new_columns()` chunk) chunks covering [start, until), or ("out_of_range", offset)
        when the broker no longer has the offset asked for; the next fetch is pipelined. Raises
        FetchTimeout when no offset was gained for the poll timeout (whatever was waited on)."""
        position = start
        pending = self.io.submit(self._fetch(topic, partition, position))
        last_progress = time.monotonic()
        while position < until:
            left = self.poll_timeout - (time.monotonic() - last_progress)
            try:
                code, blob, aborted = pending.result(max(left, 0.001))
            except concurrent.futures.TimeoutError:
                pending.cancel()
                raise FetchTimeout(
                    f"no records of {topic}-{partition} at offset {position} within "
                    f"{int(self.poll_timeout * 1000)} ms"
                ) from None
            except FetchFilterError:
                raise
            except Exception as exc:  # a request timeout or a lost connection: retried below
                if time.monotonic() - last_progress > self.poll_timeout:
                    raise FetchTimeout(
                        f"no records of {topic}-{partition} at offset {position} within "
                        f"{int(self.poll_timeout * 1000)} ms (last error: {exc})"
                    ) from exc
                log.debug("fetch of %s-%s failed, retrying: %s", topic, partition, exc)
                time.sleep(0.05)
                pending = self.io.submit(self._fetch(topic, partition, position))
                continue
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                yield "out_of_range", position
                return
            if code and code not in _LEADER_ERRORS:
                raise RuntimeError(
                    f"fetch of {topic}-{partition} at offset {position} failed: "
                    f"{ErrorCode(code).name}"
                )
            cols = new_columns(include_headers)
            nxt = decode_blob(blob, position, until, cols, aborted) if blob else position
            if nxt > position:
                position = nxt
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > self.poll_timeout:
                raise FetchTimeout(
                    f"no records of {topic}-{partition} at offset {position} within "
                    f"{int(self.poll_timeout * 1000)} ms"
                )
            if position < until:
                if code:  # leader moving: metadata was refreshed, back off a little
                    time.sleep(0.05)
                pending = self.io.submit(self._fetch(topic, partition, position))
            if len(cols):
                yield "columns", cols

    def close(self) -> None:
        try:
            self.io.run(self.net.close(), min(5.0, max(self.poll_timeout, 1.0)))
        except Exception:  # pragma: no cover - best effort
            pass
        self.io.stop()
