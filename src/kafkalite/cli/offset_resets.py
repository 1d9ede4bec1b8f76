"""Offset resets for `kafkalite groups reset-offsets`, as kafka-consumer-groups.sh plans them: the partitions
chosen, each new offset under a reset mode clamped to the log, and committing them (no printing, no argparse).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kafkalite.cli.group_ops import (
    COORDINATOR_ERRORS,
    EARLIEST,
    LATEST,
    TP,
    Cluster,
    committed_offsets,
    describe_state,
    list_offsets,
    retrying,
    topic_partitions,
)
from kafkalite.cli.wire import CliError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.offsets import OffsetCommitRequest


@dataclass
class OffsetReset:
    topic: str
    partition: int
    current: int | None
    new: int


@dataclass
class ResetSpec:
    """How to compute new offsets: exactly one of the modes of kafka-consumer-groups."""

    mode: str  # earliest | latest | offset | datetime | shift
    value: int = 0  # the offset, the epoch-ms timestamp or the shift


def parse_datetime(text: str) -> int:
    """ISO-8601 (a missing zone means local time) or plain epoch milliseconds -> epoch ms."""
    s = text.strip()
    if s.lstrip("-").isdigit():
        return int(s)
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise CliError(
            f"--to-datetime expects ISO-8601 like 2024-05-01T12:00:00 or 2024-05-01T12:00:00+00:00, got {text!r}"
        ) from None
    if dt.tzinfo is None:
        dt = dt.astimezone()
    return int(dt.timestamp() * 1000)


def parse_topic_specs(specs: list[str]) -> list[tuple[str, list[int] | None]]:
    """`T` (every partition) or `T:0,1,2`."""
    out: list[tuple[str, list[int] | None]] = []
    for spec in specs:
        name, sep, parts = spec.partition(":")
        if not name:
            raise CliError(f"--topic {spec!r}: missing topic name")
        if not sep:
            out.append((name, None))
            continue
        try:
            ps = sorted({int(x) for x in parts.split(",") if x.strip()})
        except ValueError:
            raise CliError(
                f"--topic {spec!r}: partitions must be integers, like {name}:0,1"
            ) from None
        if not ps:
            raise CliError(f"--topic {spec!r}: no partitions after ':'")
        out.append((name, ps))
    return out


def _clamp(tp: TP, new: int, lo: int | None, hi: int | None, warn: Callable[[str], None]) -> int:
    t, p = tp
    if lo is not None and new < lo:
        warn(f"new offset {new} of {t}-{p} is below the earliest offset {lo}: using {lo}")
        return lo
    if hi is not None and new > hi:
        warn(f"new offset {new} of {t}-{p} is past the log end offset {hi}: using {hi}")
        return hi
    return new


def plan_reset(
    cluster: Cluster,
    group: str,
    topics: list[tuple[str, list[int] | None]] | None,
    spec: ResetSpec,
    warn: Callable[[str], None] = lambda msg: print(f"warning: {msg}", file=sys.stderr),
) -> tuple[str, list[OffsetReset]]:
    """The group's state and the offsets it would get. `topics=None` means every topic with a commit.
    Refused (CliError) unless the group is Empty or does not exist, as Kafka does."""
    state = describe_state(cluster, group)
    if state not in ("Empty", "Dead"):
        raise CliError(
            f"offsets of group {group!r} can only be reset while it is inactive (Empty), "
            f"but it is {state}: stop its consumers first"
        )
    current = committed_offsets(cluster, group)
    tps = choose_partitions(
        cluster,
        topics,
        current,
        f"group {group!r} has no committed offsets; name the topics with --topic",
    )
    return state, plan_new_offsets(cluster, group, tps, current, spec, warn)


def choose_partitions(
    cluster: Cluster,
    topics: list[tuple[str, list[int] | None]] | None,
    current: dict[TP, int],
    none_message: str,
) -> list[TP]:
    """The partitions a reset covers: those of `current` when `topics` is None, else the named ones
    (every partition of a topic named without any), checked against the cluster's metadata."""
    if topics is None:
        if not current:
            raise CliError(none_message)
        return sorted(current)
    layout = topic_partitions(cluster, [t for t, _ in topics])
    chosen: set[TP] = set()
    for t, ps in topics:
        have = sorted(layout[t])
        for p in ps if ps is not None else have:
            if p not in layout[t]:
                raise CliError(f"topic {t!r} has no partition {p} (partitions 0..{len(have) - 1})")
            chosen.add((t, p))
    return sorted(chosen)


