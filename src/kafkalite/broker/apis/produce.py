"""Produce (key 0): validate record batches per batch (framing, CRC-32C, size, timestamps), append, answer.

acks 0/1/-1 through the ReplicaManager (-1 waits until the ISR has the batch); legacy message sets are up-converted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from kafkalite.broker.apis.metadata import auto_create
from kafkalite.broker.context import DeferredResponse, RequestContext
from kafkalite.broker.fastpath import can_encode_fast, decode_produce, encode_produce_response
from kafkalite.cluster.errors import ReplicaError
from kafkalite.cluster.metadata import topic_name_error
from kafkalite.cluster.partition import Partition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.produce import PRODUCE, ProduceResponse
from kafkalite.records.header import (
    crc_valid,
    iter_batch_headers,
    parse_batch_header,
    read_magic,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = PRODUCE
log = logging.getLogger("kafkalite.broker.produce")

_SchemaTopic = ProduceResponse.TopicProduceResponse
_SchemaPart = _SchemaTopic.PartitionProduceResponse
_SchemaRecordError = _SchemaPart.BatchIndexAndErrorMessage


class _PartResp:
    """A partition result; plain slots, turned into schema objects only when the fast codec cannot send it."""

    __slots__ = (
        "base_offset",
        "error_code",
        "error_message",
        "index",
        "log_append_time_ms",
        "log_start_offset",
        "record_errors",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.error_code = 0
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.log_start_offset = -1
        self.record_errors: list[tuple[int, str | None]] = []
        self.error_message: str | None = None


class _TopicResp:
    __slots__ = ("name", "partition_responses")

    def __init__(self, name: str, partition_responses: list[_PartResp]) -> None:
        self.name = name
        self.partition_responses = partition_responses


class _Response:
    __slots__ = ("responses", "throttle_time_ms")

    def __init__(self, responses: list[_TopicResp]) -> None:
        self.responses = responses
        self.throttle_time_ms = 0

    def to_schema(self) -> Any:
        return ProduceResponse(
            responses=[
                _SchemaTopic(
                    name=t.name,
                    partition_responses=[
                        _SchemaPart(
                            index=p.index,
                            error_code=int(p.error_code),
                            base_offset=p.base_offset,
                            log_append_time_ms=p.log_append_time_ms,
                            log_start_offset=p.log_start_offset,
                            record_errors=[
                                _SchemaRecordError(batch_index=i, batch_index_error_message=m)
                                for i, m in p.record_errors
                            ],
                            error_message=p.error_message,
                        )
                        for p in t.partition_responses
                    ],
                )
                for t in self.responses
            ],
            throttle_time_ms=self.throttle_time_ms,
        )


def decode_request(buf: bytes | bytearray, pos: int, version: int) -> Any:
    """Hot-path decoder for v3-11; older versions go through the schema."""
    return decode_produce(buf, pos, version) if version >= 3 else None


def encode_response(out: bytearray, response: _Response, version: int) -> None:
    if version >= 3 and can_encode_fast(response):
        encode_produce_response(out, response, version)
    else:
        response.to_schema().encode_into(out, version)


class _Reject(Exception):
    def __init__(
        self,
        code: ErrorCode,
        message: str,
        record_errors: list[tuple[int, str | None]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors or []


def _check_records(
    buf: bytearray, pos: int, where: str, compacted: bool, limits: tuple[int, int, int] | None
) -> None:
    """KIP-467: decode the batch at `pos` and name every record Kafka's validator would refuse —
    a keyless record on a compacted topic, else one outside `limits` (now, before, after). Any such
    record drops the whole batch; the answer lists them by their index in the batch."""
    from kafkalite.records.batch import decode_batch

    try:
        batch = decode_batch(buf, pos)
    except DecodeError as exc:
        raise _Reject(ErrorCode.CORRUPT_MESSAGE, f"record batch at byte {pos}: {exc}") from None
    keyless = f"Compacted topic cannot accept message without key in topic partition {where}"
    errors: list[tuple[int, str | None]] = []
    untimely = False
    for i, rec in enumerate(batch.records):
        if compacted and rec.key is None:
            errors.append((i, keyless))
        elif limits is not None and rec.timestamp >= 0:
            now_ms, before, after = limits
            if now_ms - rec.timestamp > before or rec.timestamp - now_ms > after:
                untimely = True
                errors.append(
                    (
                        i,
                        f"Timestamp {rec.timestamp} of message with offset {rec.offset} is out of "
                        f"range. The timestamp should be within [{now_ms - before}, {now_ms + after}]",
                    )
                )
    if not errors:
        return
    if untimely:
        raise _Reject(
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            errors,
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise _Reject(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors,
    )


def _upconvert(blob: bytes) -> bytes:
    from kafkalite.records.legacy import upconvert_to_v2

    return upconvert_to_v2(blob)


# topic compression.type -> codec id of RecordBatch attributes ("producer" keeps the producer's)
_TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _recompress(buf: bytearray, pos: int, codec: int) -> bytes:
    """The batch at `pos` rebuilt with the topic's codec, as Kafka's broker does when a topic's
    compression.type names a codec: same records, offset deltas, timestamps and producer fields."""
    from kafkalite.records.batch import decode_batch
    from kafkalite.records.builder import RecordBatchBuilder

    try:
        batch = decode_batch(buf, pos)
    except DecodeError as exc:
        raise _Reject(ErrorCode.CORRUPT_MESSAGE, f"record batch at byte {pos}: {exc}") from None
    builder = RecordBatchBuilder.like(parse_batch_header(buf, pos), compression=codec)
    for rec in batch.records:
        builder.append_with_offset(rec.offset, rec.key, rec.value, rec.headers, rec.timestamp)
    return builder.build(last_offset_delta=batch.last_offset_delta)


def validate(
    blob: bytes | bytearray | memoryview, cfg: Any, now_ms: int, where: str = ""
) -> bytearray | memoryview:
    """Check a partition's records blob and return the bytes to append: a bytearray, or the blob
    itself when it is a writable view (of a request received in place), which the log stamps in
    place; `where` names the partition ("topic-0") in record errors."""
    if not blob:
        raise _Reject(ErrorCode.INVALID_RECORD, "produce request carries no records")
    try:
        magic = read_magic(blob, 0)
    except DecodeError as exc:
        raise _Reject(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if magic in (0, 1):
        try:
            blob = _upconvert(bytes(blob))
        except DecodeError as exc:
            raise _Reject(ErrorCode.CORRUPT_MESSAGE, f"legacy message set: {exc}") from None
        except Exception as exc:  # a converter error must not escape as a broker failure
            raise _Reject(ErrorCode.CORRUPT_MESSAGE, f"legacy message set: {exc}") from None
    elif magic != 2:
        raise _Reject(ErrorCode.CORRUPT_MESSAGE, f"unknown record batch magic {magic}")
    # a request received in place (a bytearray frame) is checked and stamped where it lies; anything
    # else is copied once into a bytearray of its own
    buf: bytearray | memoryview = (
        blob if type(blob) is memoryview and not blob.readonly else bytearray(blob)
    )
    pos = 0
    end = len(buf)
    max_bytes = cfg.max_message_bytes
    log_append = cfg.message_timestamp_type == "LogAppendTime"
    diff = cfg.message_timestamp_difference_max_ms
    before = min(diff, getattr(cfg, "message_timestamp_before_max_ms", diff))
    after = min(diff, getattr(cfg, "message_timestamp_after_max_ms", diff))
    target_codec = _TOPIC_CODECS.get(cfg.compression_type, -1)
    compacted = cfg.compact
    converted: list[tuple[int, int, bytes]] = []  # (position, size, recompressed batch)
    while pos < end:
        try:
            h = parse_batch_header(buf, pos)
        except DecodeError as exc:
            raise _Reject(ErrorCode.CORRUPT_MESSAGE, f"record batch at byte {pos}: {exc}") from None
        if h.size > max_bytes:
            raise _Reject(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record batch of {h.size} bytes exceeds max.message.bytes={max_bytes}; raise the "
                "topic's max.message.bytes (broker default: message.max.bytes)",
            )
        if not crc_valid(buf, pos, h):
            raise _Reject(
                ErrorCode.CORRUPT_MESSAGE, f"CRC-32C mismatch in record batch at byte {pos}"
            )
        if h.is_control:
            raise _Reject(ErrorCode.INVALID_RECORD, "clients may not produce control batches")
        if h.base_offset != 0:
            raise _Reject(ErrorCode.INVALID_RECORD, f"batch base offset {h.base_offset} is not 0")
        if h.records_count == 0 or h.last_offset_delta != h.records_count - 1:
            raise _Reject(
                ErrorCode.INVALID_RECORD,
                f"batch holds {h.records_count} records but last offset delta {h.last_offset_delta}",
            )
        bad: list[int] = []
        limits = None
        if not log_append and (before < 2**63 - 1 or after < 2**63 - 1):
            # (with LogAppendTime the log stamps the time, and the CRC, as it assigns offsets)
            bad = [
                ts
                for ts in (h.base_timestamp, h.max_timestamp)
                if ts >= 0 and (now_ms - ts > before or ts - now_ms > after)
            ]
            # the header bounds no record from below (base is the first record's, not the least):
            # with a "before" limit every record is checked, as Kafka's validator does
            if bad or before < 2**63 - 1:
                limits = (now_ms, before, after)
        if compacted or limits is not None:
            if type(buf) is memoryview:
                buf = bytearray(buf)
            _check_records(buf, pos, where, compacted, limits)
        if bad:  # the header says so though no record does: refused all the same
            raise _Reject(
                ErrorCode.INVALID_TIMESTAMP,
                f"timestamp {bad[0]} is outside the allowed skew from broker time {now_ms}",
            )
        if target_codec >= 0 and h.compression != target_codec:
            if type(buf) is memoryview:
                buf = bytearray(buf)
            converted.append((pos, h.size, _recompress(buf, pos, target_codec)))
        pos += h.size
    if converted:
        out = bytearray()
        at = 0
        for start, size, new in converted:
            out += buf[at:start]
            out += new
            at = start + size
        out += buf[at:]
        for _pos, h in iter_batch_headers(out):
            if (
                h.size > max_bytes
            ):  # a codec can grow a batch (uncompressed, or incompressible data)
                raise _Reject(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"record batch of {h.size} bytes after recompression to the topic's "
                    f"compression.type={cfg.compression_type} exceeds max.message.bytes={max_bytes}; "
                    "raise the topic's max.message.bytes (broker default: message.max.bytes)",
                )
        return out
    return buf


def _has_idempotent_records(request: Any) -> bool:
    """Does any partition's first batch carry a producer id (v2 batch, producerId at byte 43)?"""
    for tdata in request.topic_data:
        for pdata in tdata.partition_data:
            blob = pdata.records
            if (
                blob
                and len(blob) >= 51
                and blob[16] == 2
                and int.from_bytes(blob[43:51], "big", signed=True) >= 0
            ):
                return True
    return False


