"""The anomaly checker: pure functions from a history to counts of lost, duplicated, unexpected, misplaced,
backward, aborted-read and cyclic operations; the table that prints them; liveness after each heal.

History conventions the checker reads (written by `jepsen.workloads`):
- a client op's value is a list of micro-ops, ("send", key, value, offset|None) and
  ("poll", key, [(offset, value), ...]); an ok "send" is an acknowledged write; an ok "txn" is a
  transaction whose `extra["txn"]` says "commit" or "abort"; a failed "txn" did not commit; info is
  unknown (and an invoke with no completion counts as info);
- `extra["isolation"]` = "read_committed" on polls of a read_committed consumer;
- `extra["final"]` = True on the final full read, the ground truth of what is in the log;
- `extra["epoch"]`: a consumer's assignment generation; polls compare offsets only within one;
- `extra["ends"]` = {key: end offset} the broker reported for the polled partitions, when known;
- `extra["group"]` on a read-process-write transaction: its consumer group, whose committed
  transactions must consume each record once.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.jepsen.cycles import Read, build_graph, find_cycles
from kafkalite.jepsen.history import Op

ANOMALIES = (
    "lost-write",
    "duplicate",
    "unexpected-value",
    "inconsistent-offset",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "aborted-read",
    "double-processing",
    "G0",
    "G1c",
    "G-single",
)
EXAMPLES = 5  # kept per anomaly


@dataclass
class Report:
    """What the checker found: per anomaly a count and a few examples; the op counts."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ANOMALIES, 0))
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    op_counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (f, type)
    unread: int = 0  # acknowledged writes no read could have reached (no final read of their key)
    # cycles Kafka's transaction model allows, shown apart and not counted:
    # "G2": two rw edges or more; polls of several partitions are no snapshot, so two consumers may
    #   each miss what the other saw;
    allowed: Counter[str] = field(default_factory=Counter)
    allowed_examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def allow(self, kind: str, example: str) -> None:
        self.allowed[kind] += 1
        if len(self.allowed_examples[kind]) < EXAMPLES:
            self.allowed_examples[kind].append(example)

    def found(self, anomaly: str, example: str) -> None:
        self.counts[anomaly] += 1
        if len(self.examples[anomaly]) < EXAMPLES:
            self.examples[anomaly].append(example)

    @property
    def valid(self) -> bool:
        return not any(self.counts.values())


@dataclass(frozen=True)
class Completed:
    """A client operation: its invoke and completion (None while it never completed: info)."""

    invoke: Op
    done: Op | None

    @property
    def index(self) -> int:
        return self.done.index if self.done else self.invoke.index

    @property
    def type(self) -> str:
        return self.done.type if self.done else "info"

    @property
    def value(self) -> list[Any]:
        return list((self.done or self.invoke).value or [])

    @property
    def extra(self) -> dict[str, Any]:
        return (self.done or self.invoke).extra

    @property
    def status(self) -> str:
        """'committed', 'aborted' (did not take effect) or 'unknown'."""
        if self.type == "info":
            return "unknown"
        if self.type == "fail":
            return "aborted"
        if self.invoke.f == "txn" and self.extra.get("txn") == "abort":
            return "aborted"
        return "committed"


def pair(ops: Iterable[Op]) -> list[Completed]:
    """Each client invoke with the next completion of the same process, in completion order."""
    pending: dict[int | str, Op] = {}
    out: list[Completed] = []
    for op in ops:
        if op.process == "nemesis":
            continue
        if op.type == "invoke":
            if op.process in pending:  # an invoke never completed: the earlier one is info
                out.append(Completed(pending[op.process], None))
            pending[op.process] = op
        elif op.process in pending:
            out.append(Completed(pending.pop(op.process), op))
    out.extend(Completed(inv, None) for inv in pending.values())
    return out


def _sends(c: Completed) -> list[tuple[str, int, int | None]]:
    return [(m[1], int(m[2]), m[3]) for m in c.value if m and m[0] == "send"]


def _polls(c: Completed) -> list[tuple[str, list[tuple[int, int]]]]:
    return [(m[1], [(int(o), int(v)) for o, v in m[2]]) for m in c.value if m and m[0] == "poll"]


