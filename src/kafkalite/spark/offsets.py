"""Offset specifications (earliest / latest / per-partition JSON / timestamps) and the Kafka-shaped
offset JSON the streaming source checkpoints: {"topic":{"0":23}}, topics and partitions in a fixed order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2
LATEST = -1

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    kind: "earliest" | "latest" | "offsets" (per partition, -2 earliest / -1 latest) |
    "timestamps" (per partition, ms) | "timestamp" (one ms value for every partition).
    strategy: what to do when no record has a timestamp >= the one asked ("error" or "latest").
    """

    kind: str
    offsets: dict[TopicPartitionKey, int] = field(default_factory=dict)
    timestamp: int | None = None
    strategy: str = "error"


def _per_partition_json(raw: str, name: str) -> dict[TopicPartitionKey, int]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    ok = isinstance(parsed, dict) and all(
        isinstance(ps, dict)
        and all(
            isinstance(v, int) and not isinstance(v, bool) and str(k).lstrip("-").isdigit()
            for k, v in ps.items()
        )
        for ps in parsed.values()
    )
    if not ok:
        raise ValueError(
            f'Option \'{name}\' must be "earliest", "latest" or JSON like '
            f'{{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {raw!r}'
        )
    assert isinstance(parsed, dict)
    return {(str(t), int(p)): int(v) for t, ps in parsed.items() for p, v in ps.items()}


def parse_offset_spec(raw: str | None, name: str, *, default: str) -> OffsetSpec:
    if raw is None:
        return OffsetSpec(default)
    text = raw.strip()
    low = text.lower()
    if low in ("earliest", "latest"):
        return OffsetSpec(low)
    offsets = _per_partition_json(text, name)
    for (t, p), off in offsets.items():
        if off < EARLIEST:
            raise ValueError(f"Option '{name}': offset {off} for {t}-{p} is not valid")
    return OffsetSpec("offsets", offsets=offsets)


def parse_timestamp_spec(raw: str, name: str, strategy: str) -> OffsetSpec:
    text = raw.strip()
    if text.lstrip("-").isdigit():
        ts = int(text)
        if ts < 0:
            raise ValueError(f"Option '{name}' must be a non-negative timestamp in ms, got {raw!r}")
        return OffsetSpec("timestamp", timestamp=ts, strategy=strategy)
    stamps = _per_partition_json(text, name)
    return OffsetSpec("timestamps", offsets=stamps, strategy=strategy)


def sort_partitions(keys: Any) -> list[TopicPartitionKey]:
    return sorted(keys, key=lambda tp: (tp[0], tp[1]))


def to_offset_dict(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    """{(topic, partition): offset} -> {"topic": {"0": offset}} with topics and partitions sorted."""
    out: dict[str, dict[str, int]] = {}
    for t, p in sort_partitions(offsets):
        out.setdefault(t, {})[str(p)] = int(offsets[(t, p)])
    return out


def from_offset_dict(data: Mapping[str, Any] | None) -> dict[TopicPartitionKey, int]:
    """The inverse of `to_offset_dict` (accepts what JSON parsing of a checkpoint gives back)."""
    out: dict[TopicPartitionKey, int] = {}
    for t, ps in (data or {}).items():
        if not isinstance(ps, Mapping):
            raise ValueError(f"offset JSON for topic {t!r} must be an object, got {ps!r}")
        for p, off in ps.items():
            out[(str(t), int(p))] = int(off)
    return out


def to_offset_json(offsets: Mapping[TopicPartitionKey, int]) -> str:
    return json.dumps(to_offset_dict(offsets), separators=(",", ":"))
