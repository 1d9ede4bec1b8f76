"""The queue and transactional (read-process-write) workloads with confluent-kafka, recording every
operation into a `History`; the final full read the checker takes as the ground truth of the log.

Keys are "topic-partition"; values are ints unique per run (their decimal text is the record value).
Workers are threads: each returns when `stop` is set. Conventions the checker reads: see jepsen.checker.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
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
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kafkalite.jepsen.history import History

log = logging.getLogger(__name__)
QUIET: dict[str, Any] = {"log_level": 0}


def key_of(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class Values:
    """Unique ints for one run, shared by every worker."""

    def __init__(self) -> None:
        self._next = itertools.count()
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return next(self._next)


@dataclass
class Counts:
    """How many workers of each kind and what they do."""

    producers: int = 2
    consumers: int = 2
    partitions: int = 4
    poll_timeout: float = 0.2
    max_poll: int = 50
    txn_sends: int = 3  # at most this many records per transaction
    abort_ratio: float = 0.3
    op_timeout: float = 10.0  # a send or a commit with no answer by then is info


def create_topics(
    bootstrap: str,
    topics: list[str],
    partitions: int,
    rf: int = 3,
    config: dict[str, str] | None = None,
) -> None:
    """Create the workload's topics (RF=3, min.insync.replicas=2 by default) and wait for them."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    cfg = {"min.insync.replicas": "2", **(config or {})}
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=rf, config=cfg) for t in topics]
    )
    for fut in futures.values():
        fut.result(timeout=60)
    deadline = time.monotonic() + 60
    while True:
        md = admin.list_topics(timeout=10)
        ready = all(
            t in md.topics
            and len(md.topics[t].partitions) == partitions
            and all(p.leader >= 0 for p in md.topics[t].partitions.values())
            for t in topics
        )
        if ready or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def start_thread(name: str, target: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except Exception:  # a worker dying is a finding, not a crash of the bench
            log.exception("jepsen worker %s died", name)

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t


class Process:
    """A worker's process id; a new one after an info op, as Jepsen does (the old op may still land)."""

    def __init__(self, worker: int) -> None:
        self.worker, self.generation = worker, 0

    @property
    def id(self) -> int:
        return self.worker * 1000 + self.generation

    def crashed(self) -> None:
        self.generation += 1


# -- queue -------------------------------------------------------------------------------------------


def _queue_producer(
    worker: int,
    bootstrap: str,
    topic: str,
    history: History,
    stop: threading.Event,
    counts: Counts,
    values: Values,
    config: dict[str, Any],
) -> None:
    proc = Process(worker)
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 0,
        "message.timeout.ms": int(counts.op_timeout * 1000),
        **QUIET,
        **config,
    }
    producer: Producer | None = None
    rng = random.Random(worker)
    while not stop.is_set():
        if producer is None:
            producer = Producer(conf)
        part = rng.randrange(counts.partitions)
        key, v = key_of(topic, part), values()
        op = history.invoke(proc.id, "send", [("send", key, v, None)])
        result: list[tuple[KafkaError | None, int]] = []

        def delivered(err: KafkaError | None, msg: Message, result: list[Any] = result) -> None:
            result.append((err, msg.offset() if err is None else -1))

        try:
            producer.produce(topic, str(v).encode(), partition=part, on_delivery=delivered)
        except (BufferError, KafkaException) as exc:
            history.complete(op, "fail", error=str(exc))
            continue
        deadline = time.monotonic() + counts.op_timeout + 5
        while not result and time.monotonic() < deadline:
            producer.poll(0.05)
        if result and result[0][0] is None:
            history.complete(op, "ok", [("send", key, v, result[0][1])])
        else:
            # a timed-out or failed delivery may still have been written: outcome unknown
            err = result[0][0] if result else None
            history.complete(op, "info", error=str(err) if err else "no delivery report")
            proc.crashed()
            if err is not None and err.fatal():  # the idempotent producer cannot go on: a new one
                producer.flush(0)
                producer = None
    if producer is not None:
        producer.flush(5)


class Assignment:
    """A consumer's assignment generation: each rebalance starts a new epoch of its polls."""

    def __init__(self) -> None:
        self.epoch = 0
        self.partitions: list[TopicPartition] = []

    def on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.epoch += 1
        self.partitions = list(parts)

    def on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.epoch += 1
        self.partitions = []


def poll_mops(
    msgs: list[Message],
) -> tuple[list[tuple[str, str, list[tuple[int, int]]]], dict[tuple[str, int], int]]:
    """Poll micro-ops grouped by key, and the next position per (topic, partition)."""
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    nxt: dict[tuple[str, int], int] = {}
    for m in msgs:
        if m.error() is not None:
            continue
        topic, part, off = str(m.topic()), int(m.partition() or 0), int(m.offset() or 0)
        by_key[key_of(topic, part)].append((off, int(bytes(m.value() or b"-1"))))
        nxt[(topic, part)] = off + 1
    return [("poll", k, recs) for k, recs in sorted(by_key.items())], nxt


def ends_of(consumer: Consumer, nxt: dict[tuple[str, int], int]) -> dict[str, int]:
    """The end (high watermark, or LSO for read_committed) of each polled partition as last fetched."""
    out: dict[str, int] = {}
    for topic, part in nxt:
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, part), cached=True)
        except KafkaException:
            continue
        if high is not None and high >= 0:
            out[key_of(topic, part)] = int(high)
    return out