def plan_new_offsets(
    cluster: Cluster,
    group: str,
    tps: list[TP],
    current: dict[TP, int],
    spec: ResetSpec,
    warn: Callable[[str], None],
    what: str = "committed offset",
) -> list[OffsetReset]:
    """Each partition's new offset under `spec`, clamped to the log; `current` is what `--shift-by`
    moves (the committed offset, or a share group's start offset)."""
    earliest = list_offsets(cluster, tps, EARLIEST)
    latest = list_offsets(cluster, tps, LATEST)
    if spec.mode == "datetime":
        at_time = list_offsets(cluster, tps, spec.value)
    plan = []
    for tp in tps:
        lo, hi = earliest[tp], latest[tp]
        if spec.mode == "earliest":
            new = lo
        elif spec.mode == "latest":
            new = hi
        elif spec.mode == "offset":
            new = _clamp(tp, spec.value, lo, hi, warn)
        elif spec.mode == "shift":
            if tp not in current:
                raise CliError(
                    f"cannot shift {tp[0]}-{tp[1]}: group {group!r} has no {what} for it"
                )
            new = _clamp(tp, current[tp] + spec.value, lo, hi, warn)
        elif spec.mode == "datetime":
            found = at_time[tp]
            new = (
                found if found is not None and found >= 0 else hi
            )  # nothing that late: the log end
        else:
            raise CliError(f"unknown reset mode {spec.mode!r}")
        if new is None:
            raise CliError(f"offsets of {tp[0]}-{tp[1]} are not available")
        plan.append(OffsetReset(tp[0], tp[1], current.get(tp), new))
    return plan


def execute_reset(cluster: Cluster, group: str, plan: list[OffsetReset]) -> None:
    """Commit the planned offsets as a standalone consumer would (generation -1, no member id)."""
    cls = OffsetCommitRequest
    by_topic: dict[str, list[OffsetReset]] = {}
    for r in plan:
        by_topic.setdefault(r.topic, []).append(r)
    t_cls = cls.OffsetCommitRequestTopic
    req = cls(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            t_cls(
                name=t,
                partitions=[
                    t_cls.OffsetCommitRequestPartition(
                        partition_index=r.partition,
                        committed_offset=r.new,
                        committed_leader_epoch=-1,
                        commit_timestamp=-1,
                        committed_metadata="",
                    )
                    for r in rs
                ],
            )
            for t, rs in by_topic.items()
        ],
    )

    def call() -> tuple[int, Any]:
        resp = cluster.coordinator(group).send(req)
        errors = [
            (t.name, p.partition_index, p.error_code)
            for t in resp.topics
            for p in t.partitions
            if p.error_code
        ]
        coord = [e for e in errors if e[2] in COORDINATOR_ERRORS]
        return (coord[0][2] if coord else 0), errors

    errors = retrying(call, f"commit offsets of group {group}")
    if errors:
        if any(code == ErrorCode.UNKNOWN_MEMBER_ID for _, _, code in errors):
            raise CliError(
                f"group {group!r} became active while resetting: offsets not committed "
                "(UNKNOWN_MEMBER_ID); stop its consumers and try again"
            )
        detail = ", ".join(f"{t}-{p}: {ErrorCode.name_of(code)}" for t, p, code in errors)
        raise CliError(f"commit offsets of group {group!r} failed: {detail}")
