"""Producer futures (get, callbacks, await from another loop) and config name handling."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kafkalite.client.config import CONSUMER, PRODUCER, make_config, parse_servers
from kafkalite.client.errors import KafkaTimeoutError
from kafkalite.client.futures import BatchOutcome, FutureRecordMetadata, RecordMetadata
from kafkalite.protocol.errors import ErrorCode, KafkaError


def _fut(o: BatchOutcome, delta: int = 2) -> FutureRecordMetadata:
    return FutureRecordMetadata(o, "t", 1, delta, 1234, 3, 5)


def test_get_and_callbacks() -> None:
    o = BatchOutcome()
    f = _fut(o)
    seen: list[object] = []
    f.add_callback(seen.append)
    f.add_both(lambda md, exc: seen.append(("both", md.offset if md else None, exc)))
    with pytest.raises(KafkaTimeoutError):
        f.get(0.01)
    threading.Timer(0.05, o.complete, args=(100, -1, None)).start()
    md = f.get(5)
    assert md == RecordMetadata("t", 1, 102, 1234, 3, 5)
    assert f.result() == md and f.succeeded()
    assert seen == [md, ("both", 102, None)]
    late: list[object] = []
    f.add_callback(late.append)  # after completion: runs at once
    assert late == [md]


def test_log_append_time_and_errors() -> None:
    o = BatchOutcome()
    f = _fut(o, 0)
    o.complete(7, 99999, None)
    assert f.get().timestamp == 99999
    o2 = BatchOutcome()
    f2 = _fut(o2)
    errs: list[BaseException] = []
    f2.add_errback(errs.append)
    o2.complete(-1, -1, KafkaError(ErrorCode.MESSAGE_TOO_LARGE))
    with pytest.raises(KafkaError):
        f2.get()
    assert f2.failed() and isinstance(errs[0], KafkaError)


def test_await_from_another_loop() -> None:
    o = BatchOutcome()
    f = _fut(o)

    async def main() -> RecordMetadata:
        threading.Timer(0.05, o.complete, args=(10, -1, None)).start()
        return await f

    assert asyncio.run(main()).offset == 12


def test_config_names() -> None:
    cfg = make_config(
        PRODUCER, {"linger.ms": "7", "enable.idempotence": "true"}, {"batch_size": 10}
    )
    assert cfg["linger.ms"] == 7 and cfg["batch.size"] == 10 and cfg["enable.idempotence"] is True
    c = make_config(CONSUMER, None, {"bootstrap_servers": ["a:1", "b:2"], "group_id": "g"})
    assert c["bootstrap.servers"] == "a:1,b:2" and c["group.id"] == "g"
    assert parse_servers("PLAINTEXT://h:1, [::1]:2") == [("h", 1), ("::1", 2)]
    with pytest.raises(ValueError):
        parse_servers("nohost")


def test_hot_path_future_matches_constructed_one() -> None:
    from kafkalite.client.futures import _RecordFuture

    o = BatchOutcome()
    f = _RecordFuture()
    f._r = (o, "t", 1, 2, 1234, 3, 5)
    g = _fut(o)
    assert isinstance(f, FutureRecordMetadata)
    assert (f.topic, f.partition, f.delta, f.timestamp, f.key_size, f.value_size) == (
        "t",
        1,
        2,
        1234,
        3,
        5,
    )
    assert f.outcome is o and not f.done()
    o.complete(100, -1, None)
    assert f.get(1) == g.get(1) == RecordMetadata("t", 1, 102, 1234, 3, 5)


def test_producer_fast_and_slow_paths_agree() -> None:
    """Records through the producer's inlined hot path and its general path: same bytes on the broker,
    same order, and every future/callback reports its own partition, offset and sizes."""
    from fake_broker import FakeBroker

    from kafkalite.client import KafkaProducer
    from kafkalite.client.partitioner import partition_for_key

    fake = FakeBroker(partitions=3)
    try:
        with KafkaProducer(bootstrap_servers=fake.bootstrap_servers, linger_ms=20) as p:
            sent: list[tuple[object, int, bytes | None, bytes | None, int]] = []
            seen: list[RecordMetadata] = []

            def cb(md: RecordMetadata | None, err: BaseException | None) -> None:
                assert err is None and md is not None
                seen.append(md)

            cases: list[tuple[bytes | None, bytes | None, int | None, object]] = [
                (None, b"v0", 0, None),
                (None, b"v1", 0, None),  # hot path: room in partition 0's open batch
                (b"k", None, 0, None),
                (b"", b"", 0, None),
                (None, b"x" * 9000, 0, None),  # over 8 KiB: general path
                (None, b"v2", 0, [("h", b"1")]),  # headers: general path
                (b"key-a", b"v3", None, None),  # murmur2
                (b"key-a", b"v4", None, None),
                (None, b"v5", 2, None),
            ]
            for i, (k, v, part, hdrs) in enumerate(cases):
                ts = 1_700_000_000_000 + i
                f = p.send("t", v, k, headers=hdrs, partition=part, timestamp_ms=ts, callback=cb)
                want = part if part is not None else partition_for_key(k or b"", 3)
                sent.append((f, want, k, v, ts))
            p.flush(10)
        by_part: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        for f, want, k, v, ts in sent:
            md = f.get(5)  # type: ignore[attr-defined]
            assert md.partition == want and md.timestamp == ts
            assert md.serialized_key_size == (-1 if k is None else len(k))
            assert md.serialized_value_size == (-1 if v is None else len(v))
            assert md.offset == len(by_part.setdefault(want, []))
            by_part[want].append((k, v))
        for part, recs in by_part.items():
            assert fake.log[part] == recs
        assert sorted(seen) == sorted(f.get(5) for f, *_ in sent)  # type: ignore[attr-defined]
    finally:
        fake.close()
