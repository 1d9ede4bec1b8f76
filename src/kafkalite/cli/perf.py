"""`kafkalite perf produce|consume`: load tests in the manner of kafka-producer-perf-test / kafka-consumer-perf-test.

confluent-kafka (librdkafka) drives them when importable, else the kafkalite client; `--client` picks one.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import os
import sys
import time
import uuid
from array import array
from collections.abc import Callable
from typing import Any

from kafkalite.cli.client_options import (
    EXIT_INTERRUPTED,
    _flatten,
    _sigint_ignored,
    _sigint_raises,
    client_config,
)
from kafkalite.cli.wire import CliError

MB = 1024 * 1024
# Kafka's Java names librdkafka does not take (the kafkalite client does): dropped for confluent-kafka
_JAVA_ONLY = {
    "buffer.memory",
    "max.block.ms",
    "delivery.timeout.ms",
    "retries",
    "key.serializer",
    "value.serializer",
}


def _have_confluent() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def _pick_client(choice: str) -> str:
    if choice == "auto":
        return "confluent" if _have_confluent() else "kafkalite"
    if choice == "confluent" and not _have_confluent():
        raise CliError("confluent-kafka is not installed (pip install confluent-kafka)")
    return choice


def percentile(sorted_ms: Any, q: float) -> float:
    """The q-quantile (0..1) of sorted values, nearest rank."""
    n = len(sorted_ms)
    if n == 0:
        return 0.0
    return float(sorted_ms[min(n - 1, max(0, math.ceil(q * n) - 1))])


class _Progress:
    """A rich progress bar on a terminal (stdout a tty, text output); plain prints otherwise."""

    def __init__(self, total: float, what: str, enabled: bool) -> None:
        self.bar: Any = None
        self.task: Any = None
        if not enabled:
            return
        try:
            from rich.progress import (
                BarColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
        except ImportError:
            return
        self.bar = Progress(
            TextColumn(f"[bold]{what}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            transient=True,
        )
        self.task = self.bar.add_task(what, total=total, rate="")
        self.bar.start()

    def update(self, completed: float, rate: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=completed, rate=rate)

    def line(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text, highlight=False, markup=False)
        else:
            print(text, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


# -- producer
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

        conf = {k: v for k, v in cfg.items() if k not in _JAVA_ONLY}
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


def _perf_produce(a: argparse.Namespace) -> int:
    if (a.num_records is None) == (a.duration is None):
        raise CliError("give --num-records or --duration")
    if a.record_size <= 0:
        raise CliError("--record-size must be > 0")
    client = _pick_client(a.client)
    cfg = _producer_settings(a)
    payload = os.urandom(a.record_size // 2 + 1).hex()[: a.record_size].encode()
    stats = ProduceStats(a.record_size)
    text = a.output == "text"
    sender: Any = None
    interrupted = False
    progress: _Progress | None = None
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
        progress = _Progress(float(total), "producing", text and sys.stdout.isatty())
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
        return EXIT_INTERRUPTED if interrupted else 1
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
    return 1 if stats.failed else 0


# -- consumer
class _ConsumeRun:
    """What kafka-consumer-perf-test reports: bytes and records, the rebalance (join) time and the rest."""

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.started = time.perf_counter()
        self.assigned_at: float | None = None
        self.last_record_at = self.started
        self.w_start = self.started
        self.w_records = 0
        self.w_bytes = 0

    def add(self, n: int, size: int) -> None:
        self.records += n
        self.bytes += size
        self.w_records += n
        self.w_bytes += size
        self.last_record_at = time.perf_counter()

    def on_assign(self) -> None:
        if self.assigned_at is None:
            self.assigned_at = time.perf_counter()

    def window_line(self) -> str:
        now = time.perf_counter()
        dt = max(now - self.w_start, 1e-9)
        line = (
            f"{self.w_records} records consumed, {self.w_records / dt:.1f} records/sec "
            f"({self.w_bytes / MB / dt:.2f} MB/sec), {self.records} in all"
        )
        self.w_start, self.w_records, self.w_bytes = now, 0, 0
        return line

    def summary(self, client: str) -> dict[str, Any]:
        end = self.last_record_at if self.records else time.perf_counter()
        elapsed = max(end - self.started, 1e-9)
        rebalance = (self.assigned_at - self.started) if self.assigned_at is not None else 0.0
        fetch = max(elapsed - rebalance, 1e-9)
        mb = self.bytes / MB
        return {
            "client": client,
            "start_time": time.strftime(
                "%Y-%m-%d %H:%M:%S",
                time.localtime(time.time() - (time.perf_counter() - self.started)),
            ),
            "end_time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()),
            "data_consumed_mb": round(mb, 4),
            "mb_per_sec": round(mb / elapsed, 4),
            "records_consumed": self.records,
            "records_per_sec": round(self.records / elapsed, 1),
            "rebalance_time_ms": round(rebalance * 1000, 1),
            "fetch_time_ms": round(fetch * 1000, 1),
            "fetch_mb_per_sec": round(mb / fetch, 4),
            "fetch_records_per_sec": round(self.records / fetch, 1),
        }


def _consumer_settings(a: argparse.Namespace) -> dict[str, Any]:
    cfg = client_config(
        a.bootstrap_server, a.consumer_config, _flatten(a.consumer_props), "--consumer-props"
    )
    cfg.setdefault("client.id", "perf-consumer")
    cfg["group.id"] = a.group or cfg.get("group.id") or f"perf-consumer-{uuid.uuid4().hex[:8]}"
    cfg.setdefault("auto.offset.reset", "latest" if a.from_latest else "earliest")
    cfg.setdefault("enable.auto.commit", "true")
    if a.fetch_size is not None:
        cfg["max.partition.fetch.bytes"] = str(a.fetch_size)
    return cfg


def _poll_kafkalite(
    cfg: dict[str, Any], topic: str, run: _ConsumeRun
) -> tuple[Any, Callable[[int], int]]:
    from kafkalite.client import ConsumerRebalanceListener, KafkaConsumer

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned: list[Any]) -> None:
            run.on_assign()

    cfg.setdefault("max.poll.records", 2000)
    consumer = KafkaConsumer(config=cfg)
    consumer.subscribe([topic], listener=Listener())

    def poll(limit: int) -> int:
        got = 0
        size = 0
        for recs in consumer.poll(100, max_records=limit).values():
            got += len(recs)
            for r in recs:
                size += (len(r.value) if r.value else 0) + (len(r.key) if r.key else 0)
        if got:
            run.add(got, size)
        return got

    return consumer, poll


def _poll_confluent(
    cfg: dict[str, Any], topic: str, run: _ConsumeRun
) -> tuple[Any, Callable[[int], int]]:
    from confluent_kafka import Consumer

    conf = {k: v for k, v in cfg.items() if k not in _JAVA_ONLY and k != "max.poll.records"}
    if "max.partition.fetch.bytes" in conf:
        conf["max.partition.fetch.bytes"] = int(conf["max.partition.fetch.bytes"])
    consumer = Consumer(conf)
    consumer.subscribe([topic], on_assign=lambda _c, _p: run.on_assign())

    def poll(limit: int) -> int:
        got = 0
        size = 0
        for m in consumer.consume(min(limit, 10000), 0.1):
            if m.error() is not None:
                continue
            got += 1
            v, k = m.value(), m.key()
            size += (len(v) if v else 0) + (len(k) if k else 0)
        if got:
            run.add(got, size)
        return got

    return consumer, poll


def _perf_consume(a: argparse.Namespace) -> int:
    client = _pick_client(a.client)
    cfg = _consumer_settings(a)
    text = a.output == "text"
    run = _ConsumeRun()
    consumer: Any = None
    interrupted = False
    timed_out = False
    progress: _Progress | None = None
    _sigint_raises()
    try:
        try:
            opener = _poll_confluent if client == "confluent" else _poll_kafkalite
            consumer, poll = opener(cfg, a.topic, run)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            raise CliError(f"cannot start the {client} consumer: {exc}") from None
        progress = _Progress(float(a.messages), "consuming", text and sys.stdout.isatty())
        interval = a.reporting_interval / 1000
        run.started = run.w_start = run.last_record_at = time.perf_counter()
        next_report = run.started + interval
        while run.records < a.messages:
            poll(a.messages - run.records)
            now = time.perf_counter()
            progress.update(run.records, f"{run.records / max(now - run.started, 1e-9):,.0f} rec/s")
            if now - run.last_record_at > a.timeout / 1000:
                timed_out = True
                break
            if now >= next_report:
                next_report = now + interval
                if text and a.show_detailed_stats:
                    progress.line(run.window_line())
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _sigint_ignored()
        if progress is not None:
            progress.stop()
        if consumer is not None:
            try:
                consumer.close()
            except Exception:
                pass
    if consumer is None:
        return EXIT_INTERRUPTED if interrupted else 1
    if timed_out:
        print(
            f"error: no record for {a.timeout} ms: stopped after {run.records} of {a.messages} records",
            file=sys.stderr,
        )
    s = run.summary(client)
    if text:
        print(
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
            "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        )
        print(
            f"{s['start_time']}, {s['end_time']}, {s['data_consumed_mb']:.4f}, {s['mb_per_sec']:.4f}, "
            f"{s['records_consumed']}, {s['records_per_sec']:.4f}, {s['rebalance_time_ms']:.0f}, "
            f"{s['fetch_time_ms']:.0f}, {s['fetch_mb_per_sec']:.4f}, {s['fetch_records_per_sec']:.4f}",
            flush=True,
        )
    else:
        print(json.dumps(s), flush=True)
    if interrupted:
        return EXIT_INTERRUPTED
    return 1 if timed_out else 0


def add_parser(sub: Any) -> None:
    perf = sub.add_parser("perf", help="load tests: perf produce / perf consume")
    which = perf.add_subparsers(dest="perf_command", required=True)

    p = which.add_parser(
        "produce",
        help="producer throughput and latency (as kafka-producer-perf-test)",
        description="Sends --num-records records (or for --duration seconds) of --record-size bytes; "
        "prints a line per reporting interval and a summary: records/s, MB/s, latency avg / p50 / "
        "p95 / p99 / p99.9 / max (send to delivery report).",
    )
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    p.add_argument("--topic", required=True)
    n = p.add_mutually_exclusive_group()
    n.add_argument("--num-records", type=int, help="how many records to send")
    n.add_argument("--duration", type=float, metavar="SECONDS", help="send for this long instead")
    p.add_argument("--record-size", type=int, default=100, help="bytes per record (default 100)")
    p.add_argument(
        "--throughput", type=float, default=-1, help="records/s to aim at (-1: as fast as possible)"
    )
    p.add_argument(
        "--producer-props",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        help="producer configuration (Kafka's names)",
    )
    p.add_argument(
        "--producer.config", dest="producer_config", metavar="FILE", help="producer properties file"
    )
    p.add_argument("--acks", help="shorthand for --producer-props acks=...")
    p.add_argument("--compression", help="shorthand for --producer-props compression.type=...")
    p.add_argument("--batch-size", type=int, help="shorthand for --producer-props batch.size=...")
    p.add_argument("--linger-ms", type=int, help="shorthand for --producer-props linger.ms=...")
    p.add_argument(
        "--client",
        choices=["auto", "confluent", "kafkalite"],
        default="auto",
        help="auto: confluent-kafka when installed",
    )
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    p.add_argument(
        "--latency-sample",
        type=int,
        default=16,
        metavar="N",
        help="confluent-kafka: a delivery report (latency, failure) on every Nth record (default 16; "
        "1: all, at about a third less rate); the kafkalite client times every record",
    )
    p.add_argument(
        "--output", choices=["text", "json"], default="text", help="json: the summary as one object"
    )
    p.set_defaults(func=_perf_produce)

    c = which.add_parser(
        "consume",
        help="consumer throughput (as kafka-consumer-perf-test)",
        description="Consumes --messages records in a consumer group; prints MB and records consumed, "
        "MB/s, records/s, the rebalance time and the fetch time.",
    )
    c.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    c.add_argument("--topic", required=True)
    c.add_argument("--messages", type=int, required=True, help="how many records to consume")
    c.add_argument("--group", help="consumer group (default perf-consumer-<random>)")
    c.add_argument(
        "--timeout",
        type=int,
        default=10000,
        metavar="MS",
        help="give up when no record came for this long",
    )
    c.add_argument("--fetch-size", type=int, metavar="BYTES", help="max.partition.fetch.bytes")
    c.add_argument(
        "--from-latest", action="store_true", help="start at the end when the group has no offsets"
    )
    c.add_argument(
        "--consumer-props",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        help="consumer configuration",
    )
    c.add_argument(
        "--consumer.config", dest="consumer_config", metavar="FILE", help="consumer properties file"
    )
    c.add_argument("--client", choices=["auto", "confluent", "kafkalite"], default="auto")
    c.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    c.add_argument(
        "--show-detailed-stats", action="store_true", help="a line per reporting interval"
    )
    c.add_argument("--output", choices=["text", "json"], default="text")
    c.set_defaults(func=_perf_consume)
