"""Nemesis: faults on a NetnsCluster, by a fixed schedule or at random (seeded), each healed: partitions
of chosen node sets, a flapping bridge, packet loss, netem, SIGKILL / SIGSTOP of brokers, ZK and controller.

Every start and heal is recorded (time, kind, nodes). Each partition proves it bit: TCP probes across the
cut fail while it is in force and succeed after the heal (FaultRecord.probes; `bit()` says if all did).
"""

from __future__ import annotations

import random
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalite.jepsen.netcluster import NetnsCluster
from kafkalite.jepsen.netns import run

PARTITION_KINDS = (
    "leader-followers",  # a partition leader cut from the other brokers, still in ZooKeeper
    "leader-zookeeper",  # a leader cut from ZooKeeper, reachable by clients and followers (zombie)
    "majority-minority",  # brokers and ZooKeeper servers split together, a leader on the minority
    "controller-isolated",  # the controller cut from every other node
    "bridge-flap",  # every node's link goes down and up again, several times
)
PROCESS_KINDS = (
    "kill-leader",
    "kill-others",  # every broker but one (a leader, or the target) at once: it is left alone
    "kill-controller",
    "kill-zookeeper",
    "pause-leader",
    "pause-controller",
    "pause-zookeeper",
)
OTHER_KINDS = ("loss", "netem")
ALL_KINDS = PARTITION_KINDS + PROCESS_KINDS + OTHER_KINDS

PROBE_TIMEOUT = 0.5


@dataclass
class Probe:
    """A TCP connect from inside `src`'s namespace (None: the clients') to `dst`'s listener."""

    src: str | None
    dst: str
    port: int
    during: bool | None = None  # connected while the fault was in force (must be False)
    after: bool | None = None  # connected after the heal (must be True)


@dataclass
class FaultRecord:
    kind: str
    nodes: dict[str, list[str]]
    started: float  # seconds since the nemesis was made (monotonic)
    healed: float | None = None
    probes: list[Probe] = field(default_factory=list)
    note: str = ""  # e.g. why a fault could not be made here

    def bit(self) -> bool:
        """Every probe failed during the fault and succeeded after it (True if it has none)."""
        return all(p.during is False and p.after is True for p in self.probes)


