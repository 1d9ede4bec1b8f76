"""Consumer processes for the KIP-848 tests (compat and cluster): each runs consumer_protocol_worker.py,
and `check_exclusive` replays their assignment callbacks to prove no partition was held twice.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("consumer_protocol_worker.py")


class Worker:
    """One consumer process and the JSON lines it printed."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        name: str,
        protocol: str,
        instance_id: str | None = None,
    ) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.killed_at: float | None = None
        static = [instance_id] if instance_id is not None else []
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), bootstrap, group, topic, name, protocol, *static],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except json.JSONDecodeError:
                continue

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        self._reader.join(10)

    def kill(self) -> None:
        self.killed_at = time.monotonic()
        self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)

    def assigned(self) -> set[int]:
        """The partitions it holds now, from its assignment callbacks."""
        held: set[int] = set()
        for e in list(self.events):
            if e["ev"] == "assign":
                held |= set(e["parts"])
            elif e["ev"] in ("revoke", "lost"):
                held -= set(e["parts"])
        return held

    def changes(self) -> list[tuple[str, list[int]]]:
        """Its assignment callbacks, in order."""
        return [
            (e["ev"], e["parts"])
            for e in list(self.events)
            if e["ev"] in ("assign", "revoke", "lost")
        ]

    def consumed(self) -> set[tuple[int, int]]:
        return {(e["p"], e["o"]) for e in list(self.events) if e["ev"] == "msg"}


def check_exclusive(workers: list[Worker]) -> int:
    """Replay every assignment change in time order: a partition is assigned to a member only when no
    live member holds it. Returns how many assignment changes were seen."""
    timeline: list[tuple[float, str, str, list[int]]] = []
    for w in workers:
        for e in w.events:
            if e["ev"] in ("assign", "revoke", "lost"):
                timeline.append((e["t"], w.name, e["ev"], e["parts"]))
        end = w.killed_at
        if end is not None:  # a SIGKILLed member holds nothing from then on
            timeline.append((end, w.name, "killed", []))
    timeline.sort(key=lambda x: x[0])
    owner: dict[int, str] = {}
    for _, who, ev, parts in timeline:
        if ev == "killed":
            owner = {p: o for p, o in owner.items() if o != who}
        elif ev == "assign":
            for p in parts:
                assert owner.get(p) in (None, who), (
                    f"partition {p} given to {who} while {owner[p]} held it"
                )
                owner[p] = who
        else:
            for p in parts:
                if owner.get(p) == who:
                    del owner[p]
    return len(timeline)


class BackgroundProducer:
    """A confluent-kafka producer writing numbered records round-robin over `partitions` until
    `stop()`; `acked` holds the (partition, offset) of every acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **conf: Any) -> None:
        self.acked: set[tuple[int, int]] = set()
        self._running = True
        self._thread = threading.Thread(
            target=self._run, args=(bootstrap, topic, partitions, conf), daemon=True
        )
        self._thread.start()

    def _run(self, bootstrap: str, topic: str, partitions: int, conf: dict[str, Any]) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.add((msg.partition(), msg.offset()))

        i = 0
        while self._running:
            p.produce(topic, str(i).encode(), partition=i % partitions, on_delivery=on_delivery)
            p.poll(0)
            i += 1
            time.sleep(0.005)
        p.flush(60)

    def stop(self) -> None:
        self._running = False
        self._thread.join(90)
