"""The transactional workload: producers that commit or abort transactions across partitions, and
read-process-write processors (read_committed, send_offsets_to_transaction), recorded into a History.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from kafkalite.jepsen.history import History, Op
from kafkalite.jepsen.workloads import (
    QUIET,
    Assignment,
    Counts,
    Process,
    Values,
    ends_of,
    key_of,
    poll_mops,
    start_thread,
)


def _txn_producer_config(
    bootstrap: str, txn_id: str, counts: Counts, config: dict[str, Any]
) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 0,
        "transaction.timeout.ms": 20000,
        "message.timeout.ms": int(counts.op_timeout * 1000),
        **QUIET,
        **config,
    }


class _TxnSession:
    """A transactional producer that a fatal error replaces (a new process id, as after info)."""

    def __init__(self, worker: int, conf: dict[str, Any], timeout: float) -> None:
        self.proc = Process(worker)
        self.conf, self.timeout = conf, timeout
        self.producer: Producer | None = None

    def ready(self, stop: threading.Event) -> Producer | None:
        while self.producer is None and not stop.is_set():
            p = Producer(self.conf)
            try:
                p.init_transactions(self.timeout)
                self.producer = p
            except KafkaException:
                time.sleep(0.5)
        return self.producer

    def lost(self) -> None:
        self.producer = None
        self.proc.crashed()


def _run_txn(
    session: _TxnSession,
    history: History,
    sends: list[tuple[str, int, int]],  # (topic, partition, value)
    polls: list[tuple[str, str, list[tuple[int, int]]]],
    outcome: str,
    extra: dict[str, Any],
    offsets: Callable[[Producer], None] | None = None,
) -> str:
    """One transaction: send, add consumer offsets, commit or abort; recorded as one "txn" op.
    Returns "ok", "fail" (did not commit) or "info"."""
    producer = session.producer
    assert producer is not None
    invoked: list[tuple[Any, ...]] = [("send", key_of(t, p), v, None) for t, p, v in sends] + [
        ("poll", k, []) for _, k, _ in polls
    ]
    op: Op = history.invoke(session.proc.id, "txn", invoked, txn=outcome, **extra)
    got: dict[int, int] = {}

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            got[int(bytes(msg.value() or b"-1"))] = int(msg.offset() or 0)

    try:
        producer.begin_transaction()
        for t, p, v in sends:
            producer.produce(t, str(v).encode(), partition=p, on_delivery=delivered)
        producer.flush(session.timeout)
        if offsets is not None:
            offsets(producer)
        if outcome == "commit":
            producer.commit_transaction(session.timeout)
        else:
            producer.abort_transaction(session.timeout)
        producer.poll(0)
    except KafkaException as exc:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is not None and err.txn_requires_abort():
            try:
                producer.abort_transaction(session.timeout)
                history.complete(op, "fail", error=str(exc))
                return "fail"
            except KafkaException:
                pass
        history.complete(op, "info", error=str(exc))
        session.lost()
        return "info"
    mops = [("send", key_of(t, p), v, got.get(v)) for t, p, v in sends] + list(polls)
    history.complete(op, "ok", mops)
    return "ok"


def _txn_producer(
    worker: int,
    bootstrap: str,
    topic: str,
    history: History,
    stop: threading.Event,
    counts: Counts,
    values: Values,
    config: dict[str, Any],
) -> None:
    conf = _txn_producer_config(bootstrap, f"jepsen-txn-{topic}-{worker}", counts, config)
    session = _TxnSession(worker, conf, counts.op_timeout)
    rng = random.Random(worker)
    while session.ready(stop) is not None and not stop.is_set():
        n = rng.randint(1, counts.txn_sends)
        sends = [(topic, rng.randrange(counts.partitions), values()) for _ in range(n)]
        outcome = "abort" if rng.random() < counts.abort_ratio else "commit"
        _run_txn(session, history, sends, [], outcome, {})


def _processor(
    worker: int,
    bootstrap: str,
    source: str,
    sink: str,
    history: History,
    stop: threading.Event,
    counts: Counts,
    values: Values,
    config: dict[str, Any],
) -> None:
    """Read committed from `source`, write a new value per record to the same partition of `sink` and
    the consumer's offsets in the same transaction (send_offsets_to_transaction)."""
    group = f"jepsen-rpw-{source}"
    conf = _txn_producer_config(bootstrap, f"jepsen-rpw-{source}-{worker}", counts, config)
    session = _TxnSession(worker, conf, counts.op_timeout)
    assignment = Assignment()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **QUIET,
            **config,
        }
    )
    consumer.subscribe([source], on_assign=assignment.on_assign, on_revoke=assignment.on_revoke)
    try:
        while session.ready(stop) is not None and not stop.is_set():
            msgs = [
                m
                for m in consumer.consume(counts.max_poll, counts.poll_timeout)
                if m.error() is None
            ]
            if not msgs:
                continue
            polls, nxt = poll_mops(msgs)
            ends = ends_of(consumer, nxt)
            sends = [(sink, int(m.partition() or 0), values()) for m in msgs]
            positions = [TopicPartition(t, p, o) for (t, p), o in sorted(nxt.items())]
            offsets = functools.partial(_send_offsets, consumer, positions, session.timeout)

            extra = {
                "isolation": "read_committed",
                "epoch": assignment.epoch,
                "ends": ends,
                "group": group,
            }
            if _run_txn(session, history, sends, polls, "commit", extra, offsets) != "ok":
                _rewind(consumer, assignment)
    finally:
        consumer.close()


def _send_offsets(
    consumer: Consumer, positions: list[TopicPartition], timeout: float, producer: Producer
) -> None:
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), timeout)


def _rewind(consumer: Consumer, assignment: Assignment) -> None:
    """After a transaction that did not commit, go back to the group's committed offsets."""
    assignment.epoch += 1
    try:
        committed = consumer.committed(assignment.partitions, timeout=10)
    except KafkaException:
        return
    for tp in committed:
        offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        try:
            consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        except KafkaException:
            pass


def start_txn(
    bootstrap: str,
    topics: tuple[str, str],
    history: History,
    stop: threading.Event,
    counts: Counts | None = None,
    config: dict[str, Any] | None = None,
    values: Values | None = None,
) -> list[threading.Thread]:
    """Transactional producers into topics[0] (some transactions aborted at random) and
    read-process-write processors from topics[0] to topics[1]."""
    counts, config, values = counts or Counts(), config or {}, values or Values()
    source, sink = topics
    threads = [
        start_thread(
            f"txn-producer-{i}",
            functools.partial(
                _txn_producer, i, bootstrap, source, history, stop, counts, values, config
            ),
        )
        for i in range(counts.producers)
    ]
    threads += [
        start_thread(
            f"txn-processor-{i}",
            functools.partial(
                _processor, 200 + i, bootstrap, source, sink, history, stop, counts, values, config
            ),
        )
        for i in range(counts.consumers)
    ]
    return threads
