"""Idempotent produce through the wire: a retried batch is stored once and answered with its first
offsets, a sequence gap or a fenced epoch is refused, and the state survives a broker restart."""

from __future__ import annotations

from test_produce_fetch import fetch, produce

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch, iter_batches
from kafkalite.testing import Broker

INIT_PID = APIS[22].request


def batch(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    return build_batch(
        [(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def producer_id(c: WireClient) -> tuple[int, int]:
    r = c.send(INIT_PID(transactional_id=None, transaction_timeout_ms=-1))
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def stored_values(c: WireClient, topic: str) -> list[bytes | None]:
    _resp, part = fetch(c, topic, 0)
    return [r.value for b in iter_batches(part.records or b"") for r in b.records]


def test_retried_batch_is_stored_once_with_its_first_offset(client, topic):
    client.metadata([topic], auto_create=True)
    pid, epoch = producer_id(client)
    first = produce(client, topic, batch(pid, epoch, 0, b"a", b"b"), acks=-1)
    second = produce(client, topic, batch(pid, epoch, 2, b"c"), acks=-1)
    again = produce(client, topic, batch(pid, epoch, 0, b"a", b"b"), acks=-1)
    assert (first.error_code, second.error_code, again.error_code) == (0, 0, 0)
    assert (first.base_offset, second.base_offset, again.base_offset) == (0, 2, 0)
    assert stored_values(client, topic) == [b"a", b"b", b"c"]


def test_sequence_gap_is_refused_and_nothing_is_appended(client, topic):
    client.metadata([topic], auto_create=True)
    pid, epoch = producer_id(client)
    assert produce(client, topic, batch(pid, epoch, 0, b"a"), acks=-1).error_code == 0
    gap = produce(client, topic, batch(pid, epoch, 5, b"x"), acks=-1)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert stored_values(client, topic) == [b"a"]


def test_stale_epoch_is_fenced(client, topic):
    client.metadata([topic], auto_create=True)
    pid, _ = producer_id(client)
    assert produce(client, topic, batch(pid, 3, 0, b"a"), acks=-1).error_code == 0
    old = produce(client, topic, batch(pid, 2, 1, b"x"), acks=-1)
    assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    bumped = produce(client, topic, batch(pid, 4, 0, b"b"), acks=-1)
    assert bumped.error_code == 0
    assert stored_values(client, topic) == [b"a", b"b"]


def test_non_idempotent_batches_are_never_deduplicated(client, topic):
    client.metadata([topic], auto_create=True)
    blob = build_batch([(None, b"same")])
    assert [produce(client, topic, blob).base_offset for _ in range(3)] == [0, 1, 2]


def test_duplicate_detected_after_restart_from_state_rebuilt_from_the_log(tmp_path):
    topic = "idem"
    b = Broker(tmp_path).start()
    try:
        with WireClient(b.bootstrap_servers, timeout=10) as c:
            c.metadata([topic], auto_create=True)
            pid, epoch = producer_id(c)
            for seq, v in enumerate((b"a", b"b", b"c")):
                assert produce(c, topic, batch(pid, epoch, seq, v), acks=-1).error_code == 0
    finally:
        b.stop()
    with Broker(tmp_path) as b2, WireClient(b2.bootstrap_servers, timeout=10) as c:
        again = produce(c, topic, batch(pid, epoch, 1, b"b"), acks=-1)
        assert (again.error_code, again.base_offset) == (0, 1)
        gap = produce(c, topic, batch(pid, epoch, 9, b"z"), acks=-1)
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = produce(c, topic, batch(pid, epoch, 3, b"d"), acks=-1)
        assert (nxt.error_code, nxt.base_offset) == (0, 3)
        assert stored_values(c, topic) == [b"a", b"b", b"c", b"d"]