class Nemesis:
    """Faults on `cluster` about `topic` (its leaders are the targets). `on_event(f, value)` is told
    of every start and stop (f "start" / "stop", value a dict), e.g. a jepsen history's nemesis()."""

    def __init__(
        self,
        cluster: NetnsCluster,
        topic: str,
        partitions: int,
        *,
        seed: int | None = None,
        on_event: Callable[[str, dict[str, Any]], Any] | None = None,
        log: Callable[[str], Any] = print,
    ) -> None:
        self.cluster = cluster
        self.net = cluster.net
        self.topic, self.partitions = topic, partitions
        self.rng = random.Random(seed)
        self.on_event = on_event
        self.log = log
        self.t0 = time.monotonic()
        self.faults: list[FaultRecord] = []
        self._heal: Callable[[], None] | None = None
        self._current: FaultRecord | None = None
        self._after_probes: Callable[[], None] | None = None
        self._target: str | None = None

    def now(self) -> float:
        return time.monotonic() - self.t0

    # -- targets ------------------------------------------------------------------------------

    def _brokers(self) -> list[str]:
        return [f"b{i}" for i in self.cluster.broker_ids]

    def _zks(self) -> list[str]:
        return [f"zk{i}" for i in self.cluster.zk_ids]

    def _a_leader(self) -> int:
        if self._target is not None:
            return int(self._target.removeprefix("b"))
        leaders = [self.cluster.leader(self.topic, p) for p in range(self.partitions)]
        known = [x for x in leaders if x is not None]
        if not known:
            raise RuntimeError(f"no partition of {self.topic} has a leader")
        return self.rng.choice(known)

    def _controller(self) -> int:
        c = self.cluster.controller()
        if c is None:
            raise RuntimeError("no controller")
        return c

    # -- start / heal -------------------------------------------------------------------------

    def start(self, kind: str, target: str | None = None) -> FaultRecord:
        """Start a fault; `target` (a broker such as "b2") replaces the leader it would pick."""
        if self._current is not None:
            raise RuntimeError(f"fault {self._current.kind} is still in force")
        if kind not in ALL_KINDS:
            raise ValueError(f"unknown fault {kind!r}; known: {', '.join(ALL_KINDS)}")
        self._target = target
        try:
            rec = getattr(self, "_start_" + kind.replace("-", "_"))()
        finally:
            self._target = None
        assert isinstance(rec, FaultRecord)
        self._current = rec
        self.faults.append(rec)
        self._emit("start", rec)
        self._probe(rec.probes, "during", 0.0)
        if self._after_probes is not None:
            self._after_probes()
            self._after_probes = None
        return rec

    def heal(self, probe_timeout: float = 10.0) -> FaultRecord | None:
        rec, self._current = self._current, None
        if rec is None:
            return None
        if self._heal is not None:
            self._heal()  # a killed process: once it has started again
            self._heal = None
        rec.healed = self.now()
        self._emit("stop", rec)
        self._probe(rec.probes, "after", probe_timeout)
        return rec

    def _probe(self, probes: list[Probe], when: str, retry_for: float) -> None:
        """All probes at once, each in a thread; with `retry_for`, a failed one is tried again
        until it connects or that many seconds pass (links and ARP take a moment after a heal)."""

        def one(p: Probe) -> None:
            deadline = time.monotonic() + retry_for
            while not (ok := self.net.reaches(p.src, p.dst, p.port, PROBE_TIMEOUT)):
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            setattr(p, when, ok)

        threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in probes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _emit(self, f: str, rec: FaultRecord) -> None:
        value = {"kind": rec.kind, "nodes": rec.nodes}
        if rec.note:
            value["note"] = rec.note
        self.log(
            f"  {self.now():6.1f} s nemesis {f} {rec.kind} "
            + " | ".join(f"{k}: {','.join(v)}" for k, v in rec.nodes.items())
            + (f" ({rec.note})" if rec.note else "")
        )
        if self.on_event is not None:
            self.on_event(f, value)

    def _cut(self, kind: str, side_a: Sequence[str], side_b: Sequence[str]) -> FaultRecord:
        self.net.partition(side_a, side_b)
        self._heal = self.net.heal
        probes = [Probe(a, b, self.cluster.port_of(b)) for a in side_a for b in side_b]
        probes += [Probe(b, a, self.cluster.port_of(a)) for a in side_a for b in side_b]
        nodes = {"side_a": list(side_a), "side_b": list(side_b)}
        return FaultRecord(kind, nodes, self.now(), None, probes)

    def _start_leader_followers(self) -> FaultRecord:
        leader = f"b{self._a_leader()}"
        return self._cut("leader-followers", [leader], [b for b in self._brokers() if b != leader])

    def _start_leader_zookeeper(self) -> FaultRecord:
        return self._cut("leader-zookeeper", [f"b{self._a_leader()}"], self._zks())

    def _start_majority_minority(self) -> FaultRecord:
        leader = f"b{self._a_leader()}"
        zks = self._zks()
        minority = [leader, *self.rng.sample(zks, max(0, (len(zks) - 1) // 2))]
        majority = [n for n in self._brokers() + zks if n not in minority]
        return self._cut("majority-minority", minority, majority)

    def _start_controller_isolated(self) -> FaultRecord:
        ctl = f"b{self._controller()}"
        others = [n for n in self._brokers() + self._zks() if n != ctl]
        return self._cut("controller-isolated", [ctl], others)

    def _start_bridge_flap(
        self, cycles: int = 3, down: float = 1.5, up: float = 1.0
    ) -> FaultRecord:
        """Every link down and up `cycles` times; probes run while down (first cycle) and after."""
        rec = FaultRecord("bridge-flap", {"all": self.net.nodes}, self.now())
        b = self._brokers()
        rec.probes = [Probe(None, b[0], self.cluster.port_of(b[0])), Probe(b[0], b[1], 9092)]
        stop = threading.Event()

        def flap() -> None:
            for i in range(cycles):
                if i:
                    self.net.set_bridge(False)
                if stop.wait(down):
                    break
                self.net.set_bridge(True)
                if stop.wait(up):
                    break
            self.net.set_bridge(True)

        self.net.set_bridge(False)
        t = threading.Thread(target=flap, name="bridge-flap", daemon=True)

        def heal() -> None:
            stop.set()
            if t.is_alive():
                t.join()
            self.net.set_bridge(True)

        self._heal = heal
        self._after_probes = t.start  # the first down lasts through the probes
        return rec

    def _process(self, kind: str, node: str, stopper: Any) -> FaultRecord:
        action = kind.split("-")[0]
        if action == "kill":
            stopper.kill()
            self._heal = stopper.start
        else:
            stopper.pause()
            self._heal = stopper.resume
        return FaultRecord(kind, {action: [node]}, self.now())

    def _start_kill_leader(self) -> FaultRecord:
        i = self._a_leader()
        return self._process("kill-leader", f"b{i}", self.cluster.brokers[i])

    def _start_kill_others(self) -> FaultRecord:
        keep = self._a_leader()
        others = [self.cluster.brokers[i] for i in self.cluster.broker_ids if i != keep]
        for b in others:
            b.kill()

        def heal() -> None:
            threads = [threading.Thread(target=b.start) for b in others]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        self._heal = heal
        return FaultRecord("kill-others", {"kill": [f"b{b.broker_id}" for b in others]}, self.now())

    def _start_kill_controller(self) -> FaultRecord:
        i = self._controller()
        return self._process("kill-controller", f"b{i}", self.cluster.brokers[i])

    def _start_kill_zookeeper(self) -> FaultRecord:
        i = self.rng.choice(self.cluster.zk_ids)
        return self._process("kill-zookeeper", f"zk{i}", self.cluster.zk_servers[i])

    def _start_pause_leader(self) -> FaultRecord:
        i = self._a_leader()
        return self._process("pause-leader", f"b{i}", self.cluster.brokers[i])

    def _start_pause_controller(self) -> FaultRecord:
        i = self._controller()
        return self._process("pause-controller", f"b{i}", self.cluster.brokers[i])

    def _start_pause_zookeeper(self) -> FaultRecord:
        i = self.rng.choice(self.cluster.zk_ids)
        return self._process("pause-zookeeper", f"zk{i}", self.cluster.zk_servers[i])

    def _start_loss(self, percent: int = 20) -> FaultRecord:
        self.net.set_loss(percent)
        self._heal = lambda: self.net.set_loss(0)
        return FaultRecord("loss", {"all": self.net.nodes}, self.now(), note=f"{percent}% dropped")

    def _start_netem(self) -> FaultRecord:
        """Delay, loss and reordering with `tc netem` on every node's link, where the kernel has
        sch_netem; where it has not, the fault is recorded as not made (and says why)."""
        nodes = self.net.nodes
        spec = ["delay", "50ms", "20ms", "loss", "5%", "reorder", "25%", "50%"]
        first = self.net.namespaces[nodes[0]]
        probe = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                first,
                "tc",
                "qdisc",
                "add",
                "dev",
                "eth0",
                "root",
                "netem",
                *spec,
            ],
            capture_output=True,
            text=True,
        )
        if probe.returncode != 0:
            self._heal = None
            return FaultRecord(
                "netem", {}, self.now(), note=f"not made: {probe.stderr.strip() or 'tc failed'}"
            )
        for n in nodes[1:]:
            run(
                "tc",
                "qdisc",
                "add",
                "dev",
                "eth0",
                "root",
                "netem",
                *spec,
                ns=self.net.namespaces[n],
            )

        def heal() -> None:
            for n in nodes:
                run(
                    "tc",
                    "qdisc",
                    "del",
                    "dev",
                    "eth0",
                    "root",
                    ns=self.net.namespaces[n],
                    check=False,
                )

        self._heal = heal
        return FaultRecord("netem", {"all": nodes}, self.now(), note=" ".join(spec))

    # -- schedules ----------------------------------------------------------------------------

    def run_schedule(
        self,
        schedule: Iterable[tuple[str, float] | tuple[str, float, str | None]],
        recovered: Callable[[float], bool] | None = None,
        recovery_timeout: float = 30.0,
    ) -> None:
        """Each (kind, seconds[, target]): start it, hold it, heal it; then wait until
        `recovered(heal_time)` says the cluster took writes again (or `recovery_timeout` passes)."""
        for kind, hold, *target in schedule:
            try:
                self.start(kind, target[0] if target else None)
            except RuntimeError as exc:  # e.g. no leader or controller to aim at just now
                self.log(f"  {self.now():6.1f} s nemesis cannot start {kind}: {exc}")
                time.sleep(1)
                continue
            time.sleep(hold)  # the fault's duration is the point: nothing to wait for
            rec = self.heal()
            if recovered is not None and rec is not None and rec.healed is not None:
                healed_at = self.t0 + rec.healed
                deadline = time.monotonic() + recovery_timeout
                while not recovered(healed_at) and time.monotonic() < deadline:
                    time.sleep(0.1)

    def random_schedule(
        self, count: int, kinds: Sequence[str] = ALL_KINDS, hold: tuple[float, float] = (3.0, 10.0)
    ) -> list[tuple[str, float]]:
        """`count` faults drawn (seeded) from `kinds`, every kind once before any repeats."""
        out: list[tuple[str, float]] = []
        while len(out) < count:
            for kind in self.rng.sample(list(kinds), len(kinds)):
                out.append((kind, round(self.rng.uniform(*hold), 1)))
        return out[:count]