def _queue_consumer(
    worker: int,
    bootstrap: str,
    topic: str,
    history: History,
    stop: threading.Event,
    counts: Counts,
    config: dict[str, Any],
) -> None:
    proc = Process(worker)
    assignment = Assignment()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"jepsen-queue-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **QUIET,
            **config,
        }
    )
    consumer.subscribe([topic], on_assign=assignment.on_assign, on_revoke=assignment.on_revoke)
    try:
        while not stop.is_set():
            op = history.invoke(proc.id, "poll", [], isolation="read_committed")
            try:
                msgs = consumer.consume(counts.max_poll, counts.poll_timeout)
            except KafkaException as exc:
                history.complete(op, "fail", [], error=str(exc))
                continue
            mops, nxt = poll_mops(msgs)
            history.complete(op, "ok", mops, epoch=assignment.epoch, ends=ends_of(consumer, nxt))
            if nxt:
                _commit(consumer, nxt, history, proc)
    finally:
        consumer.close()


def _commit(
    consumer: Consumer, nxt: dict[tuple[str, int], int], history: History, proc: Process
) -> None:
    offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(nxt.items())]
    op = history.invoke(
        proc.id, "commit", [("commit", key_of(t, p), o) for (t, p), o in sorted(nxt.items())]
    )
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
        history.complete(op, "ok")
    except KafkaException as exc:
        history.complete(op, "fail", error=str(exc))


def start_queue(
    bootstrap: str,
    topic: str,
    history: History,
    stop: threading.Event,
    counts: Counts | None = None,
    config: dict[str, Any] | None = None,
    values: Values | None = None,
) -> list[threading.Thread]:
    """Idempotent acks=all producers to random partitions of `topic`; consumers in one group."""
    counts, config, values = counts or Counts(), config or {}, values or Values()
    threads = [
        start_thread(
            f"queue-producer-{i}",
            functools.partial(
                _queue_producer, i, bootstrap, topic, history, stop, counts, values, config
            ),
        )
        for i in range(counts.producers)
    ]
    threads += [
        start_thread(
            f"queue-consumer-{i}",
            functools.partial(
                _queue_consumer, 100 + i, bootstrap, topic, history, stop, counts, config
            ),
        )
        for i in range(counts.consumers)
    ]
    return threads


# -- final read -----------------------------------------------------------------------------------------


def final_read(
    bootstrap: str,
    topics: list[str],
    history: History,
    isolation: str = "read_committed",
    timeout: float = 60.0,
    config: dict[str, Any] | None = None,
) -> bool:
    """Read every partition of `topics` from the start to its end as it is now; recorded as one poll op
    with extra final=True: ok when every end was reached, else info (it then proves nothing).
    read_committed waits first (within `timeout`) until no transaction is open (last stable offset =
    high watermark), so a committed record is not missed behind a hanging one."""
    base = {
        "bootstrap.servers": bootstrap,
        "enable.auto.commit": False,
        **QUIET,
        **(config or {}),
    }
    consumer = Consumer(
        {**base, "group.id": f"jepsen-final-{isolation}", "isolation.level": isolation}
    )
    op = history.invoke(f"final-{isolation}", "poll", [], isolation=isolation, final=True)
    deadline = time.monotonic() + timeout
    try:
        md = consumer.list_topics(timeout=timeout)
        parts = [
            TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in md.topics[t].partitions
        ]
        ends = _ends_now(consumer, parts, deadline)
        if isolation == "read_committed":
            ends = _stable(base, parts, ends, consumer, deadline)
        consumer.assign(parts)
        msgs: list[Message] = []
        position = dict.fromkeys(ends, 0)
        while any(position[k] < ends[k] for k in ends) and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    msgs.append(m)
                    position[(str(m.topic()), int(m.partition() or 0))] = int(m.offset() or 0) + 1
            for tp in consumer.position([TopicPartition(t, p) for t, p in ends]):
                k = (str(tp.topic), int(tp.partition))
                position[k] = max(position[k], int(tp.offset))
        mops, _ = poll_mops(msgs)
        seen = {m[1] for m in mops}  # a final read covers a partition even if it holds nothing
        mops += [("poll", key_of(t, p), []) for t, p in sorted(ends) if key_of(t, p) not in seen]
        complete = all(position[k] >= ends[k] for k in ends)
        history.complete(op, "ok" if complete else "info", mops, ends=_ends_by_key(ends))
        return complete
    except KafkaException as exc:
        history.complete(op, "info", [], error=str(exc))
        return False
    finally:
        consumer.close()


def _ends_by_key(ends: dict[tuple[str, int], int]) -> dict[str, int]:
    return {key_of(t, p): e for (t, p), e in ends.items()}


def _ends_now(
    consumer: Consumer, parts: list[TopicPartition], deadline: float
) -> dict[tuple[str, int], int]:
    """Each partition's end from its leader (LSO for read_committed), retried while leaders move."""
    ends: dict[tuple[str, int], int] = {}
    for tp in parts:
        while True:
            try:
                ends[(tp.topic, tp.partition)] = int(
                    consumer.get_watermark_offsets(tp, timeout=10)[1]
                )
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    return ends


def _stable(
    base: dict[str, Any],
    parts: list[TopicPartition],
    ends: dict[tuple[str, int], int],
    committed: Consumer,
    deadline: float,
) -> dict[tuple[str, int], int]:
    """Wait until every last stable offset reaches its high watermark; the LSOs then (or at the deadline)."""
    uncommitted = Consumer(
        {**base, "group.id": "jepsen-final-hw", "isolation.level": "read_uncommitted"}
    )
    try:
        while time.monotonic() < deadline:
            high = _ends_now(uncommitted, parts, deadline)
            if all(ends[k] >= high[k] for k in high):
                break
            time.sleep(0.5)
            ends = _ends_now(committed, parts, deadline)
        return ends
    finally:
        uncommitted.close()