def check(ops: Iterable[Op], *, rw_from_every_poll: bool = False) -> Report:
    """Every anomaly of the history, counted."""
    ops = list(ops)
    report = Report()
    done = pair(ops)
    for c in done:
        report.op_counts[(c.invoke.f, c.type)] += 1

    attempted: set[int] = set()
    written: dict[int, tuple[Completed, str, int | None]] = {}  # value -> (op, key, offset)
    for c in done:
        for m in c.invoke.value or []:
            if m and m[0] == "send":
                attempted.add(int(m[2]))
        for key, v, off in _sends(c):
            written[v] = (c, key, off)

    # every place a value was seen: polls and acknowledged sends
    at: dict[tuple[str, int], set[int]] = defaultdict(set)  # (key, offset) -> values
    where: dict[int, set[tuple[str, int]]] = defaultdict(set)  # value -> (key, offset)
    read_values: set[int] = set()
    max_read: dict[str, int] = {}
    final_keys: set[str] = set()
    reads: list[tuple[Completed, str, list[tuple[int, int]]]] = []
    for c in done:
        if c.type == "ok":
            for key, v, off in _sends(c):
                if off is not None and off >= 0:
                    at[(key, off)].add(v)
                    where[v].add((key, off))
            for key, recs in _polls(c):
                reads.append((c, key, recs))
                if c.extra.get("final"):
                    final_keys.add(key)
                for off, v in recs:
                    at[(key, off)].add(v)
                    where[v].add((key, off))
                    read_values.add(v)
                    max_read[key] = max(max_read.get(key, -1), off)

    for v in sorted(written):
        c, key, off = written[v]
        if c.status != "committed" or v in read_values:
            continue
        if key in final_keys or (off is not None and max_read.get(key, -1) > off):
            report.found("lost-write", f"value {v} to {key} at offset {off}, op {c.index}")
        else:
            report.unread += 1
    for v in sorted(where):
        if len(where[v]) > 1:
            report.found("duplicate", f"value {v} at {sorted(where[v])}")
    for v in sorted(read_values - attempted):
        report.found("unexpected-value", f"value {v} at {sorted(where[v])}")
    for (key, off), vs in sorted(at.items()):
        if len(vs) > 1:
            report.found("inconsistent-offset", f"{key} offset {off} holds {sorted(vs)}")

    _monotonic(done, reads, report)
    for c, key, recs in reads:
        if c.extra.get("isolation") != "read_committed":
            continue
        for off, v in recs:
            w = written.get(v)
            if w is not None and w[0].status == "aborted":
                report.found(
                    "aborted-read", f"op {c.index} read {v} at {key}/{off}, of op {w[0].index}"
                )

    _double_processing(reads, report)
    _cycles(done, written, at, reads, report, rw_from_every_poll)
    return report


def _double_processing(
    reads: list[tuple[Completed, str, list[tuple[int, int]]]], report: Report
) -> None:
    """Exactly-once read-process-write: a record that two committed transactions of one consumer group
    (extra "group") both consumed was processed twice."""
    by: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    for c, key, recs in reads:
        group = c.extra.get("group")
        if group is None or c.invoke.f != "txn" or c.status != "committed":
            continue
        for off, _ in recs:
            by[(group, key, off)].append(c.index)
    for (group, key, off), txns in sorted(by.items()):
        if len(set(txns)) > 1:
            report.found("double-processing", f"group {group} {key}/{off} in committed ops {txns}")


def _monotonic(
    done: list[Completed], reads: list[tuple[Completed, str, list[tuple[int, int]]]], report: Report
) -> None:
    last_send: dict[tuple[int | str, str], tuple[int, int]] = {}
    for c in done:
        if c.type != "ok":
            continue
        for key, _, off in _sends(c):
            if off is None or off < 0:
                continue
            k = (c.invoke.process, key)
            if k in last_send and off <= last_send[k][0]:
                prev_off, prev_op = last_send[k]
                report.found(
                    "nonmonotonic-send",
                    f"process {k[0]} {key}: offset {off} (op {c.index}) after {prev_off} (op {prev_op})",
                )
            last_send[k] = (off, c.index)
    last_poll: dict[tuple[int | str, Any, str], tuple[int, int]] = {}
    for c, key, recs in reads:
        if c.extra.get("final"):
            continue
        pk = (c.invoke.process, c.extra.get("epoch"), key)
        for off, _ in recs:
            if pk in last_poll and off <= last_poll[pk][0]:
                prev_off, prev_op = last_poll[pk]
                report.found(
                    "nonmonotonic-poll",
                    f"process {pk[0]} {key}: offset {off} (op {c.index}) after {prev_off} (op {prev_op})",
                )
            last_poll[pk] = (off, c.index)


