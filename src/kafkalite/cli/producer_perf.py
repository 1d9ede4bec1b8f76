"""`kafkalite perf produce`, in the manner of kafka-producer-perf-test: records of a size at a throughput,
sent through confluent-kafka or the kafkalite client, with per-window lines and a latency summary.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import sys
import time
from array import array
from typing import Any

from kafkalite.cli.client_options import (
    EXIT_INTERRUPTED,
    _flatten,
    _sigint_ignored,
    _sigint_raises,
    client_config,
)
from kafkalite.cli.perf_common import (
    JAVA_ONLY,
    MB,
    Progress,
    percentile,
    pick_client,
)
from kafkalite.cli.wire import EXIT_ERROR, CliError


class ProduceStats:
    """Acknowledged records' send->delivery latencies (ms) and failures; a reporting window is a slice."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.started = time.perf_counter()
        self.acked = 0
        self.failed = 0
        self.latencies = array("d")
        self.errors: list[str] = []
        self.w_start = self.started
        self.w_index = 0
        self.w_acked = 0

    def fail(self, n: int, exc: Any) -> None:
        self.failed += n
        if len(self.errors) < 5:
            self.errors.append(str(exc))

    def window_line(self) -> str:
        now = time.perf_counter()
        dt = max(now - self.w_start, 1e-9)
        lat = self.latencies[self.w_index :]
        n = self.acked - self.w_acked
        line = (
            f"{n} records sent, {n / dt:.1f} records/sec ({n * self.size / MB / dt:.2f} MB/sec), "
            f"{sum(lat) / len(lat) if lat else 0.0:.1f} ms avg latency, "
            f"{max(lat) if lat else 0.0:.1f} ms max latency."
        )
        self.w_start, self.w_index, self.w_acked = now, self.w_index + len(lat), self.acked
        return line

    def summary(self, elapsed: float, client: str, record_size: int) -> dict[str, Any]:
        lat = sorted(self.latencies)
        secs = max(elapsed, 1e-9)
        return {
            "client": client,
            "record_size": record_size,
            "records_sent": self.acked,
            "records_failed": self.failed,
            "elapsed_s": round(elapsed, 3),
            "records_per_sec": round(self.acked / secs, 1),
            "mb_per_sec": round(self.acked * self.size / MB / secs, 3),
            "latency_avg_ms": round(sum(lat) / len(lat), 3) if lat else 0.0,
            "latency_p50_ms": round(percentile(lat, 0.50), 3),
            "latency_p95_ms": round(percentile(lat, 0.95), 3),
            "latency_p99_ms": round(percentile(lat, 0.99), 3),
            "latency_p999_ms": round(percentile(lat, 0.999), 3),
            "latency_max_ms": round(lat[-1], 3) if lat else 0.0,
            "latency_samples": len(lat),
        }


class _Batch:
    """The send times of the records of one kafkalite producer batch (they are acknowledged together)."""

    __slots__ = ("times", "done_at", "error")

    def __init__(self) -> None:
        self.times: list[float] = []
        self.done_at = 0.0
        self.error: BaseException | None = None


class _KafkaliteSender:
    """Records through the kafkalite producer; latencies by batch outcome (one callback per batch)."""

    def __init__(self, cfg: dict[str, Any], topic: str, stats: ProduceStats, size: int) -> None:
        from kafkalite.client import KafkaProducer

        cfg.setdefault("buffer.memory", 256 * MB)
        self.producer = KafkaProducer(cfg)
        self.producer.partitions_for(topic)
        self.topic = topic
        self.stats = stats
        self.size = size
        self.done: collections.deque[_Batch] = collections.deque()
        self.current: Any = None
        self.batch = _Batch()
        self._send = self.producer.send

    def send_many(self, value: bytes, n: int) -> None:
        """`n` records; a record's send time joins the list of its batch (a new batch: a new list)."""
        send, topic, clock, cur, b = (
            self._send,
            self.topic,
            time.perf_counter,
            self.current,
            self.batch,
        )
        times = b.times
        for _ in range(n):
            t = clock()
            o = send(topic, value)._r[
                0
            ]  # the batch's shared outcome (FutureRecordMetadata's state)
            if o is not cur:
                cur = o
                b = _Batch()
                times = b.times
                o.on_done(functools.partial(self._batch_done, o, b))
            times.append(t)
        self.current, self.batch = cur, b

    def _batch_done(self, outcome: Any, b: _Batch) -> None:  # the I/O thread
        b.done_at = time.perf_counter()
        b.error = outcome.error
        self.done.append(b)

    def drain(self) -> None:  # the main thread: every append to a finished batch happened already
        done, stats = self.done, self.stats
        while done:
            b = done.popleft()
            if b.error is not None:
                stats.fail(len(b.times), b.error)
            else:
                end = b.done_at
                stats.acked += len(b.times)
                stats.latencies.extend([(end - t) * 1000.0 for t in b.times])

    def flush(self, timeout: float | None) -> None:
        try:
            self.producer.flush(timeout)
        finally:
            self.drain()

    def close(self) -> None:
        self.producer.close(0)


