"""What `kafkalite reassign` computes, without I/O: Kafka's reassignment and topics-to-move JSON files, the
proposed placement of `generate`, the throttle configs of `execute`, the status of `verify` and the progress rows.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.cli.wire import CliError
from kafkalite.cluster.controller.election import PlacementError, assign_replicas

TP = tuple[str, int]
Assignment = dict[TP, list[int]]

# the throttle configs Kafka's reassignment tool sets and clears (broker- and topic-level)
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)


def tp_text(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def _load(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{what} is not valid JSON: {exc}") from None


def _version(doc: dict[str, Any], what: str) -> None:
    version = doc.get("version", 1)
    if version != 1:
        raise CliError(f"{what}: unsupported version {version!r} (only 1 is known)")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CliError(f"{what} must be an integer, got {json.dumps(value)}")
    return value


def parse_topics_to_move(text: str) -> list[str]:
    """{"topics": [{"topic": "foo"}, ...], "version": 1} -> the topic names, in file order, once each."""
    doc = _load(text, "the topics-to-move file")
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise CliError('the topics-to-move file needs {"topics": [{"topic": "name"}, ...]}')
    _version(doc, "the topics-to-move file")
    names: list[str] = []
    for entry in doc["topics"]:
        name = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise CliError(f'each entry of "topics" needs a "topic" name, got {json.dumps(entry)}')
        if name in names:
            raise CliError(f"topic {name!r} is listed twice in the topics-to-move file")
        names.append(name)
    if not names:
        raise CliError("the topics-to-move file lists no topic")
    return names


def parse_reassignment(text: str) -> Assignment:
    """Kafka's reassignment file: {"version": 1, "partitions": [{"topic", "partition", "replicas",
    "log_dirs" (optional, "any" per replica)}]} -> the target replicas of each partition."""
    doc = _load(text, "the reassignment file")
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise CliError('the reassignment file needs {"version": 1, "partitions": [...]}')
    _version(doc, "the reassignment file")
    out: Assignment = {}
    for entry in doc["partitions"]:
        if not isinstance(entry, dict):
            raise CliError(f'each entry of "partitions" must be an object, got {json.dumps(entry)}')
        missing = [k for k in ("topic", "partition", "replicas") if k not in entry]
        if missing:
            raise CliError(f"partition entry {json.dumps(entry)} lacks {', '.join(missing)}")
        topic = entry["topic"]
        if not isinstance(topic, str) or not topic:
            raise CliError(f"topic must be a name, got {json.dumps(topic)}")
        partition = _int(entry["partition"], f"partition of {topic}")
        tp = (topic, partition)
        replicas = entry["replicas"]
        if not isinstance(replicas, list):
            raise CliError(f"replicas of {tp_text(tp)} must be a list of broker ids")
        ids = [_int(r, f"a replica of {tp_text(tp)}") for r in replicas]
        if not ids:
            raise CliError(f"the replica list of {tp_text(tp)} is empty")
        if len(set(ids)) != len(ids):
            raise CliError(f"the replica list of {tp_text(tp)} has duplicates: {ids}")
        dirs = entry.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(ids):
                raise CliError(
                    f"log_dirs of {tp_text(tp)} must list one directory per replica ({len(ids)})"
                )
            specific = [d for d in dirs if d != "any"]
            if specific:
                raise CliError(
                    f"log_dirs of {tp_text(tp)} names {specific[0]!r}: moving a replica to a "
                    'chosen directory (AlterReplicaLogDirs) is not supported; use "any"'
                )
        if tp in out:
            raise CliError(f"partition {tp_text(tp)} is listed twice in the reassignment file")
        out[tp] = ids
    if not out:
        raise CliError("the reassignment file lists no partition")
    return out


def assignment_json(assignment: Mapping[TP, Sequence[int]]) -> str:
    """Kafka's reassignment JSON (one line, partitions sorted by topic and partition)."""
    parts = [
        {
            "topic": t,
            "partition": p,
            "replicas": list(assignment[(t, p)]),
            "log_dirs": ["any"] * len(assignment[(t, p)]),
        }
        for t, p in sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def parse_broker_list(text: str) -> list[int]:
    """--broker-list 1,2,3 -> [1, 2, 3] (each id once)."""
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--broker-list expects broker ids like 1,2,3, got {text!r}") from None
    if not ids:
        raise CliError("--broker-list is empty")
    dup = sorted({b for b in ids if ids.count(b) > 1})
    if dup:
        raise CliError(f"--broker-list names broker {dup[0]} twice")
    return ids


def propose(
    current: Mapping[TP, Sequence[int]],
    brokers: Mapping[int, str | None],
    rng: random.Random | None = None,
) -> Assignment:
    """Kafka's `--generate`: each topic placed anew over `brokers` (id -> rack, rack-aware when every
    broker has one) as topic creation would place it, keeping its partition count and the replication
    factor of its first partition."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(current):
        by_topic.setdefault(t, []).append(p)
    out: Assignment = {}
    for topic, parts in by_topic.items():
        rf = len(current[(topic, parts[0])])
        try:
            placed = assign_replicas(dict(brokers), len(parts), rf, rng=rng)
        except PlacementError as exc:
            raise CliError(f"cannot place topic {topic} (replication factor {rf}): {exc}") from None
        for i, p in enumerate(parts):
            out[(topic, p)] = list(placed[i])
    return out


# -- throttles ------------------------------------------------------------------------------------------


def moving(current: Mapping[TP, Sequence[int]], target: Mapping[TP, Sequence[int]]) -> list[TP]:
    """The partitions whose replica set changes (order aside, as Kafka throttles them)."""
    return sorted(tp for tp in target if set(target[tp]) != set(current.get(tp, ())))


def leader_throttles(
    current: Mapping[TP, Sequence[int]], target: Mapping[TP, Sequence[int]]
) -> dict[str, str]:
    """leader.replication.throttled.replicas per topic: partition:broker of every current replica of a
    moving partition (whichever of them leads serves the new replicas)."""
    out: dict[str, list[str]] = {}
    for t, p in moving(current, target):
        out.setdefault(t, []).extend(f"{p}:{b}" for b in current[(t, p)])
    return {t: ",".join(v) for t, v in out.items()}


def follower_throttles(
    current: Mapping[TP, Sequence[int]], target: Mapping[TP, Sequence[int]]
) -> dict[str, str]:
    """follower.replication.throttled.replicas per topic: partition:broker of every adding replica."""
    out: dict[str, list[str]] = {}
    for t, p in moving(current, target):
        adding = [b for b in target[(t, p)] if b not in current[(t, p)]]
        out.setdefault(t, []).extend(f"{p}:{b}" for b in adding)
    return {t: ",".join(v) for t, v in out.items() if v}


def reassigning_brokers(
    current: Mapping[TP, Sequence[int]], target: Mapping[TP, Sequence[int]]
) -> list[int]:
    """Every broker that holds or will hold a replica of a moving partition."""
    ids: set[int] = set()
    for tp in moving(current, target):
        ids.update(current[tp])
        ids.update(target[tp])
    return sorted(ids)


# -- verify ---------------------------------------------------------------------------------------------


def status_lines(
    target: Mapping[TP, Sequence[int]],
    current: Mapping[TP, Sequence[int]],
    ongoing: Iterable[TP],
) -> tuple[list[str], bool]:
    """Kafka's --verify report, one line per partition, and whether every partition is done."""
    active = set(ongoing)
    lines = ["Status of partition reassignment:"]
    for tp in sorted(target):
        if tp in active:
            lines.append(f"Reassignment of partition {tp_text(tp)} is still in progress.")
        elif list(current.get(tp, ())) == list(target[tp]):
            lines.append(f"Reassignment of partition {tp_text(tp)} is complete.")
        else:
            now = ",".join(map(str, current.get(tp, ())))
            want = ",".join(map(str, target[tp]))
            lines.append(
                f"There is no active reassignment of partition {tp_text(tp)}, but replica set is "
                f"{now} rather than {want}."
            )
    return lines, not (active & set(target))


# -- progress -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaProgress:
    """One adding replica of a moving partition: bytes it holds against its leader's."""

    tp: TP
    replica: int
    leader: int
    copied: int | None  # None: the replica has no log yet (or its broker did not answer)
    size: int | None  # the leader's partition size; None when unknown
    in_isr: bool

    @property
    def lag_bytes(self) -> int | None:
        if self.size is None:
            return None
        return max(0, self.size - (self.copied or 0))

    @property
    def fraction(self) -> float:
        if self.in_isr:
            return 1.0
        if not self.size:
            return 0.0 if self.copied is None else 1.0
        return min(1.0, (self.copied or 0) / self.size)


def progress_rows(
    adding: Mapping[TP, Sequence[int]],
    leaders: Mapping[TP, int],
    isr: Mapping[TP, Sequence[int]],
    sizes: Mapping[tuple[int, TP], int],
) -> list[ReplicaProgress]:
    """Per moving partition and adding replica: what it has copied of the leader's log (sizes come
    from DescribeLogDirs of each broker, keyed by (broker, partition))."""
    rows = []
    for tp in sorted(adding):
        leader = leaders.get(tp, -1)
        for r in adding[tp]:
            rows.append(
                ReplicaProgress(
                    tp=tp,
                    replica=r,
                    leader=leader,
                    copied=sizes.get((r, tp)),
                    size=sizes.get((leader, tp)) if leader >= 0 else None,
                    in_isr=r in isr.get(tp, ()),
                )
            )
    return rows


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
