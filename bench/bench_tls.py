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
- cpu: CPU seconds the broker process used (utime + stime from /proc) per GB moved, same span; and
  the client's (this process: the Python loop and librdkafka's threads), which shares the two cores.
Medians over --repeats (at least 3), records/s beside MB/s, each secured listener's ratio to PLAINTEXT
and the machine's load average before and after.

The floor: what TLS record protection itself costs one core here, measured in this process through the
same memory-BIO path the broker's event loop uses (ssl.SSLObject): a consume pays a pread, the encryption
and the BIO copies on top of what a PLAINTEXT sendfile costs; a produce pays the BIO copy and the
decryption. Added to the PLAINTEXT figures they give the lowest SSL/PLAINTEXT CPU ratio Python's ssl
module allows (without kernel TLS, which this kernel lacks: no CONFIG_TLS, no `tls` TCP ULP).

Usage: python bench/bench_tls.py [--messages N] [--size BYTES] [--repeats R] [--client-auth required|none]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import ssl
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

from peers import free_port, own_cpu_seconds, process_cpu_seconds, stop, wait_port

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
) -> tuple[float, float, float]:
    """(MB/s, broker CPU s/GB, client CPU s/GB) of producing `count` records of `size` bytes to
    partition 0."""
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({**conf, "acks": 1})
    p.list_topics(topic, timeout=10)
    payload = b"x" * size
    cpu0, own0, t0 = process_cpu_seconds(pid), own_cpu_seconds(), time.perf_counter()
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
    own = own_cpu_seconds() - own0
    gb = count * size / 1e9
    return gb * 1000 / elapsed, cpu / gb, own / gb


def consume(
    pid: int, conf: dict[str, object], topic: str, count: int, size: int
) -> tuple[float, float, float]:
    """(MB/s, broker CPU s/GB, client CPU s/GB) of reading the topic from offset 0 with a fresh
    consumer."""
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
    got, t0, cpu0, own0 = 0, 0.0, 0.0, 0.0
    deadline = time.monotonic() + 600
    try:
        while got < count and time.monotonic() < deadline:
            msgs = c.consume(10000, 0.5)
            if not msgs:
                continue
            if msgs[-1].error() is not None:
                raise RuntimeError(f"consume: {msgs[-1].error()}")
            if got == 0:
                t0, cpu0, own0 = time.perf_counter(), process_cpu_seconds(pid), own_cpu_seconds()
            got += len(msgs)
        elapsed, cpu = time.perf_counter() - t0, process_cpu_seconds(pid) - cpu0
        own = own_cpu_seconds() - own0
    finally:
        c.close()
    if got < count:
        raise RuntimeError(f"consume: {got} of {count} records")
    gb = count * size / 1e9
    return gb * 1000 / elapsed, cpu / gb, own / gb


