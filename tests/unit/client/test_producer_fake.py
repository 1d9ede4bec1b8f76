"""Producer + Sender against a scripted broker: retries with backoff, non-retriable errors, acks=0,
ordering under retries, delivery timeout, idempotence with and without InitProducerId."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_broker import FakeBroker

from kafkalite.client import KafkaError, KafkaProducer, UnsupportedFeatureError
from kafkalite.client.errors import KafkaTimeoutError
from kafkalite.client.producer_send import make_send
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records.speedups import SPEEDUPS


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    b = FakeBroker()
    yield b
    b.close()


def test_retriable_errors_are_retried(fake: FakeBroker) -> None:
    fake.produce_errors = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT]
    with KafkaProducer(
        bootstrap_servers=fake.bootstrap_servers, retry_backoff_ms=10, linger_ms=0
    ) as p:
        md = p.send("t", b"v", partition=0).get(10)
    assert md.offset == 0 and fake.log[0] == [(None, b"v")]
    assert fake.requests.count(0) == 3


def test_non_retriable_error_fails_future(fake: FakeBroker) -> None:
    fake.produce_errors = [ErrorCode.MESSAGE_TOO_LARGE]
    with KafkaProducer(bootstrap_servers=fake.bootstrap_servers, linger_ms=0) as p:
        f = p.send("t", b"v", partition=1)
        with pytest.raises(KafkaError) as ei:
            f.get(10)
    assert ei.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert fake.requests.count(0) == 1


def test_retries_exhausted(fake: FakeBroker) -> None:
    fake.produce_errors = [ErrorCode.NOT_ENOUGH_REPLICAS] * 10
    with (
        KafkaProducer(bootstrap_servers=fake.bootstrap_servers, retries=2, retry_backoff_ms=5) as p,
        pytest.raises(KafkaError),
    ):
        p.send("t", b"v", partition=0).get(10)
    assert fake.requests.count(0) == 3


def test_acks_zero_completes_without_offsets(fake: FakeBroker) -> None:
    with KafkaProducer(bootstrap_servers=fake.bootstrap_servers, acks=0) as p:
        md = p.send("t", b"v", partition=0).get(10)
        assert md.offset == -1
        p.flush()
    deadline = time.monotonic() + 5
    while not fake.log.get(0) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.log[0] == [(None, b"v")]


def test_order_kept_under_retries(fake: FakeBroker) -> None:
    fake.produce_errors = [0, ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, ErrorCode.REQUEST_TIMED_OUT]
    with KafkaProducer(
        bootstrap_servers=fake.bootstrap_servers,
        max_in_flight_requests_per_connection=1,
        batch_size=200,
        linger_ms=1,
        retry_backoff_ms=5,
    ) as p:
        futs = [p.send("t", b"%04d" % i, partition=0) for i in range(200)]
        p.flush(20)
        offsets = [f.get().offset for f in futs]
    assert [v for _, v in fake.log[0]] == [b"%04d" % i for i in range(200)]
    assert offsets == list(range(200))


def test_delivery_timeout(fake: FakeBroker) -> None:
    fake.produce_errors = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 1000
    with KafkaProducer(
        bootstrap_servers=fake.bootstrap_servers, delivery_timeout_ms=300, retry_backoff_ms=20
    ) as p:
        t0 = time.monotonic()
        with pytest.raises((KafkaError, KafkaTimeoutError)):
            p.send("t", b"v", partition=0).get(10)
        assert time.monotonic() - t0 < 5


def test_idempotence_needs_init_producer_id(fake: FakeBroker) -> None:
    with pytest.raises(UnsupportedFeatureError, match="InitProducerId"):
        KafkaProducer(bootstrap_servers=fake.bootstrap_servers, enable_idempotence=True)


def test_idempotence_sequences() -> None:
    fake = FakeBroker(init_producer_id=True)
    try:
        fake.produce_errors = [0, ErrorCode.NOT_LEADER_OR_FOLLOWER]
        with KafkaProducer(
            bootstrap_servers=fake.bootstrap_servers,
            enable_idempotence=True,
            batch_size=300,
            linger_ms=1,
            retry_backoff_ms=5,
        ) as p:
            for i in range(60):
                p.send("t", b"%03d" % i, partition=0)
            p.flush(20)
        seqs = [(b.producer_id, b.base_sequence, len(b.records)) for _, b in fake.batches]
        assert all(pid == 4242 for pid, _, _ in seqs)
        expected = 0
        for _, seq, n in seqs:
            assert seq == expected
            expected += n
        assert [v for _, v in fake.log[0]] == [b"%03d" % i for i in range(60)]
    finally:
        fake.close()


def test_callbacks_and_send_validation(fake: FakeBroker) -> None:
    got: list[tuple[object, object]] = []
    with KafkaProducer(bootstrap_servers=fake.bootstrap_servers, value_serializer="str") as p:
        p.send("t", "hello", partition=1, callback=lambda md, exc: got.append((md, exc))).get(10)
        with pytest.raises(KafkaError):
            p.send("t", "x", partition=7)
        with pytest.raises(KafkaError):
            p.send("t", "x" * 2_000_000)
    assert got and got[0][1] is None and got[0][0].partition == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("acks", [0, 1])
def test_large_batches_spliced_into_requests_keep_bytes_and_order(
    fake: FakeBroker, acks: int
) -> None:
    # batches above the protocol's splice size go out as their own buffers (no copy into the request),
    # also when a retry re-sends them; the user thread paces itself on the Sender's writes
    if acks:
        fake.produce_errors = [0, ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, ErrorCode.REQUEST_TIMED_OUT]
    values = [bytes([i % 251]) * 1000 + b"%05d" % i for i in range(400)]
    with KafkaProducer(
        bootstrap_servers=fake.bootstrap_servers,
        acks=acks,
        max_in_flight_requests_per_connection=1,
        batch_size=20000,
        linger_ms=1,
        retry_backoff_ms=5,
    ) as p:
        futs = [p.send("t", v, partition=0) for v in values]
        p.flush(20)
        offsets = [f.get().offset for f in futs]
    deadline = time.monotonic() + 5
    while len(fake.log.get(0, [])) < len(values) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [v for _, v in fake.log[0]] == values
    assert offsets == (list(range(400)) if acks else [-1] * 400)


@pytest.mark.parametrize(
    "lock_free",
    [False, pytest.param(True, marks=pytest.mark.skipif(not SPEEDUPS, reason="no C accelerator"))],
)
def test_hot_path_appends_race_the_drain_without_loss(fake: FakeBroker, lock_free: bool) -> None:
    # user threads append through send()'s hot path (lock-free over the C buffer, under the lock over
    # the Python one) while the I/O thread drains small batches as fast as it can: each record lands
    # once, in its batch, with the offset its future reports
    threads, each = 3, 3000
    with KafkaProducer(
        bootstrap_servers=fake.bootstrap_servers, batch_size=1024, linger_ms=0, acks=1
    ) as p:
        p.send = make_send(p, lock_free=lock_free)  # type: ignore[method-assign]
        p.partitions_for("t")
        futs: list[list[Any]] = [[] for _ in range(threads)]

        def run(i: int) -> None:
            send = p.send
            futs[i] = [send("t", b"%d-%05d" % (i, n), partition=0) for n in range(each)]

        workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads often: between any two bytecodes of send()
        try:
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        finally:
            sys.setswitchinterval(interval)
        p.flush(30)
        got = {
            f.get().offset: b"%d-%05d" % (i, n)
            for i, fs in enumerate(futs)
            for n, f in enumerate(fs)
        }
    log = [v for _, v in fake.log[0]]
    assert len(log) == threads * each and sorted(got) == list(range(len(log)))
    assert all(log[off] == v for off, v in got.items())
    for i in range(threads):  # each thread's records keep their order
        mine = [v for v in log if v is not None and v.startswith(b"%d-" % i)]
        assert mine == [b"%d-%05d" % (i, n) for n in range(each)]
