"""Consumer-group benchmark: time from the first JoinGroup to a Stable group of 10 members, and OffsetCommit
throughput with 1 and with 100 partitions per commit; members speak the raw protocol over their own sockets.

The broker is kafkalite embedded in this process (`kafkalite.testing.Broker`, its own thread and event loop) unless
--subprocess runs `kafkalite serve` in a child process; --peer tansu measures Tansu the same way, with ratios.
Usage: python bench/bench_groups.py [--members 10] [--rounds 5] [--commit-seconds 3] [--subprocess] [--peer tansu]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peers import free_port, wait_port
from peers import tansu_broker as shared_tansu_broker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kafkalite.cli.wire import WireClient  # noqa: E402
from kafkalite.protocol.errors import ErrorCode  # noqa: E402
from kafkalite.protocol.headers import RequestHeader, encode_request_header, request_header_version  # noqa: E402
from kafkalite.protocol.messages.groups import (  # noqa: E402
    ConsumerProtocolAssignment,
    encode_assignment,
    encode_subscription,
)
from kafkalite.protocol.schema import APIS  # noqa: E402

JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, OFFSET_COMMIT, CREATE_TOPICS = 11, 12, 13, 14, 15, 8, 19
E = ErrorCode
_LEN = struct.Struct(">i")


# ---------------------------------------------------------------------------
# brokers


@contextlib.contextmanager
def kafkalite_embedded(delay_ms: int) -> Iterator[str]:
    from kafkalite.testing import Broker

    with Broker(group_initial_rebalance_delay_ms=delay_ms) as b:
        yield b.bootstrap_servers


@contextlib.contextmanager
def kafkalite_process(delay_ms: int) -> Iterator[str]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as d:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        args = [sys.executable, "-m", "kafkalite.cli.main", "serve", "--data-dir", d]
        args += ["--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
        args += ["--override", f"group.initial.rebalance.delay.ms={delay_ms}"]
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port, proc)
            # serving starts once __consumer_offsets is loaded; FindCoordinator confirms it
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextlib.contextmanager
def tansu_broker(_delay_ms: int) -> Iterator[str]:
    """Tansu has no initial rebalance delay setting: the argument only matches the other factories."""
    with shared_tansu_broker() as bootstrap:
        yield bootstrap


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    cls: Any = APIS[CREATE_TOPICS].request
    with WireClient(bootstrap, timeout=30) as c:
        t = cls.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
        )
        r = c.send(cls(topics=[t], timeout_ms=30000, validate_only=False)).topics[0]
        if r.error_code not in (0, E.TOPIC_ALREADY_EXISTS):
            raise RuntimeError(f"create topic {name}: {E.name_of(r.error_code)}")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if c.partitions_of(name) == partitions:
                return
            time.sleep(0.05)


def find_coordinator_ready(bootstrap: str, group: str, timeout: float = 60) -> None:
    cls: Any = APIS[10].request
    deadline = time.monotonic() + timeout
    with WireClient(bootstrap, timeout=30) as c:
        v = min(c.version_for(10), 3)
        while time.monotonic() < deadline:
            if c.send(cls(key=group, key_type=0), version=v).error_code == 0:
                return
            time.sleep(0.1)
    raise TimeoutError("the group coordinator did not come up")


# ---------------------------------------------------------------------------
# a group member driven with raw JoinGroup / SyncGroup / Heartbeat requests


def range_assignment(members: list[str], topic: str, partitions: int) -> dict[str, bytes]:
    ids = sorted(members)
    per, extra = divmod(partitions, len(ids))
    out, start = {}, 0
    tp_cls = ConsumerProtocolAssignment.TopicPartition
    for i, m in enumerate(ids):
        n = per + (1 if i < extra else 0)
        parts = list(range(start, start + n))
        start += n
        out[m] = encode_assignment(
            0, assigned_partitions=[tp_cls(topic=topic, partitions=parts)], user_data=None
        )
    return out


@dataclass
class Observed:
    """What the members saw, shared with the main thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    first_join: float | None = None
    synced: dict[str, tuple[int, float]] = field(default_factory=dict)  # member -> (generation, t)
    leader_sizes: dict[int, int] = field(default_factory=dict)  # generation -> members in JoinGroup
    errors: list[str] = field(default_factory=list)


