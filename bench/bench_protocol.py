"""Protocol micro-benchmark: Produce v9 request decode/re-encode with a 16 KiB batch, and the batch header view.

Prints per-operation microseconds (median of timeit repeats) and ratios against kafka-python measured in this run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit
from collections.abc import Callable
from typing import Any

from kafkalite.protocol.headers import (
    RequestHeader,
    decode_request_header,
    encode_request_header,
    request_header_version,
)
from kafkalite.protocol.messages.produce import ProduceRequest
from kafkalite.records.header import crc_valid, parse_batch_header

PRODUCE_VERSION = 9
BATCH_TARGET = 16 * 1024
HEADER_VIEW_TARGET_US = 3.0


def build_16k_batch() -> tuple[bytes, str]:
    """A ~16 KiB uncompressed v2 batch of 1 KiB values, from kafkalite's builder or kafka-python's."""
    value = os.urandom(1000)
    records = [(f"key-{i}".encode(), value) for i in range(BATCH_TARGET // 1024)]
    try:
        from kafkalite.records.batch import build_batch

        return build_batch(records), "kafkalite.records.batch.build_batch"
    except ImportError:
        pass
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (key, val) in enumerate(records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=val, headers=[])
    return bytes(builder.build()), "kafka.record.default_records.DefaultRecordBatchBuilder"


def per_op_us(fn: Callable[[], Any], repeat: int, min_time: float) -> tuple[float, float]:
    """(median, best) over `repeat` timeit runs of the time of one call, in microseconds."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()  # calls per run so that one run takes >= 0.2 s
    number = max(1, int(number * min_time / 0.2))
    runs = timer.repeat(repeat=repeat, number=number)
    return statistics.median(runs) / number * 1e6, min(runs) / number * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7, help="timeit repeats (the median is reported)")
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds per repeat (about)")
    args = ap.parse_args()

    batch, builder_name = build_16k_batch()
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="bench-topic",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
                ],
            )
        ],
    )
    body = request.encode(PRODUCE_VERSION)
    frame = bytearray()
    hv = request_header_version(0, PRODUCE_VERSION, ProduceRequest.is_flexible(PRODUCE_VERSION))
    encode_request_header(frame, RequestHeader(0, PRODUCE_VERSION, 1, "bench"), hv)
    body_offset = len(frame)
    frame += body
    frame_bytes = bytes(frame)
    assert decode_request_header(frame_bytes, hv)[1] == body_offset

    decoded = ProduceRequest.decode(body, PRODUCE_VERSION)
    records = decoded.topic_data[0].partition_data[0].records
    assert records == batch and decoded.encode(PRODUCE_VERSION) == body
    header = parse_batch_header(batch, 0)
    assert header.size == len(batch) and crc_valid(batch, 0, header)

    def decode_body() -> Any:
        return ProduceRequest.decode(body, PRODUCE_VERSION)

    def encode_body() -> bytes:
        return decoded.encode(PRODUCE_VERSION)

    def decode_reencode() -> bytes:
        return ProduceRequest.decode(body, PRODUCE_VERSION).encode(PRODUCE_VERSION)

    def decode_frame() -> Any:
        _, pos = decode_request_header(frame_bytes, hv)
        return ProduceRequest.decode(frame_bytes, PRODUCE_VERSION, pos)

    def header_view() -> Any:
        return parse_batch_header(batch, 0)

    def crc_only() -> bool:
        return crc_valid(batch, 0, header)

    def header_view_crc() -> bool:
        h = parse_batch_header(batch, 0)
        return crc_valid(batch, 0, h)

    ours: list[tuple[str, Callable[[], Any]]] = [
        ("Produce v9 decode (body)", decode_body),
        ("Produce v9 encode (body)", encode_body),
        ("Produce v9 decode + re-encode", decode_reencode),
        ("Produce v9 frame: header + body decode", decode_frame),
        ("batch header view (parse_batch_header)", header_view),
        ("batch CRC-32C check (crc_valid)", crc_only),
        ("batch header view + CRC check", header_view_crc),
    ]

    peers: dict[str, Callable[[], Any]] = {}
    try:
        from kafka.protocol.producer import ProduceRequest as KProduceRequest

        kreq = KProduceRequest.decode(body, version=PRODUCE_VERSION)
        kreq._header = None  # decoded instances lack it; encode() expects the attribute

        def k_decode() -> Any:
            return KProduceRequest.decode(body, version=PRODUCE_VERSION)

        def k_encode() -> bytes:
            return bytes(kreq.encode(version=PRODUCE_VERSION))

        def k_decode_reencode() -> bytes:
            obj = KProduceRequest.decode(body, version=PRODUCE_VERSION)
            obj._header = None
            return bytes(obj.encode(version=PRODUCE_VERSION))

        if k_encode() == body:
            peers["Produce v9 decode (body)"] = k_decode
            peers["Produce v9 encode (body)"] = k_encode
            peers["Produce v9 decode + re-encode"] = k_decode_reencode
    except Exception as exc:  # the peer is optional: report and go on
        print(f"(kafka-python Produce peer unavailable: {type(exc).__name__}: {exc})")
    try:
        from kafka.record.default_records import DefaultRecordBatch

        def k_header_view_crc() -> bool:
            b = DefaultRecordBatch(batch)
            return bool(b.validate_crc()) and b.base_offset == 0

        if k_header_view_crc():
            peers["batch header view + CRC check"] = k_header_view_crc
    except Exception as exc:
        print(f"(kafka-python record-batch peer unavailable: {type(exc).__name__}: {exc})")

    print(
        f"python {sys.version.split()[0]}; batch {len(batch)} bytes, {header.records_count} records"
    )
    print(f"batch built by {builder_name}; Produce v9 body {len(body)} bytes")
    print(f"median of {args.repeat} timeit repeats, microseconds per operation\n")
    print(f"{'operation':<42} {'kafkalite':>11} {'(best)':>8} {'kafka-python':>13} {'ratio':>7}")
    results: dict[str, tuple[float, float]] = {}
    for name, fn in ours:
        us, best = per_op_us(fn, args.repeat, args.min_time)
        results[name] = (us, best)
        peer = peers.get(name)
        if peer is not None:
            pus, _ = per_op_us(peer, args.repeat, args.min_time)
            print(f"{name:<42} {us:>11.2f} {best:>8.2f} {pus:>13.2f} {pus / us:>6.1f}x")
        else:
            print(f"{name:<42} {us:>11.2f} {best:>8.2f} {'-':>13} {'-':>7}")
    view, view_best = results["batch header view + CRC check"]
    verdict = "MET" if view < HEADER_VIEW_TARGET_US else "MISSED"
    print(
        f"\ntarget: header view + CRC of a 16 KiB batch < {HEADER_VIEW_TARGET_US:.0f} us "
        f"-> median {view:.2f} us (best {view_best:.2f} us), {verdict}"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("(ratio = kafka-python time / kafkalite time; above 1x means kafkalite is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
