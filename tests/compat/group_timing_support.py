"""Issue 16, classic-group timing: N consumers of one group started together, each polling in its own
thread, and the time until all of them hold an assignment of the same generation covering the topic.

Used by `test_group_timing.py`; run as a script it is the reproducer (a broker in its own process):
    PYTHONPATH=src python tests/compat/group_timing_support.py --runs 10 [--lib confluent] [--delay-ms 3000]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Snapshot = tuple[int, str, frozenset[int]]  # generation, member id, assigned partitions


@dataclass
class Member:
    """What one consumer held over time: (seconds since start, generation, member id, partitions)."""

    name: str
    history: list[tuple[float, int, str, frozenset[int]]] = field(default_factory=list)
    current: Snapshot = (-1, "", frozenset())
    error: BaseException | None = None
    final_state: str = ""  # the client's own view at the end (kafka-python only)

    def record(self, t: float, snap: Snapshot) -> None:
        if snap != self.current:
            self.current = snap
            self.history.append((t, *snap))


@dataclass
class RunResult:
    settled_s: float | None  # None: not within the deadline
    members: list[Member]

    def describe(self) -> str:
        lines = [f"settled after {self.settled_s:.2f} s" if self.settled_s else "did NOT settle"]
        for m in self.members:
            steps = ", ".join(
                f"{t:.2f}s g{g} {mid[-6:] or '-'} {sorted(parts)}" for t, g, mid, parts in m.history
            )
            extra = f" ERROR {m.error!r}" if m.error else ""
            if self.settled_s is None and m.final_state:
                extra += f" [client at the end: {m.final_state}]"
            lines.append(f"  {m.name}: {steps}{extra}")
        return "\n".join(lines)


def settled(snaps: list[Snapshot], partitions: int) -> bool:
    """All members in one generation (>0), each with partitions, together covering the topic once."""
    generations = {g for g, _, _ in snaps}
    if len(generations) != 1 or min(generations) <= 0:
        return False
    parts = [p for _, _, ps in snaps for p in ps]
    return all(ps for _, _, ps in snaps) and sorted(parts) == list(range(partitions))


Factory = Callable[[str, str, str], tuple[Callable[[], Snapshot], Callable[[], str]]]


def _kafka_python_member(
    bootstrap: str, group: str, topic: str
) -> tuple[Callable[[], Snapshot], Callable[[], str]]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        client_id=f"timing-{uuid.uuid4().hex[:4]}",
    )

    def step() -> Snapshot:
        consumer.poll(timeout_ms=100)
        gen = consumer._coordinator._generation  # kafka-python keeps it there
        parts = frozenset(tp.partition for tp in consumer.assignment())
        stable = consumer._coordinator.generation_if_stable() is not None
        return (gen.generation_id if stable else -1), gen.member_id, parts

    def close() -> str:
        c = consumer._coordinator
        task = c._join_task
        view = (
            f"state={c.state} need_rejoin={c.need_rejoin()} "
            f"join_task={'none' if task is None else ('done' if task.is_done else 'pending')}"
        )
        consumer.close()
        return view

    return step, close


def _confluent_member(
    bootstrap: str, group: str, topic: str
) -> tuple[Callable[[], Snapshot], Callable[[], str]]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "group.protocol": "classic",
        }
    )
    consumer.subscribe([topic])

    def step() -> Snapshot:
        consumer.poll(0.1)
        meta = consumer.consumer_group_metadata()
        # librdkafka has no public generation getter; the serialized metadata carries it
        gen = _confluent_generation(meta)
        parts = frozenset(tp.partition for tp in consumer.assignment())
        return gen, str(consumer.memberid() or ""), parts

    def close() -> str:
        consumer.close()
        return ""

    return step, close


def _confluent_generation(meta: bytes) -> int:
    # librdkafka's serialized group metadata: b"CGMDv2:", the generation as a native int32, then
    # NUL-terminated ids
    if meta[:7] != b"CGMDv2:":
        return -1
    return int.from_bytes(meta[7:11], sys.byteorder, signed=True)


MEMBER_FACTORIES: dict[str, Factory] = {
    "kafka-python": _kafka_python_member,
    "confluent": _confluent_member,
}


def run_once(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    members: int = 4,
    lib: str = "kafka-python",
    deadline_s: float = 15.0,
    linger_s: float = 0.0,
) -> RunResult:
    """Start `members` consumers together; return when they settle (or at the deadline)."""
    group = f"timing-{uuid.uuid4().hex[:8]}"
    factory = MEMBER_FACTORIES[lib]
    ms = [Member(f"m{i}") for i in range(members)]
    start_gate = threading.Barrier(members + 1)
    stop = threading.Event()
    t0 = [0.0]

    def worker(m: Member) -> None:
        try:
            step, close = factory(bootstrap, group, topic)
        except BaseException as exc:
            m.error = exc
            start_gate.abort()
            return
        try:
            start_gate.wait()
            while not stop.is_set():
                m.record(time.monotonic() - t0[0], step())
        except BaseException as exc:
            m.error = exc
        finally:
            with contextlib.suppress(Exception):
                m.final_state = close()

    threads = [threading.Thread(target=worker, args=(m,), daemon=True) for m in ms]
    for th in threads:
        th.start()
    t0[0] = time.monotonic()
    start_gate.wait()
    t0[0] = time.monotonic()
    settled_at: float | None = None
    try:
        while time.monotonic() - t0[0] < deadline_s:
            if settled([m.current for m in ms], partitions):
                settled_at = time.monotonic() - t0[0]
                break
            if any(m.error for m in ms):
                break
            time.sleep(0.02)
        if linger_s:
            time.sleep(linger_s)
    finally:
        stop.set()
        for th in threads:
            th.join(30)
    return RunResult(settled_at, ms)


@contextlib.contextmanager
def broker_process(data_dir: Path, *overrides: str, log_level: str = "INFO") -> Iterator[str]:
    """`kafkalite serve` in a child process (no GIL shared with the clients); yields bootstrap."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    args = [sys.executable, "-m", "kafkalite.cli.main", "serve", "--data-dir", str(data_dir)]
    args += ["--listen", f"127.0.0.1:{port}", "--log-level", log_level]
    for o in overrides:
        args += ["--override", o]
    log_path = data_dir.parent / f"broker-{port}.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"broker exited: {log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("broker did not listen") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    # wait until metadata shows the partitions
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--members", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--lib", choices=sorted(MEMBER_FACTORIES), default="kafka-python")
    ap.add_argument("--deadline", type=float, default=15.0)
    ap.add_argument("--delay-ms", type=int, default=None, help="group.initial.rebalance.delay.ms")
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument("--client-debug", action="store_true", help="kafka-python DEBUG logs to stderr")
    ap.add_argument("--bootstrap", default=None, help="use a running broker instead")
    ap.add_argument(
        "--in-process", action="store_true", help="kafkalite.testing.Broker (shares the GIL)"
    )
    args = ap.parse_args()
    if args.client_debug:
        logging.basicConfig(
            level=logging.DEBUG, format="%(relativeCreated)7d %(threadName)s %(name)s %(message)s"
        )
    overrides = ["num.partitions=1"]
    if args.delay_ms is not None:
        overrides.append(f"group.initial.rebalance.delay.ms={args.delay_ms}")
    with contextlib.ExitStack() as stack:
        if args.bootstrap:
            bootstrap = args.bootstrap
        elif args.in_process:
            from kafkalite.testing import Broker

            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            props: dict[str, Any] = {"num_partitions": 1}
            if args.delay_ms is not None:
                props["group_initial_rebalance_delay_ms"] = args.delay_ms
            bootstrap = stack.enter_context(Broker(tmp / "data", **props)).bootstrap_servers
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            bootstrap = stack.enter_context(
                broker_process(tmp / "data", *overrides, log_level=args.log_level)
            )
            print(f"broker log: {tmp}/broker-*.log (removed at exit)", file=sys.stderr)
        times: list[float] = []
        failures = 0
        for i in range(args.runs):
            topic = f"timing-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, args.partitions)
            r = run_once(
                bootstrap, topic, args.partitions, members=args.members, lib=args.lib,
                deadline_s=args.deadline,
            )  # fmt: skip
            print(f"run {i}: {r.describe()}", flush=True)
            if r.settled_s is None:
                failures += 1
            else:
                times.append(r.settled_s)
        if times:
            print(
                f"settled {len(times)}/{args.runs}: min {min(times):.2f} s, "
                f"median {statistics.median(times):.2f} s, max {max(times):.2f} s"
            )
        print(f"failed {failures}/{args.runs}")
        if not args.bootstrap and not args.in_process:
            for p in sorted(tmp.glob("broker-*.log")):
                (Path("/tmp") / f"group-timing-{p.name}").write_bytes(p.read_bytes())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
