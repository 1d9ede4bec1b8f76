"""Tiered storage (KIP-405) bench: consume throughput from the remote tier against the local tier of the same
broker in the same run, and the broker's CPU per GB archived beside the kernel's cost of writing a GB.

A `kafkalite serve` subprocess with the directory remote store; two topics of the same records, one archived
(local.retention.bytes of one segment) and one local only. Archiving is measured alone: the records are
produced with remote.log.copy.disable=true, then copying is switched on and timed until the archive has them.

    PYTHONPATH=src python bench/bench_tiered.py [--mb 256] [--size 1024]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from bench_broker import LAST_CPU, consume_throughput, produce_throughput
from peers import BROKER_PIDS, kafkalite_broker, page_cache_write_seconds, process_cpu_seconds

SEGMENT = 16 * 1024 * 1024
CONSUMER = {"fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608}


def remote_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*/*/segment.log"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=256, help="MiB produced to each topic")
    ap.add_argument("--size", type=int, default=1024, help="record value size in bytes")
    args = ap.parse_args()
    count = args.mb * 1024 * 1024 // args.size
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as remote:
        root = Path(remote)
        overrides = [
            "remote.log.storage.system.enable=true",
            "remote.log.storage.manager.class.name="
            "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
            f"rsm.config.dir={root}",
            "rlmm.config.remote.log.metadata.topic.num.partitions=1",
            "remote.log.manager.task.interval.ms=200",
            "log.retention.check.interval.ms=200",
        ]
        with kafkalite_broker(overrides) as bs:
            pid = BROKER_PIDS[bs]
            admin = AdminClient({"bootstrap.servers": bs})
            base = {"segment.bytes": str(SEGMENT)}
            tiered = {
                **base,
                "remote.storage.enable": "true",
                "local.retention.bytes": str(SEGMENT),
                "remote.log.copy.disable": "true",
            }
            futs = admin.create_topics(
                [NewTopic("tiered", 1, 1, config=tiered), NewTopic("local", 1, 1, config=base)]
            )
            for f in futs.values():
                f.result(30)
            for topic in ("tiered", "local"):
                rate = produce_throughput(bs, topic, count, args.size, {"linger.ms": 50})
                print(f"produced {count:,} x {args.size} B to {topic}: {rate:,.0f} msg/s")

            # archiving alone: switch copying on and wait until the archive holds the rolled segments
            res = ConfigResource(ConfigResource.Type.TOPIC, "tiered")
            res.add_incremental_config(
                ConfigEntry(
                    "remote.log.copy.disable", "false", incremental_operation=AlterConfigOpType.SET
                )
            )
            cpu0, t0 = process_cpu_seconds(pid), time.perf_counter()
            admin.incremental_alter_configs([res])[res].result(30)
            target = args.mb * 1024 * 1024 - 2 * SEGMENT
            last, still = -1, 0
            while True:
                n = remote_bytes(root)
                still = still + 1 if n == last and n >= target else 0
                if still >= 5:
                    break
                last = n
                time.sleep(0.2)
            cpu, wall = process_cpu_seconds(pid) - cpu0, time.perf_counter() - t0
            gb = n / 1e9
            kernel = page_cache_write_seconds(1 << 30, remote)
            print(
                f"archived {n / 2**20:,.0f} MiB in {wall:.1f} s ({n / 2**20 / wall:,.0f} MiB/s): "
                f"broker CPU {cpu / gb:.2f} s/GB; the kernel's cost of writing a GB here "
                f"{kernel:.2f} s (ratio {cpu / gb / max(kernel, 1e-9):.1f}x)"
            )
            # the local part shrinks to local.retention.bytes once archived
            time.sleep(1)

            results = {}
            for topic in ("local", "tiered"):
                rate = consume_throughput(bs, topic, count, CONSUMER)
                results[topic] = (rate, LAST_CPU["broker"])
                print(
                    f"consume {topic:<7} {rate:>12,.0f} msg/s  {rate * args.size / 2**20:8,.0f} MiB/s"
                    f"   broker cpu {LAST_CPU['broker']:.2f} cores"
                )
            (rl, cl), (rr, cr) = results["local"], results["tiered"]
            per_gb_local = cl / (rl * args.size / 1e9) if rl else float("nan")
            per_gb_remote = cr / (rr * args.size / 1e9) if rr else float("nan")
            print(
                f"remote/local consume throughput ratio {rr / rl:.2f}; broker CPU per GB served: "
                f"local {per_gb_local:.2f} s, remote {per_gb_remote:.2f} s; load {load:.1f} at start"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