def _cycles(
    done: list[Completed],
    written: dict[int, tuple[Completed, str, int | None]],
    at: dict[tuple[str, int], set[int]],
    reads: list[tuple[Completed, str, list[tuple[int, int]]]],
    report: Report,
    rw_from_every_poll: bool,
) -> None:
    """G0 / G1c / G-single / G2 over committed (or observed) transactions; final reads take no part."""
    seen = {v for vs in at.values() for v in vs}
    spans = {c.index: (c.invoke.time, c.done.time if c.done else float("inf")) for c in done}
    writer: dict[int, int] = {}
    for v, (c, _, _) in written.items():
        if c.status == "committed" or (c.status == "unknown" and v in seen):
            writer[v] = c.index
    order: dict[str, list[int]] = defaultdict(list)
    placed: set[int] = set()  # a duplicated value takes its first offset
    for (key, _off), vs in sorted(at.items()):
        if len(vs) == 1:  # an offset holding two values has no order; counted above
            (v,) = vs
            if v in writer and v not in placed:
                placed.add(v)
                order[key].append(v)
    graph_reads = [
        Read(c.index, key, tuple(recs), _at_end(c, key, recs))
        for c, key, recs in reads
        if not c.extra.get("final") and c.status == "committed"
    ]
    for cyc in find_cycles(
        build_graph(order, writer, graph_reads, rw_from_every_poll=rw_from_every_poll, spans=spans)
    ):
        path = " ".join(
            [str(cyc.ops[0])] + [f"-{k}-> {b}" for k, b in zip(cyc.edges, cyc.ops[1:], strict=True)]
        )
        if cyc.kind == "G2":
            report.allow("G2", path)
        else:
            report.found(cyc.kind, path)


def _at_end(c: Completed, key: str, recs: list[tuple[int, int]]) -> bool:
    end = (c.extra.get("ends") or {}).get(key)
    return end is not None and bool(recs) and recs[-1][0] + 1 >= int(end)


def render(
    report: Report, liveness_rows: list[tuple[float, dict[str, float]]] | None = None
) -> str:
    """The anomaly table (every row, zeros too), the operation counts and, if given, liveness."""
    lines = [f"{'anomaly':<28}{'count':>8}"]
    lines.append("-" * 30)
    for name in ANOMALIES:
        lines.append(f"{name:<28}{report.counts[name]:>8}")
        lines.extend(f"    e.g. {ex}" for ex in report.examples.get(name, []))
    lines.append(f"{'(unread, not counted)':<28}{report.unread:>8}")
    for kind in ("G2",):
        lines.append(f"{'(' + kind + ', allowed)':<28}{report.allowed[kind]:>8}")
        lines.extend(f"    e.g. {ex}" for ex in report.allowed_examples.get(kind, []))
    lines.append("")
    lines.append(f"{'operation':<12}{'ok':>8}{'fail':>8}{'info':>8}")
    for f in sorted({f for f, _ in report.op_counts}):
        row = [report.op_counts[(f, t)] for t in ("ok", "fail", "info")]
        lines.append(f"{f:<12}" + "".join(f"{n:>8}" for n in row))
    if liveness_rows is not None:
        lines.append("")
        lines.append("longest stretch without an ok send after each heal (s), per partition")
        for healed, per_key in liveness_rows:
            worst = max(per_key.values(), default=0.0)
            cells = ", ".join(f"{k}={s:.1f}" for k, s in sorted(per_key.items()))
            lines.append(f"  heal at {healed:7.1f}s: max {worst:.1f}  [{cells}]")
    return "\n".join(lines)


def liveness(
    ops: Iterable[Op], heals: list[float] | None = None
) -> list[tuple[float, dict[str, float]]]:
    """After each heal, per key: the longest stretch without an acknowledged (committed) send, from the
    heal to the next fault's start or the workload's last completed send. Heals default to the nemesis' "stop" ops."""
    ops = list(ops)
    # the workload's end: its last send's completion (not the final reads, nor the workers' shutdown)
    sends_done = [
        o.time
        for o in ops
        if o.process != "nemesis" and o.type != "invoke" and o.f in ("send", "txn")
    ]
    end = max(sends_done, default=ops[-1].time if ops else 0.0)
    if heals is None:
        heals = [o.time for o in ops if o.process == "nemesis" and o.f == "stop"]
    starts = sorted(o.time for o in ops if o.process == "nemesis" and o.f == "start")
    acks: dict[str, list[float]] = defaultdict(list)
    keys: set[str] = set()
    for c in pair(ops):
        for key, _, _ in _sends(c):
            keys.add(key)
        if c.type == "ok" and c.status == "committed" and c.done is not None:
            for key, _, _ in _sends(c):
                acks[key].append(c.done.time)
    rows: list[tuple[float, dict[str, float]]] = []
    for h in sorted(heals):
        until = max(h, min((s for s in starts if s > h), default=end))
        per_key: dict[str, float] = {}
        for key in sorted(keys):
            times = sorted(t for t in acks[key] if h <= t <= until)
            points = [h, *times, until]
            per_key[key] = max(b - a for a, b in itertools.pairwise(points))
        rows.append((h, per_key))
    return rows