def _producer_denied(ctx: RequestContext, request: Any) -> ErrorCode:
    """Kafka's request-level produce checks: WRITE on the transactional id; for idempotent records
    without one, IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""
    txn_id = request.transactional_id if ctx.api_version >= 3 else None
    if txn_id is not None:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif _has_idempotent_records(request):
        authorizer = ctx.broker.authorizer
        assert authorizer is not None
        if not ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE) and not (
            authorizer.authorize_any(
                ctx.principal, ctx.client_host, AclOperation.WRITE, ResourceType.TOPIC
            )
        ):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ErrorCode.NO_ERROR


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    rm = broker.replica_manager
    cache = broker.metadata_cache
    acks = request.acks
    # ACLs: one attribute check when no authorizer is configured
    checked = broker.authorizer is not None
    request_denied = _producer_denied(ctx, request) if checked else ErrorCode.NO_ERROR
    topics_out: list[Any] = []
    flushes: list[Partition] = []
    waiting: list[tuple[_PartResp, Partition, int]] = []  # acks=all answers awaiting the ISR
    bad_acks = acks not in (0, 1, -1)
    stats = broker.stats
    topic_stats = stats.topics
    now_ms = int(time.time() * 1000)
    for tdata in request.topic_data:
        name = tdata.name
        parts_out: list[Any] = []
        topics_out.append(_TopicResp(name=name, partition_responses=parts_out))
        info = cache.topic(name)
        topic_code = ErrorCode.NO_ERROR
        if bad_acks:
            topic_code = ErrorCode.INVALID_REQUIRED_ACKS
        elif checked and (
            request_denied or not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name)
        ):
            topic_code = request_denied or ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is not None and info.internal:
            topic_code = ErrorCode.INVALID_TOPIC_EXCEPTION  # clients may not write internal topics
        elif info is None:
            if topic_name_error(name):
                topic_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            else:
                info, topic_code = auto_create(ctx, name)
        for pdata in tdata.partition_data:
            pr = _PartResp(pdata.index)
            parts_out.append(pr)
            if topic_code:
                pr.error_code = topic_code
                continue
            part = rm.get_partition(name, pdata.index)
            if part is None or not part.is_leader:
                known = info is not None and info.partition(pdata.index) is not None
                pr.error_code = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if known
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                continue
            try:
                data = validate(pdata.records, part.log.config, now_ms, f"{name}-{pdata.index}")
                # a plain tuple of AppendInfo's fields: no result object per batch
                first, last, append_time, _, log_start, _, _ = part.append_records_to_leader(
                    data, acks
                )
            except _Reject as rej:
                stats.failed_produce(name)
                pr.error_code = rej.code
                pr.error_message = rej.message
                pr.record_errors = rej.record_errors
                log.info(
                    "produce to %s-%d from %s (%s) rejected: %s %s",
                    name,
                    pdata.index,
                    ctx.connection.peer,
                    ctx.client_id,
                    rej.code.name,
                    rej.message,
                )
                continue
            except ReplicaError as exc:
                stats.failed_produce(name)
                pr.error_code = exc.error_code
                pr.error_message = str(exc)
                continue
            except Exception as exc:
                stats.failed_produce(name)
                code = getattr(exc, "error_code", None)
                if code is None:
                    log.exception("append to %s-%d failed", name, pdata.index)
                    code = ErrorCode.KAFKA_STORAGE_ERROR
                else:
                    log.warning("append to %s-%d failed: %s", name, pdata.index, exc)
                pr.error_code = code
                continue
            ts = topic_stats.get(name) or stats.topic(name)
            ts.produce_requests += 1
            ts.messages_in += last - first + 1  # offsets are contiguous: one per record
            ts.bytes_in += len(data)
            pr.base_offset = first
            pr.log_append_time_ms = append_time
            pr.log_start_offset = log_start
            broker.delayed.notify(part.key)
            if acks == -1 and part.log.high_watermark <= last:
                waiting.append((pr, part, last + 1))
            if part.log.needs_flush:
                flushes.append(part)
    if flushes:
        await asyncio.gather(*(asyncio.to_thread(p.log.flush) for p in flushes))
    if waiting:
        # the batches are in the log: the connection may read and append its next request while
        # this one waits for the ISR (answers still go out in request order)
        return DeferredResponse(
            _answer_after_replication(ctx, waiting, request.timeout_ms, topics_out)
        )
    if acks == 0:
        return None
    return _Response(topics_out)


async def _answer_after_replication(
    ctx: RequestContext,
    waiting: list[tuple[_PartResp, Partition, int]],
    timeout_ms: int,
    topics_out: list[Any],
) -> _Response:
    await _await_replication(ctx, waiting, timeout_ms)
    return _Response(topics_out)


async def _await_replication(
    ctx: RequestContext, waiting: list[tuple[_PartResp, Partition, int]], timeout_ms: int
) -> None:
    """acks=all: answer once every partition's high watermark has passed its batch (every ISR
    member has it), or with REQUEST_TIMED_OUT after the request's timeout (Kafka's DelayedProduce)."""

    def all_done() -> bool:
        return all(p.acks_all_done(required)[0] for _, p, required in waiting)

    await ctx.broker.delayed.wait_until(
        [p.key for _, p, _ in waiting], all_done, max(timeout_ms, 0) / 1000
    )
    for pr, p, required in waiting:
        done, code = p.acks_all_done(required)
        if not done:
            pr.error_code = ErrorCode.REQUEST_TIMED_OUT
            pr.error_message = "the in-sync replicas did not acknowledge in time"
        elif code:
            pr.error_code = ErrorCode(code)