def record_protection_cost(
    certs: Path, chunk: int = 1 << 20, total: int = 256 << 20, record: int = 2760
) -> dict[str, object]:
    """CPU s/GB of TLS record protection through memory BIOs, as the broker does it: `encrypt` is a
    pread of `chunk` bytes, SSLObject.write and the outgoing BIO read (consume); `decrypt` is the
    incoming BIO write and SSLObject.read into a buffer (produce), in full 16 KiB records and in
    records of `record` bytes, about what librdkafka sends (a uprobe on SSL_read_ex counted 74,000
    calls for 200 MB produced). Best of 3, one thread."""
    ca = CertificateAuthority(certs / "floor")
    server = ca.issue("broker", server=True)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(str(server.bundle))
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.load_verify_locations(str(ca.cert))
    cctx.check_hostname = False
    encrypt: list[float] = []
    decrypt: list[float] = []
    decrypt_small: list[float] = []
    cipher = None
    with tempfile.TemporaryFile(dir=certs) as f:
        f.write(os.urandom(chunk) * (total // chunk))
        f.flush()
        fd = f.fileno()
        for _ in range(3):
            s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
            srv = sctx.wrap_bio(s_in, s_out, server_side=True)
            cli = cctx.wrap_bio(c_in, c_out)
            for _ in range(8):  # the handshake, both ends in this thread
                for side in (cli, srv):
                    with contextlib.suppress(ssl.SSLWantReadError):
                        side.do_handshake()
                s_in.write(c_out.read())
                c_in.write(s_out.read())
            cipher = srv.cipher()
            t0 = time.process_time()
            for pos in range(0, total, chunk):
                srv.write(os.pread(fd, chunk, pos))
                s_out.read()
            encrypt.append((time.process_time() - t0) / (total / 1e9))
            for size, into in ((16384, decrypt), (record, decrypt_small)):
                into.append(_decrypt_cost(s_in, srv, cli, c_out, os.pread(fd, chunk, 0), size))
    return {
        "encrypt": min(encrypt),
        "decrypt": min(decrypt),
        "decrypt_small": min(decrypt_small),
        "cipher": cipher,
    }


def _decrypt_cost(
    s_in: ssl.MemoryBIO,
    srv: ssl.SSLObject,
    cli: ssl.SSLObject,
    c_out: ssl.MemoryBIO,
    data: bytes,
    record: int,
    total: int = 128 << 20,
) -> float:
    """CPU s/GB of the broker's side of a produce: TLS records of `record` bytes (one client write
    each), arriving in 256 KiB reads, written to the incoming BIO and read out into a buffer."""
    pieces = [memoryview(data)[i : i + record] for i in range(0, len(data), record)]
    reads, pending = [], 0
    while pending < total:
        for piece in pieces:
            cli.write(piece)
        reads.append(c_out.read())
        pending += len(data)
    buf = bytearray(len(data))
    t0 = time.process_time()
    for ciphertext in reads:
        for at in range(0, len(ciphertext), 256 << 10):
            s_in.write(ciphertext[at : at + (256 << 10)])
            with contextlib.suppress(ssl.SSLWantReadError):
                while srv.read(len(buf), buf):
                    pass
    return (time.process_time() - t0) / (pending / 1e9)


def _ratio(x: float, base: float) -> float:
    """x / base; NaN when the base is 0 (a CPU figure under one clock tick on a short run)."""
    return x / base if base else float("nan")


KEYS = ["produce", "produce_cpu", "produce_client", "consume", "consume_cpu", "consume_client"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3, help="at least 3: figures are medians")
    ap.add_argument("--client-auth", default="required", choices=["required", "requested", "none"])
    args = ap.parse_args()
    if args.repeats < 3:
        ap.error("--repeats must be at least 3 (the figures are medians)")
    results: dict[str, dict[str, list[float]]] = {name: {k: [] for k in KEYS} for name in NAMES}
    load0 = os.getloadavg()
    with contextlib.ExitStack() as stack:
        certs = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tls-certs-"))
        pid, confs = stack.enter_context(tls_broker(Path(certs), args.client_auth))
        for r in range(args.repeats):
            order = NAMES[r % 3 :] + NAMES[: r % 3]
            for name in order:
                topic = f"bench-{name.lower()}-{r}"
                got = (
                    *produce(pid, confs[name], topic, args.messages, args.size),
                    *consume(pid, confs[name], topic, args.messages, args.size),
                )
                for key, value in zip(KEYS, got, strict=True):
                    results[name][key].append(value)
                print(
                    f"repeat {r + 1} {name:9s} produce {got[0]:7.1f} MB/s ({got[1]:.2f} broker "
                    f"CPU s/GB) consume {got[3]:7.1f} MB/s ({got[4]:.2f})",
                    flush=True,
                )
    med = {n: {k: statistics.median(v) for k, v in m.items()} for n, m in results.items()}
    print(
        f"\n{args.messages} records of {args.size} B, ssl.client.auth={args.client_auth}, "
        f"medians of {args.repeats} (one broker, every listener); load average "
        f"{load0[0]:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores"
    )
    print(
        f"{'':24s}{'PLAINTEXT':>12s}{'SSL':>12s}{'SASL_SSL':>12s}{'SSL/PLAIN':>11s}"
        f"{'SASL_SSL/PLAIN':>16s}"
    )
    rec_s = 1e6 / args.size  # records/s per MB/s
    rows = [
        ("produce records/s", "produce", rec_s),
        ("produce MB/s", "produce", 1.0),
        ("produce broker CPU s/GB", "produce_cpu", 1.0),
        ("produce client CPU s/GB", "produce_client", 1.0),
        ("consume records/s", "consume", rec_s),
        ("consume MB/s", "consume", 1.0),
        ("consume broker CPU s/GB", "consume_cpu", 1.0),
        ("consume client CPU s/GB", "consume_client", 1.0),
    ]
    for label, key, scale in rows:
        a, b, c = (med[n][key] * scale for n in NAMES)
        digits = 0 if scale != 1.0 else 2
        print(
            f"{label:24s}{a:12.{digits}f}{b:12.{digits}f}{c:12.{digits}f}{_ratio(b, a):10.2f}x"
            f"{_ratio(c, a):15.2f}x"
        )
    with tempfile.TemporaryDirectory(prefix="bench-tls-floor-") as d:
        floor = record_protection_cost(Path(d))
    enc, dec = float(floor["encrypt"]), float(floor["decrypt"])  # type: ignore[arg-type]
    small = float(floor["decrypt_small"])  # type: ignore[arg-type]
    plain_p, plain_c = med["PLAINTEXT"]["produce_cpu"], med["PLAINTEXT"]["consume_cpu"]
    print(
        f"\nfloor: record protection on one core here ({floor['cipher']}): decrypt {dec:.2f} s/GB "
        f"in 16 KiB records, {small:.2f} in ~2.7 KB ones as librdkafka sends them (produce); "
        f"pread + encrypt {enc:.2f} s/GB (consume). PLAINTEXT plus these, the least SSL can cost: "
        f"produce {_ratio(plain_p + dec, plain_p):.2f}x ({_ratio(plain_p + small, plain_p):.2f}x "
        f"with librdkafka's records), consume {_ratio(plain_c + enc, plain_c):.2f}x the PLAINTEXT "
        "CPU per GB"
    )


if __name__ == "__main__":
    main()