class Member(threading.Thread):
    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        partitions: int,
        obs: Observed,
        start: threading.Barrier,
        stop: threading.Event,
        heartbeat_ms: int,
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic, self.partitions = (
            bootstrap,
            group,
            topic,
            partitions,
        )
        self.obs, self.start_barrier, self.stop_event = obs, start, stop
        self.heartbeat_s = heartbeat_ms / 1000
        self.member_id = ""
        self.generation = -1

    def run(self) -> None:
        try:
            with WireClient(self.bootstrap, timeout=60, client_id="bench-member") as c:
                self.start_barrier.wait(30)
                self._loop(c)
                if self.member_id:
                    self._leave(c)
        except Exception as exc:  # report, do not hang the run
            with self.obs.lock:
                self.obs.errors.append(f"{type(exc).__name__}: {exc}")

    def _join(self, c: WireClient) -> Any:
        cls: Any = APIS[JOIN].request
        meta = encode_subscription(0, topics=[self.topic], user_data=None)
        while True:
            req = cls(
                group_id=self.group,
                session_timeout_ms=10000,
                rebalance_timeout_ms=30000,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[cls.JoinGroupRequestProtocol(name="range", metadata=meta)],
                reason=None,
            )
            with self.obs.lock:
                if self.obs.first_join is None:
                    self.obs.first_join = time.perf_counter()
            r = c.send(req)
            if r.error_code == E.MEMBER_ID_REQUIRED:
                self.member_id = r.member_id
                continue
            return r

    def _loop(self, c: WireClient) -> None:
        sync_cls: Any = APIS[SYNC].request
        hb_cls: Any = APIS[HEARTBEAT].request
        while not self.stop_event.is_set():
            j = self._join(c)
            if j.error_code == E.REBALANCE_IN_PROGRESS:
                continue
            if j.error_code:
                raise RuntimeError(f"JoinGroup: {E.name_of(j.error_code)}")
            self.member_id, self.generation = j.member_id, j.generation_id
            assignments = []
            if j.leader == j.member_id:
                with self.obs.lock:
                    self.obs.leader_sizes[j.generation_id] = len(j.members)
                plan = range_assignment(
                    [m.member_id for m in j.members], self.topic, self.partitions
                )
                assignments = [
                    sync_cls.SyncGroupRequestAssignment(member_id=m, assignment=a)
                    for m, a in plan.items()
                ]
            s = c.send(
                sync_cls(
                    group_id=self.group,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name=j.protocol_name,
                    assignments=assignments,
                )
            )
            if s.error_code == E.REBALANCE_IN_PROGRESS:
                continue
            if s.error_code:
                raise RuntimeError(f"SyncGroup: {E.name_of(s.error_code)}")
            with self.obs.lock:
                self.obs.synced[self.member_id] = (self.generation, time.perf_counter())
            while not self.stop_event.wait(self.heartbeat_s):
                h = c.send(
                    hb_cls(
                        group_id=self.group,
                        generation_id=self.generation,
                        member_id=self.member_id,
                        group_instance_id=None,
                    )
                )
                if h.error_code == E.REBALANCE_IN_PROGRESS:
                    break  # rejoin
                if h.error_code:
                    raise RuntimeError(f"Heartbeat: {E.name_of(h.error_code)}")

    def _leave(self, c: WireClient) -> None:
        cls: Any = APIS[LEAVE].request
        v = c.version_for(LEAVE)
        if v >= 3:
            req = cls(
                group_id=self.group,
                members=[
                    cls.MemberIdentity(
                        member_id=self.member_id, group_instance_id=None, reason=None
                    )
                ],
            )
        else:
            req = cls(group_id=self.group, member_id=self.member_id)
        c.send(req, version=v)


def describe(bootstrap: str, group: str) -> tuple[str, int]:
    cls: Any = APIS[DESCRIBE].request
    with WireClient(bootstrap, timeout=30) as c:
        d = c.send(cls(groups=[group], include_authorized_operations=False)).groups[0]
        return str(d.group_state), len(d.members)


