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
