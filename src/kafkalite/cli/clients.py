"""`kafkalite produce` (lines from stdin or a file) and `kafkalite consume` (from beginning/offset/timestamp).

In the spirit of kafka-console-producer/-consumer: key separators, headers, compression, output formats.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import sys
import time
from typing import Any, TextIO

from kafkalite.cli.wire import CliError, WireClient, partition_for_key
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import RecordBatchBuilder, iter_batches
from kafkalite.records.compression import Compression

BATCH_RECORDS = 500


def _headers(items: list[str] | None) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for item in items or []:
        k, sep, v = item.partition("=")
        out.append((k, v.encode() if sep else None))
    return out


def _send_batches(c: WireClient, topic: str, batches: dict[int, bytes], acks: int) -> None:
    cls: Any = APIS[0].request
    tdata = cls.TopicProduceData(
        name=topic,
        partition_data=[
            cls.TopicProduceData.PartitionProduceData(index=p, records=b)
            for p, b in batches.items()
        ],
    )
    resp = c.send(
        cls(transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[tdata]),
        expect_response=acks != 0,
    )
    if resp is None:
        return
    for t in resp.responses:
        for p in t.partition_responses:
            if p.error_code:
                raise CliError(
                    f"produce to {topic}-{p.index}: {ErrorCode(p.error_code).name} {p.error_message or ''}"
                )


def _produce(a: argparse.Namespace) -> int:
    try:
        codec = int(Compression.from_name(a.compression))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    headers = _headers(a.header)
    stream: TextIO = open(a.file, encoding="utf-8") if a.file else sys.stdin  # noqa: SIM115
    sent = 0
    rr = itertools.count()
    with WireClient(a.bootstrap_server) as c:
        partitions = c.partitions_of(a.topic, auto_create=True)
        if a.partition is not None and not 0 <= a.partition < partitions:
            raise CliError(f"topic {a.topic} has partitions 0..{partitions - 1}")
        builders: dict[int, RecordBatchBuilder] = {}

        def flush() -> None:
            nonlocal builders
            if builders:
                _send_batches(c, a.topic, {p: b.build() for p, b in builders.items()}, a.acks)
                builders = {}

        try:
            for line in stream:
                line = line.rstrip("\n")
                key: bytes | None = None
                if a.key_separator is not None:
                    k, sep, v = line.partition(a.key_separator)
                    if not sep:
                        raise CliError(f"line {sent + 1} has no key separator {a.key_separator!r}")
                    key, value = k.encode(), v.encode()
                else:
                    value = line.encode()
                if a.partition is not None:
                    part = a.partition
                elif key is not None:
                    part = partition_for_key(key, partitions)
                else:
                    part = next(rr) // BATCH_RECORDS % partitions
                b = builders.get(part)
                if b is None:
                    b = builders[part] = RecordBatchBuilder(compression=codec)
                b.append(key, value, headers)
                sent += 1
                if sum(len(x) for x in builders.values()) >= BATCH_RECORDS:
                    flush()
            flush()
        finally:
            if a.file:
                stream.close()
    print(f"produced {sent} records to {a.topic}", file=sys.stderr)
    return 0


def _list_offset(c: WireClient, topic: str, partition: int, ts: int) -> int:
    cls: Any = APIS[2].request
    t = cls.ListOffsetsTopic(
        name=topic,
        partitions=[
            cls.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, timestamp=ts)
        ],
    )
    v = c.version_for(2)
    resp = c.send(cls(replica_id=-1, isolation_level=0, topics=[t]), version=v)
    p = resp.topics[0].partitions[0]
    if p.error_code:
        raise CliError(f"list offsets of {topic}-{partition}: {ErrorCode(p.error_code).name}")
    return int(p.old_style_offsets[0] if v == 0 else p.offset)


def _fmt(v: bytes | None, enc: str) -> Any:
    if v is None:
        return None
    if enc == "base64":
        return base64.b64encode(v).decode()
    return v.decode("utf-8", errors="replace")


def _consume(a: argparse.Namespace) -> int:
    count = 0
    deadline = time.monotonic() + a.timeout_ms / 1000 if a.timeout_ms else None
    with WireClient(a.bootstrap_server) as c:
        partitions = c.partitions_of(a.topic)
        parts = [a.partition] if a.partition is not None else list(range(partitions))
        positions: dict[int, int] = {}
        for p in parts:
            if a.offset is not None:
                positions[p] = (
                    a.offset if a.offset >= 0 else _list_offset(c, a.topic, p, -1) + a.offset
                )
            elif a.timestamp is not None:
                off = _list_offset(c, a.topic, p, a.timestamp)
                positions[p] = off if off >= 0 else _list_offset(c, a.topic, p, -1)
            else:
                positions[p] = _list_offset(c, a.topic, p, -2 if a.from_beginning else -1)
        cls: Any = APIS[1].request
        v = c.version_for(1, cap=12)
        while a.max_messages is None or count < a.max_messages:
            if deadline is not None and time.monotonic() > deadline:
                break
            ft = cls.FetchTopic(
                topic=a.topic,
                partitions=[
                    cls.FetchTopic.FetchPartition(
                        partition=p, fetch_offset=o, partition_max_bytes=1 << 20
                    )
                    for p, o in positions.items()
                ],
            )
            resp = c.send(
                cls(
                    replica_id=-1,
                    max_wait_ms=500,
                    min_bytes=1,
                    max_bytes=16 << 20,
                    isolation_level=0,
                    topics=[ft],
                    forgotten_topics_data=[],
                ),
                version=v,
            )
            for t in resp.responses:
                for pd in t.partitions:
                    if pd.error_code:
                        raise CliError(
                            f"fetch {a.topic}-{pd.partition_index}: {ErrorCode(pd.error_code).name}"
                        )
                    if not pd.records:
                        continue
                    for batch in iter_batches(pd.records, allow_truncated_tail=True):
                        for rec in batch.records:
                            if rec.offset < positions[pd.partition_index] or batch.is_control:
                                continue
                            positions[pd.partition_index] = rec.offset + 1
                            _print_record(a, pd.partition_index, rec)
                            count += 1
                            if a.max_messages is not None and count >= a.max_messages:
                                return 0
                        positions[pd.partition_index] = max(
                            positions[pd.partition_index], batch.next_offset
                        )
    return 0


def _print_record(a: argparse.Namespace, partition: int, rec: Any) -> None:
    if a.format == "json":
        doc = {
            "partition": partition,
            "offset": rec.offset,
            "timestamp": rec.timestamp,
            "key": _fmt(rec.key, a.encoding),
            "value": _fmt(rec.value, a.encoding),
            "headers": {k: _fmt(v, a.encoding) for k, v in rec.headers},
        }
        print(json.dumps(doc), flush=True)
    elif a.format == "kv":
        print(f"{_fmt(rec.key, a.encoding)}{a.separator}{_fmt(rec.value, a.encoding)}", flush=True)
    else:
        print(_fmt(rec.value, a.encoding) or "", flush=True)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("produce", help="produce lines from stdin or a file")
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    p.add_argument("--topic", required=True)
    p.add_argument("--file")
    p.add_argument("--key-separator", help="split each line into key and value at this string")
    p.add_argument(
        "--header", action="append", metavar="KEY=VALUE", help="header on every record (repeatable)"
    )
    p.add_argument("--partition", type=int)
    p.add_argument("--compression", default="none", help="none, gzip, snappy, lz4 or zstd")
    p.add_argument("--acks", type=int, default=-1, choices=[-1, 0, 1])
    p.set_defaults(func=_produce)

    q = sub.add_parser("consume", help="print records of a topic")
    q.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    q.add_argument("--topic", required=True)
    q.add_argument("--partition", type=int)
    g = q.add_mutually_exclusive_group()
    g.add_argument("--from-beginning", action="store_true")
    g.add_argument("--offset", type=int, help="start offset (negative: that many before the end)")
    g.add_argument("--timestamp", type=int, help="start at the first record at/after this epoch-ms")
    q.add_argument("--max-messages", type=int)
    q.add_argument("--timeout-ms", type=int, default=0, help="stop after this long (0: never)")
    q.add_argument("--format", choices=["value", "kv", "json"], default="value")
    q.add_argument("--separator", default="\t")
    q.add_argument("--encoding", choices=["utf8", "base64"], default="utf8")
    q.set_defaults(func=_consume)
