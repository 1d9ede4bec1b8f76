"""The acknowledged-writes check under a nemesis: an idempotent acks=all writer that keeps each record's
(partition, offset) and ack time, the exactly-once read-back, and liveness after every heal.

Liveness is pure: `recovery_after_heals` turns ack times and fault records into, per heal and per
partition, the wait for the first ack after the heal and the longest stretch without one until the next fault.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.jepsen.nemesis import FaultRecord

QUIET = {"log_level": 0}


class AckedWriter(threading.Thread):
    """Unique values round-robin over `partitions`, acks=all with idempotence; at most `in_flight`
    unacknowledged per partition, so one stuck partition does not starve the others."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        in_flight: int = 200,
        message_timeout_ms: int = 120_000,
    ) -> None:
        super().__init__(name=f"writer-{topic}", daemon=True)
        self.topic, self.partitions, self.in_flight = topic, partitions, in_flight
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": message_timeout_ms,
                **QUIET,
            }
        )
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.ack_times: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.outstanding = dict.fromkeys(range(partitions), 0)
        self.failed = 0
        self.errors: dict[str, int] = {}
        self.stop = threading.Event()

    def _done(self, err: Any, msg: Any) -> None:
        p = msg.partition()
        self.outstanding[p] -= 1
        if err is None:
            self.acked[msg.value()] = (p, msg.offset())
            self.ack_times[p].append(time.monotonic())
        else:
            self.failed += 1
            self.errors[err.name()] = self.errors.get(err.name(), 0) + 1

    def acked_since(self, t: float) -> bool:
        """Whether every partition has an acknowledgement at or after monotonic time `t`."""
        return all(times and times[-1] >= t for times in self.ack_times.values())

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            open_ = [p for p, k in self.outstanding.items() if k < self.in_flight]
            if not open_:
                self.producer.poll(0.05)
                continue
            for p in open_:
                self.outstanding[p] += 1
                self.producer.produce(
                    self.topic, f"v{n:09d}".encode(), partition=p, on_delivery=self._done
                )
                n += 1
            self.producer.poll(0.005)
        self.producer.flush(120)


def read_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes]]:
    """Every record of the topic, from offset 0 up to each partition's high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-checker", **QUIET})
    ends = {
        p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(partitions)
    }
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    last = dict.fromkeys(ends, -1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(last[p] + 1 < ends[p] for p in ends):
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        p, o, v = m.partition(), m.offset(), m.value()
        assert p is not None and o is not None and v is not None  # a record, not an event
        got.append((p, o, v))
        last[p] = max(last[p], o)
    c.close()
    return got


def exactly_once(
    acked: dict[bytes, tuple[int, int]], got: list[tuple[int, int, bytes]]
) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """(lost, duplicated, misplaced): acknowledged values never read, values read more than once,
    and acknowledged values read at another (partition, offset) than their ack said."""
    seen: dict[bytes, int] = {}
    for _p, _o, v in got:
        seen[v] = seen.get(v, 0) + 1
    lost = [v for v in acked if v not in seen]
    duplicated = [v for v, n in seen.items() if n > 1]
    misplaced = [v for p, o, v in got if v in acked and acked[v] != (p, o)]
    return lost, duplicated, misplaced


@dataclass
class Recovery:
    kind: str
    healed: float  # seconds since the nemesis began
    first_ack: dict[int, float | None]  # per partition: seconds from the heal to its first ack
    longest_gap: dict[int, float]  # per partition: the longest stretch without an ack in the window


def recovery_after_heals(
    ack_times: dict[int, list[float]], faults: Sequence[FaultRecord], t0: float, end: float
) -> list[Recovery]:
    """For each healed fault: the window from its heal to the next fault's start (or `end`, a
    monotonic time); `ack_times` are monotonic, fault times are seconds since `t0`."""
    out = []
    for i, f in enumerate(faults):
        if f.healed is None:
            continue
        start = t0 + f.healed
        stop = t0 + faults[i + 1].started if i + 1 < len(faults) else end
        first: dict[int, float | None] = {}
        gaps: dict[int, float] = {}
        for p, times in ack_times.items():
            inside = times[bisect.bisect_left(times, start) : bisect.bisect_right(times, stop)]
            first[p] = inside[0] - start if inside else None
            marks = [start, *inside, stop]
            gaps[p] = max((b - a for a, b in itertools.pairwise(marks)), default=0.0)
        out.append(Recovery(f.kind, f.healed, first, gaps))
    return out


def recovery_table(recoveries: Sequence[Recovery]) -> str:
    """One line per heal: the kind, then per partition `first ack / longest gap` in seconds."""
    lines = []
    for r in recoveries:
        cells = " ".join(
            f"p{p}:{'never' if r.first_ack[p] is None else f'{r.first_ack[p]:.1f}'}/{r.longest_gap[p]:.1f}"
            for p in sorted(r.first_ack)
        )
        lines.append(
            f"  heal of {r.kind:<20} at {r.healed:6.1f} s  first ack/longest gap (s): {cells}"
        )
    return "\n".join(lines)