def time_to_stable(
    bootstrap: str, topic: str, partitions: int, members: int, heartbeat_ms: int, timeout: float
) -> tuple[float, int]:
    """Seconds from the first JoinGroup to every member synced in one generation of `members` members."""
    group = f"bench-{uuid.uuid4().hex[:10]}"
    obs, stop = Observed(), threading.Event()
    barrier = threading.Barrier(members)
    threads = [
        Member(bootstrap, group, topic, partitions, obs, barrier, stop, heartbeat_ms)
        for _ in range(members)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    result: tuple[float, int] | None = None
    try:
        while time.monotonic() < deadline and result is None:
            time.sleep(0.002)
            with obs.lock:
                if obs.errors:
                    raise RuntimeError(f"member failed: {obs.errors[0]}")
                gens = {g for g, _ in obs.synced.values()}
                if len(obs.synced) == members and len(gens) == 1:
                    (gen,) = gens
                    if obs.leader_sizes.get(gen) == members and obs.first_join is not None:
                        done = max(t for _, t in obs.synced.values())
                        result = (done - obs.first_join, gen)
        if result is None:
            raise TimeoutError(f"group of {members} not stable within {timeout:.0f} s")
        state, n = describe(bootstrap, group)
        if (state, n) != ("Stable", members):
            raise RuntimeError(f"broker says the group is {state} with {n} members")
        return result
    finally:
        stop.set()
        for t in threads:
            t.join(15)


# ---------------------------------------------------------------------------
# OffsetCommit throughput: one member of a stable group commits back to back on one connection


def commit_throughput(
    bootstrap: str, topic: str, partitions_per_commit: int, seconds: float
) -> float:
    group = f"commit-{uuid.uuid4().hex[:10]}"
    obs, stop = Observed(), threading.Event()
    member = Member(
        bootstrap, group, topic, partitions_per_commit, obs, threading.Barrier(1), stop, 1000
    )
    member.start()
    deadline = time.monotonic() + 30
    while member.member_id not in obs.synced and time.monotonic() < deadline:
        if obs.errors:
            raise RuntimeError(obs.errors[0])
        time.sleep(0.005)
    try:
        with WireClient(bootstrap, timeout=30) as c:
            cls: Any = APIS[OFFSET_COMMIT].request
            v = c.version_for(OFFSET_COMMIT)
            t_cls = cls.OffsetCommitRequestTopic
            req = cls(
                group_id=group,
                generation_id_or_member_epoch=member.generation,
                member_id=member.member_id,
                group_instance_id=None,
                topics=[
                    t_cls(
                        name=topic,
                        partitions=[
                            t_cls.OffsetCommitRequestPartition(
                                partition_index=p, committed_offset=0, committed_metadata=""
                            )
                            for p in range(partitions_per_commit)
                        ],
                    )
                ],
            )
            # check one commit through the client, then send the pre-encoded frame back to back
            r = c.send(req, version=v)
            bad = {p.error_code for t in r.topics for p in t.partitions if p.error_code}
            if bad:
                raise RuntimeError(f"OffsetCommit: {[E.name_of(b) for b in bad]}")
            out = bytearray(4)
            encode_request_header(
                out,
                RequestHeader(OFFSET_COMMIT, v, 1, "bench"),
                request_header_version(OFFSET_COMMIT, v, req.is_flexible(v)),
            )
            req.encode_into(out, v)
            _LEN.pack_into(out, 0, len(out) - 4)
            frame, sock = bytes(out), c.sock
            n = 0
            start = time.perf_counter()
            end = start + seconds
            while time.perf_counter() < end:
                sock.sendall(frame)
                size = _LEN.unpack(c._recv(4))[0]
                c._recv(size)
                n += 1
            elapsed = time.perf_counter() - start
            return n / elapsed
    finally:
        stop.set()
        member.join(15)


# ---------------------------------------------------------------------------


@dataclass
class Figures:
    join: dict[int, list[float]] = field(default_factory=dict)  # delay -> seconds per round
    generations: dict[int, list[int]] = field(default_factory=dict)
    commits: dict[int, float] = field(default_factory=dict)  # partitions per commit -> commits/s


def measure(name: str, factory: Any, args: argparse.Namespace) -> Figures:
    fig = Figures()
    for delay, rounds in ((0, args.rounds), (3000, args.rounds_default_delay)):
        if rounds <= 0:
            continue
        with factory(delay) as bootstrap:
            find_coordinator_ready(bootstrap, "warmup")
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, 100)
            if name == "tansu" and delay:
                print(
                    f"  ({name}: no group.initial.rebalance.delay.ms setting; measured with its default)"
                )
            for i in range(rounds):
                secs, gen = time_to_stable(
                    bootstrap, topic, 100, args.members, args.heartbeat_ms, timeout=60
                )
                fig.join.setdefault(delay, []).append(secs)
                fig.generations.setdefault(delay, []).append(gen)
                print(
                    f"  {name} delay={delay} ms round {i + 1}: {secs * 1000:.0f} ms, generation {gen}"
                )
            if delay == 0:
                for ppc in (1, 100):
                    fig.commits[ppc] = commit_throughput(bootstrap, topic, ppc, args.commit_seconds)
                    print(
                        f"  {name} OffsetCommit x{ppc} partitions: {fig.commits[ppc]:,.0f} commits/s"
                    )
    return fig


