"""TLS and SASL benchmark: produce and consume throughput and broker CPU per GB over SSL and SASL_SSL
listeners against the PLAINTEXT listener of the same kafkalite broker, in the same run (confluent-kafka).

One `kafkalite serve` process listens three times: PLAINTEXT, SSL (PEM certificates made for the run,
ECDSA P-256, ssl.client.auth=required unless --client-auth says otherwise, so the client presents a
certificate) and SASL_SSL (SCRAM-SHA-512, a user created through the PLAINTEXT listener with
AlterUserScramCredentials). Each repeat measures every listener, rotating which goes first:
- produce: --messages records of --size bytes, one partition, acks=1, librdkafka's default batching;
  MB/s from the first produce() until flush() has every delivery report. Fresh topic per run.
- consume: a fresh consumer reads that topic from offset 0 (max.partition.fetch.bytes=4 MiB,
  fetch.max.bytes=64 MiB, counted in C by consume() batches); MB/s from the first record to the last.
  PLAINTEXT fetches leave through os.sendfile; SSL ones through 1 MiB preads encrypted in the broker.
- cpu: CPU seconds the broker process used (utime + stime from /proc) per GB moved, same span.
Medians over --repeats, with each secured listener's ratio to PLAINTEXT.

Usage: python bench/bench_tls.py [--messages N] [--size BYTES] [--repeats R] [--client-auth required|none]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from peers import free_port, process_cpu_seconds, stop, wait_port

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kafkalite.testing_tls import CertificateAuthority  # noqa: E402

NAMES = ["PLAINTEXT", "SSL", "SASL_SSL"]


@contextlib.contextmanager
def tls_broker(certs: Path, client_auth: str) -> Iterator[tuple[int, dict[str, dict[str, object]]]]:
    """`kafkalite serve` with PLAINTEXT, SSL and SASL_SSL listeners; yields (pid, client config per
    listener)."""
    ca = CertificateAuthority(certs)
    server = ca.issue("broker", server=True)
    client = ca.issue("bench-client")
    plain, secure, sasl = free_port(), free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as d:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        args = [sys.executable, "-m", "kafkalite.cli.main", "serve", "--data-dir", d]
        args += ["--log-level", "warning"]
        for prop in (
            f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure},"
            f"SASL_SSL://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            f"ssl.keystore.location={server.bundle}",
            f"ssl.truststore.location={ca.cert}",
            f"ssl.client.auth={client_auth}",
            "message.max.bytes=10485760",
        ):
            args += ["--override", prop]
        log = open(os.environ.get("BENCH_BROKER_LOG", os.devnull), "w")  # noqa: SIM115
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=log)
        try:
            wait_port(plain, proc)
            wait_port(secure, proc)
            wait_port(sasl, proc)
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
            info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
            upsert = UserScramCredentialUpsertion("bench", info, b"bench-secret")
            for f in admin.alter_user_scram_credentials([upsert]).values():
                f.result(30)
            confs: dict[str, dict[str, object]] = {
                "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain}"},
                "SSL": {
                    "bootstrap.servers": f"127.0.0.1:{secure}",
                    "security.protocol": "SSL",
                    "ssl.ca.location": str(ca.cert),
                    "ssl.certificate.location": str(client.cert),
                    "ssl.key.location": str(client.key),
                },
                "SASL_SSL": {
                    "bootstrap.servers": f"127.0.0.1:{sasl}",
                    "security.protocol": "SASL_SSL",
                    "ssl.ca.location": str(ca.cert),
                    "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": "bench",
                    "sasl.password": "bench-secret",
                },
            }
            yield proc.pid, confs
        finally:
            stop(proc)


def produce(
    pid: int, conf: dict[str, object], topic: str, count: int, size: int
) -> tuple[float, float]:
    """(MB/s, broker CPU s/GB) of producing `count` records of `size` bytes to partition 0."""
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({**conf, "acks": 1})
    p.list_topics(topic, timeout=10)
    payload = b"x" * size
    cpu0, t0 = process_cpu_seconds(pid), time.perf_counter()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=0)
                break
            except BufferError:
                p.poll(0.001)
    if p.flush(300):
        raise RuntimeError("produce: undelivered records")
    elapsed, cpu = time.perf_counter() - t0, process_cpu_seconds(pid) - cpu0
    gb = count * size / 1e9
    return gb * 1000 / elapsed, cpu / gb


def consume(
    pid: int, conf: dict[str, object], topic: str, count: int, size: int
) -> tuple[float, float]:
    """(MB/s, broker CPU s/GB) of reading the topic from offset 0 with a fresh consumer."""
    c = Consumer(
        {
            **conf,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 4 << 20,
            "fetch.max.bytes": 64 << 20,
            "queued.min.messages": 1_000_000,
            "queued.max.messages.kbytes": 1 << 20,
            "fetch.queue.backoff.ms": 1,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got, t0, cpu0 = 0, 0.0, 0.0
    deadline = time.monotonic() + 600
    try:
        while got < count and time.monotonic() < deadline:
            msgs = c.consume(10000, 0.5)
            if not msgs:
                continue
            if msgs[-1].error() is not None:
                raise RuntimeError(f"consume: {msgs[-1].error()}")
            if got == 0:
                t0, cpu0 = time.perf_counter(), process_cpu_seconds(pid)
            got += len(msgs)
        elapsed, cpu = time.perf_counter() - t0, process_cpu_seconds(pid) - cpu0
    finally:
        c.close()
    if got < count:
        raise RuntimeError(f"consume: {got} of {count} records")
    gb = count * size / 1e9
    return gb * 1000 / elapsed, cpu / gb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--client-auth", default="required", choices=["required", "requested", "none"])
    args = ap.parse_args()
    results: dict[str, dict[str, list[float]]] = {
        name: {"produce": [], "produce_cpu": [], "consume": [], "consume_cpu": []} for name in NAMES
    }
    with contextlib.ExitStack() as stack:
        certs = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tls-certs-"))
        pid, confs = stack.enter_context(tls_broker(Path(certs), args.client_auth))
        for r in range(args.repeats):
            order = NAMES[r % 3 :] + NAMES[: r % 3]
            for name in order:
                topic = f"bench-{name.lower()}-{r}"
                mbs, cpu = produce(pid, confs[name], topic, args.messages, args.size)
                results[name]["produce"].append(mbs)
                results[name]["produce_cpu"].append(cpu)
                mbs, cpu = consume(pid, confs[name], topic, args.messages, args.size)
                results[name]["consume"].append(mbs)
                results[name]["consume_cpu"].append(cpu)
                print(
                    f"repeat {r + 1} {name:9s} produce {results[name]['produce'][-1]:7.1f} MB/s "
                    f"consume {results[name]['consume'][-1]:7.1f} MB/s",
                    flush=True,
                )
    med = {n: {k: statistics.median(v) for k, v in m.items()} for n, m in results.items()}
    print(
        f"\n{args.messages} records of {args.size} B, ssl.client.auth={args.client_auth}, "
        f"medians of {args.repeats} (one broker, every listener)"
    )
    print(
        f"{'':24s}{'PLAINTEXT':>12s}{'SSL':>12s}{'SASL_SSL':>12s}{'SSL/PLAIN':>11s}"
        f"{'SASL_SSL/PLAIN':>16s}"
    )
    rows = [
        ("produce MB/s", "produce"),
        ("produce broker CPU s/GB", "produce_cpu"),
        ("consume MB/s", "consume"),
        ("consume broker CPU s/GB", "consume_cpu"),
    ]
    for label, key in rows:
        a, b, c = (med[n][key] for n in NAMES)
        print(f"{label:24s}{a:12.2f}{b:12.2f}{c:12.2f}{b / a:10.2f}x{c / a:15.2f}x")


if __name__ == "__main__":
    main()