class _ConfluentSender:
    """Records through confluent-kafka. A delivery report (a Python call per record) would cost librdkafka
    a third of its rate, so every `sample`-th record carries one: its latency (librdkafka's produce() ->
    acknowledgement time) and its failure stand for the `sample` records around it."""

    def __init__(self, cfg: dict[str, Any], topic: str, stats: ProduceStats, sample: int) -> None:
        from confluent_kafka import Producer

        conf = {k: v for k, v in cfg.items() if k not in JAVA_ONLY}
        conf.setdefault("queue.buffering.max.messages", 1_000_000)
        conf.setdefault("queue.buffering.max.kbytes", 1_048_576)
        conf.setdefault("error_cb", self._error)
        self.producer = Producer(conf)
        self.producer.list_topics(topic, timeout=10)
        self.topic = topic
        self.stats = stats
        self.sample = max(1, sample)
        self.n = 0
        self.failed_samples = 0

    def _error(self, err: Any) -> None:
        self.stats.fail(0, err)

    def _report(self, err: Any, msg: Any) -> None:
        if err is None:
            lat = msg.latency()
            self.stats.latencies.append(0.0 if lat is None else lat * 1000.0)
        else:
            self.failed_samples += 1
            self.stats.fail(0, err)

    def send_many(self, value: bytes, n: int) -> None:
        produce, topic, poll, report = (
            self.producer.produce,
            self.topic,
            self.producer.poll,
            self._report,
        )
        k, i = self.sample, self.n
        for _ in range(n):
            cb = report if i % k == 0 else None
            i += 1
            while True:
                try:
                    produce(topic, value, on_delivery=cb)
                    break
                except BufferError:  # the local queue is full: serve delivery reports, then retry
                    poll(0.01)
        self.n = i
        poll(0)

    def drain(self) -> None:
        self.producer.poll(0)
        self._count()

    def _count(self) -> None:
        st = self.stats
        st.failed = min(self.n, self.failed_samples * self.sample)
        st.acked = max(0, self.n - len(self.producer) - st.failed)

    def flush(self, timeout: float | None) -> None:
        left = self.producer.flush(-1 if timeout is None else timeout)
        self._count()
        if left:
            self.stats.failed += left
            self.stats.fail(0, f"{left} records not delivered within {timeout} s")

    def close(self) -> None:
        pass


def _producer_settings(a: argparse.Namespace) -> dict[str, Any]:
    cfg = client_config(
        a.bootstrap_server, a.producer_config, _flatten(a.producer_props), "--producer-props"
    )
    cfg.setdefault("client.id", "perf-producer")
    for key, val in (
        ("acks", a.acks),
        ("compression.type", a.compression),
        ("batch.size", a.batch_size),
        ("linger.ms", a.linger_ms),
    ):
        if val is not None:
            cfg[key] = str(val)
    if str(cfg.get("acks", "")).strip() == "-1":
        cfg["acks"] = "all"
    return cfg


def run(a: argparse.Namespace) -> int:
    if (a.num_records is None) == (a.duration is None):
        raise CliError("give --num-records or --duration")
    if a.record_size <= 0:
        raise CliError("--record-size must be > 0")
    client = pick_client(a.client)
    cfg = _producer_settings(a)
    payload = os.urandom(a.record_size // 2 + 1).hex()[: a.record_size].encode()
    stats = ProduceStats(a.record_size)
    text = a.output == "text"
    sender: Any = None
    interrupted = False
    progress: Progress | None = None
    _sigint_raises()
    try:
        try:
            if client == "confluent":
                sender = _ConfluentSender(cfg, a.topic, stats, a.latency_sample)
            else:
                sender = _KafkaliteSender(cfg, a.topic, stats, a.record_size)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            raise CliError(f"cannot start the {client} producer: {exc}") from None
        total = a.num_records if a.num_records is not None else a.duration
        progress = Progress(float(total), "producing", text and sys.stdout.isatty())
        send_many = sender.send_many
        target = a.throughput if a.throughput and a.throughput > 0 else 0
        interval = a.reporting_interval / 1000
        start = time.perf_counter()
        stats.started = stats.w_start = start
        next_report = start + interval
        next_tick = start
        end_at = None if a.duration is None else start + a.duration
        n = 0
        limit = a.num_records if a.num_records is not None else 1 << 62
        step = 1000 if not target else max(1, min(1000, int(target // 100)))
        while n < limit:
            chunk = min(step, limit - n)
            send_many(payload, chunk)
            n += chunk
            now = time.perf_counter()
            if target:
                ahead = start + n / target - now
                if ahead > 0:
                    time.sleep(ahead)
                    now = time.perf_counter()
            if now >= next_tick:
                sender.drain()
                next_tick = now + 0.2
                done = n if end_at is None else min(now - start, float(a.duration))
                progress.update(done, f"{n / max(now - start, 1e-9):,.0f} rec/s")
                if now >= next_report:
                    next_report = now + interval
                    if text:
                        progress.line(stats.window_line())
            if end_at is not None and now >= end_at:
                break
        sender.flush(None)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _sigint_ignored()
        if progress is not None:
            progress.stop()
        if sender is not None:
            if interrupted:
                try:
                    sender.flush(5.0)
                except Exception:
                    pass
            try:
                sender.close()
            except Exception:
                pass
    if sender is None:
        return EXIT_INTERRUPTED if interrupted else EXIT_ERROR
    summary = stats.summary(time.perf_counter() - stats.started, client, a.record_size)
    for err in stats.errors:
        print(f"error: {err}", file=sys.stderr)
    if text:
        s = summary
        print(
            f"{s['records_sent']} records sent, {s['records_per_sec']:.1f} records/sec "
            f"({s['mb_per_sec']:.2f} MB/sec), {s['latency_avg_ms']:.2f} ms avg latency, "
            f"{s['latency_max_ms']:.2f} ms max latency, {s['latency_p50_ms']:.2f} ms 50th, "
            f"{s['latency_p95_ms']:.2f} ms 95th, {s['latency_p99_ms']:.2f} ms 99th, "
            f"{s['latency_p999_ms']:.2f} ms 99.9th."
            + (f" {s['records_failed']} failed." if s["records_failed"] else "")
            + f" (client: {client})",
            flush=True,
        )
    else:
        print(json.dumps(summary), flush=True)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_ERROR if stats.failed else 0