def report(results: dict[str, Figures], args: argparse.Namespace) -> None:
    names = list(results)
    print()
    print(
        f"{args.members} members, heartbeat every {args.heartbeat_ms} ms (members rejoin on REBALANCE_IN_PROGRESS)"
    )
    header = f"{'metric':<52}" + "".join(f"{n:>16}" for n in names)
    if len(names) == 2:
        header += f"{'ratio':>10}"
    print(header)
    rows: list[tuple[str, list[float | None], bool]] = []  # (label, values, lower is better)
    for delay in (0, 3000):
        vals = [
            statistics.median(results[n].join[delay]) * 1000 if results[n].join.get(delay) else None
            for n in names
        ]
        label = f"join -> Stable, median ms (initial delay {delay} ms)"
        rows.append((label, vals, True))
    for ppc in (1, 100):
        vals = [results[n].commits.get(ppc) for n in names]
        rows.append((f"OffsetCommit, {ppc} partition(s)/commit, commits/s", vals, False))
        pvals = [v * ppc if v is not None else None for v in vals]
        rows.append(("  = committed offsets/s", pvals, False))
    for label, vals, lower in rows:
        line = f"{label:<52}" + "".join(
            f"{v:>16,.0f}" if v is not None else f"{'-':>16}" for v in vals
        )
        if len(vals) == 2 and vals[0] and vals[1]:
            ratio = vals[1] / vals[0] if lower else vals[0] / vals[1]
            line += f"{ratio:>9.2f}x"
        print(line)
    if len(names) == 2:
        print("(ratio = kafkalite advantage: >1 means kafkalite is faster)")
    for n in names:
        for delay, secs in results[n].join.items():
            print(
                f"{n} delay={delay}: min {min(secs) * 1000:.0f} ms, max {max(secs) * 1000:.0f} ms, "
                f"generations {results[n].generations[delay]}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5, help="join rounds with initial delay 0")
    ap.add_argument(
        "--rounds-default-delay", type=int, default=2, help="join rounds with the default 3000 ms"
    )
    ap.add_argument("--heartbeat-ms", type=int, default=100)
    ap.add_argument("--commit-seconds", type=float, default=3.0)
    ap.add_argument(
        "--subprocess", action="store_true", help="kafkalite in a child process, not embedded"
    )
    ap.add_argument("--peer", choices=["tansu"], help="also measure this broker, with ratios")
    args = ap.parse_args()
    results: dict[str, Figures] = {}
    where = "subprocess" if args.subprocess else "embedded"
    print(f"kafkalite ({where}):")
    results["kafkalite"] = measure(
        "kafkalite", kafkalite_process if args.subprocess else kafkalite_embedded, args
    )
    if args.peer == "tansu":
        print("tansu:")
        try:
            results["tansu"] = measure("tansu", tansu_broker, args)
        except Exception as exc:  # the peer is optional: report and go on
            print(f"  (tansu unavailable: {type(exc).__name__}: {exc})")
    report(results, args)


if __name__ == "__main__":
    main()
