"""REST v3 produce (POST .../topics/{topic}/records, written through the broker's Produce handler with
acks=all) and kafkalite's record read for the console (by offset, by timestamp, or the latest ones).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import time
from datetime import UTC, datetime

from aiohttp import web

from kafkalite.broker.apis.data import produce
from kafkalite.broker.apis.data.list_offsets import lookup
from kafkalite.broker.context import DeferredResponse
from kafkalite.filters import (
    CompiledFilter,
    FilterError,
    NotFilterable,
    compile_filter,
    filter_records,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.produce import PRODUCE, ProduceRequest
from kafkalite.records import iter_batches
from kafkalite.records.builder import RecordBatchBuilder
from kafkalite.records.speedups import murmur2 as _c_murmur2
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.web.rest._base import (
    RestError,
    bad_request,
    broker_of,
    cluster_id,
    context,
    json_body,
    ok,
    require,
)
from kafkalite.web.rest.topics import partition_or_404, topic_or_404

PRODUCE_TIMEOUT_MS = 30_000
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_FILTER_SCAN = 64 * 1024 * 1024  # bytes one filtered read scans at most; next_offset goes on
_READ_CHUNK = 1024 * 1024
_round_robin = itertools.count()


# -- Kafka's default partitioner ----------------------------------------------------------------------


def _py_murmur2(data: bytes) -> int:
    """murmur2 with Kafka's seed, as an unsigned 32-bit value."""
    m = 0x5BD1E995
    h = (0x9747B28C ^ len(data)) & 0xFFFFFFFF
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(data[i : i + 4], "little") * m) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h = ((h ^ tail[0]) * m) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's BuiltInPartitioner for a keyed record: toPositive(murmur2(key)) % partitions."""
    h = _c_murmur2(key) if _c_murmur2 is not None else _py_murmur2(key)
    return (h & 0x7FFFFFFF) % partitions


# -- the produce body ---------------------------------------------------------------------------------


def _data(body: dict[str, object], name: str) -> tuple[bytes | None, str | None]:
    """(bytes, type) of `key` or `value`: {"type": BINARY|STRING|JSON, "data": ...}; absent or
    null data is a null key/value. A missing type means JSON."""
    spec = body.get(name)
    if spec is None:
        return None, None
    if not isinstance(spec, dict):
        raise bad_request(f"Field {name} must be an object {{type, data}}")
    kind = str(spec.get("type") or "JSON").upper()
    if "data" not in spec or (spec["data"] is None and kind != "JSON"):
        return None, kind
    data = spec["data"]
    if kind == "BINARY":
        if not isinstance(data, str):
            raise bad_request(f"{name}.data of type BINARY must be a base64 string")
        try:
            return base64.b64decode(data, validate=True), kind
        except (binascii.Error, ValueError):
            raise bad_request(f"{name}.data is not valid base64") from None
    if kind == "STRING":
        if not isinstance(data, str):
            raise bad_request(f"{name}.data of type STRING must be a string")
        return data.encode("utf-8"), kind
    if kind == "JSON":
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), kind
    raise bad_request(f"Unsupported {name} type {kind!r}: kafkalite takes BINARY, STRING or JSON")


def _headers(body: dict[str, object]) -> list[tuple[str, bytes | None]]:
    raw = body.get("headers") or []
    if not isinstance(raw, list):
        raise bad_request("Field headers must be a list of {name, value}")
    out: list[tuple[str, bytes | None]] = []
    for h in raw:
        if not isinstance(h, dict) or not isinstance(h.get("name"), str):
            raise bad_request("Every header needs a string name")
        value = h.get("value")
        if value is None:
            out.append((h["name"], None))
            continue
        if not isinstance(value, str):
            raise bad_request(f"Header {h['name']}: value must be a base64 string")
        try:
            out.append((h["name"], base64.b64decode(value, validate=True)))
        except (binascii.Error, ValueError):
            raise bad_request(f"Header {h['name']}: value is not valid base64") from None
    return out


def _timestamp(body: dict[str, object]) -> int | None:
    ts = body.get("timestamp")
    if ts is None:
        return None
    if isinstance(ts, int) and not isinstance(ts, bool):
        return ts
    if isinstance(ts, str):
        try:
            dt = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            raise bad_request(
                f"timestamp {ts!r} is neither epoch milliseconds nor ISO-8601"
            ) from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return int(dt.timestamp() * 1000)
    raise bad_request("Field timestamp must be epoch milliseconds or an ISO-8601 string")


