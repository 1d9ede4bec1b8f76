"""`kafkalite perf consume`, in the manner of kafka-consumer-perf-test: a number of records consumed in a
group, through confluent-kafka or the kafkalite client, with the rebalance and fetch times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
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
    pick_client,
)
from kafkalite.cli.wire import EXIT_ERROR, CliError


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

    conf = {k: v for k, v in cfg.items() if k not in JAVA_ONLY and k != "max.poll.records"}
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


def run(a: argparse.Namespace) -> int:
    client = pick_client(a.client)
    cfg = _consumer_settings(a)
    text = a.output == "text"
    run = _ConsumeRun()
    consumer: Any = None
    interrupted = False
    timed_out = False
    progress: Progress | None = None
    _sigint_raises()
    try:
        try:
            opener = _poll_confluent if client == "confluent" else _poll_kafkalite
            consumer, poll = opener(cfg, a.topic, run)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            raise CliError(f"cannot start the {client} consumer: {exc}") from None
        progress = Progress(float(a.messages), "consuming", text and sys.stdout.isatty())
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
        return EXIT_INTERRUPTED if interrupted else EXIT_ERROR
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
    return EXIT_ERROR if timed_out else 0