def iso(ms: int) -> str:
    """Epoch milliseconds as the REST Proxy writes timestamps: ISO-8601 in UTC."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def produce_record(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    topic = topic_or_404(request)
    body = await json_body(request)
    key, key_type = _data(body, "key")
    value, value_type = _data(body, "value")
    headers = _headers(body)
    ts = _timestamp(body)
    pid = body.get("partition_id")
    count = len(topic.partitions)
    if pid is not None:
        if isinstance(pid, bool) or not isinstance(pid, int):
            raise bad_request("Field partition_id must be an integer")
        if topic.partition(pid) is None:
            raise RestError(
                404, f"This server does not host this topic-partition. ({topic.name}-{pid})"
            )
    elif key is not None:
        pid = partition_for_key(key, count)
    else:
        pid = next(_round_robin) % count
    if ts is None:
        ts = int(time.time() * 1000)
    builder = RecordBatchBuilder()
    builder.append(key, value, headers, ts)
    stamped = builder.build()
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=PRODUCE_TIMEOUT_MS,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic.name,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=pid, records=stamped)
                ],
            )
        ],
    )
    answer = await produce.handle(context(request, PRODUCE, 9), req)
    if isinstance(answer, DeferredResponse):
        answer = await answer.answer
    assert answer is not None  # acks=-1: produce always answers
    pr = answer.responses[0].partition_responses[0]
    if pr.error_code:
        message = pr.error_message
        if pr.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            leader = topic.partition(pid)
            lid = leader.leader if leader is not None else -1
            here = broker_of(request).broker_id
            message = (
                f"broker {here} does not lead {topic.name}-{pid}; send it to the HTTP listener of "
                f"its leader, broker {lid}"
            )
        raise RestError.kafka(pr.error_code, message)
    when = pr.log_append_time_ms if pr.log_append_time_ms >= 0 else ts
    return ok(
        {
            "error_code": 200,
            "cluster_id": cid,
            "topic_name": topic.name,
            "partition_id": pid,
            "offset": pr.base_offset,
            "timestamp": iso(when),
            "key": {"type": key_type, "size": len(key)} if key is not None else None,
            "value": {"type": value_type, "size": len(value)} if value is not None else None,
        }
    )


# -- reading ------------------------------------------------------------------------------------------


def describe_bytes(data: bytes | None) -> dict[str, object] | None:
    """JSON when the bytes are a JSON object or array, STRING when UTF-8, else BINARY (base64)."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"type": "BINARY", "data": base64.b64encode(data).decode("ascii")}
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return {"type": "JSON", "data": json.loads(text)}
        except ValueError:
            pass
    return {"type": "STRING", "data": text}


def _query_int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(f"Query parameter {name} must be an integer, got {raw!r}") from None


async def read_records(request: web.Request) -> web.Response:
    cluster_id(request)
    topic = topic_or_404(request)
    p = partition_or_404(request, topic)
    require(
        request,
        AclOperation.READ,
        ResourceType.TOPIC,
        topic.name,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    )
    offset_q, ts_q = _query_int(request, "offset"), _query_int(request, "timestamp")
    limit = _query_int(request, "limit")
    limit = DEFAULT_LIMIT if limit is None else limit
    if limit < 1:
        raise bad_request("Query parameter limit must be at least 1")
    limit = min(limit, MAX_LIMIT)
    flt: CompiledFilter | None = None
    if request.query.get("filter"):
        try:
            flt = compile_filter(request.query["filter"])
        except FilterError as exc:
            raise bad_request(f"Query parameter filter is invalid: {exc}") from None
    scanned = 0
    rm = broker_of(request).replica_manager
    part = rm.get_partition(topic.name, p.partition)
    if part is None:
        raise RestError(
            421,
            f"NOT_LEADER_OR_FOLLOWER: broker {broker_of(request).broker_id} hosts no replica of "
            f"{topic.name}-{p.partition}; ask the HTTP listener of its leader, broker {p.leader}",
        )
    hw = part.high_watermark
    if offset_q is not None:
        start = max(offset_q, part.log_start_offset)
    elif ts_q is not None:
        _, found = lookup(part, ts_q)
        start = found if found >= 0 else hw
    else:
        start = max(part.log_start_offset, hw - limit)
    data: list[dict[str, object]] = []
    at = start
    last = start - 1  # the offset of the last record in data
    while len(data) < limit and at < hw and scanned < MAX_FILTER_SCAN:
        info = rm.read(part, at, _READ_CHUNK, from_follower=False, min_one_message=True)
        if info.slice is None:
            break
        advanced = False
        try:
            raw = info.slice.read_bytes()
            if flt is not None:  # whole batches judged from their headers, the rest per record
                scanned += len(raw)
                try:
                    raw = filter_records(raw, flt)
                except NotFilterable:
                    pass
            for batch in iter_batches(raw, allow_truncated_tail=True):
                if batch.next_offset <= at:
                    continue
                advanced = True
                if not batch.is_control:
                    for rec in batch.records:
                        if rec.offset < at or rec.offset >= hw or len(data) >= limit:
                            continue
                        if flt is not None and not flt.match(
                            rec.offset, rec.timestamp, rec.key, rec.headers
                        ):
                            continue
                        last = rec.offset
                        data.append(
                            {
                                "partition_id": p.partition,
                                "offset": rec.offset,
                                "timestamp": rec.timestamp,
                                "key": describe_bytes(rec.key),
                                "value": describe_bytes(rec.value),
                                "headers": [
                                    {
                                        "name": n,
                                        "value": None
                                        if v is None
                                        else base64.b64encode(v).decode("ascii"),
                                    }
                                    for n, v in rec.headers
                                ],
                            }
                        )
                at = last + 1 if len(data) >= limit else batch.next_offset
                if len(data) >= limit:
                    break
        except DecodeError as exc:
            raise RestError.kafka(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        if not advanced:
            break
    next_offset = min(at, hw) if at > start else start
    return ok({"kind": "KafkaRecordList", "data": data, "next_offset": next_offset})


def add_routes(app: web.Application) -> None:
    base = "/v3/clusters/{cluster_id}/topics/{topic_name}"
    app.router.add_post(base + "/records", produce_record)
    app.router.add_get(base + "/partitions/{partition_id}/records", read_records)
