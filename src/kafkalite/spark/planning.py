"""Planning of what each micro-batch and each Spark task reads: rate limits (maxOffsetsPerTrigger split
across partitions in proportion to their backlog, minOffsetsPerTrigger) and minPartitions splitting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from kafkalite.spark.offsets import TopicPartitionKey, sort_partitions


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [from_offset, until_offset) of one topic partition, read by one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


def backlog(start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int]) -> int:
    return sum(max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest)


def rate_limit(
    limit: int,
    start: Mapping[TopicPartitionKey, int],
    latest: Mapping[TopicPartitionKey, int],
) -> dict[TopicPartitionKey, int]:
    """End offsets admitting about `limit` records, each partition's share proportional to its backlog.

    A partition whose share is under one record still advances by one (so a long tail is never
    starved); otherwise shares round down, so the total never exceeds `limit` by more than the
    number of partitions with a sub-record share.
    """
    sizes = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out: dict[TopicPartitionKey, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        size = sizes[tp]
        if size == 0:
            out[tp] = end
            continue
        share = limit * size / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + step)
    return out


def plan_ranges(
    start: Mapping[TopicPartitionKey, int],
    end: Mapping[TopicPartitionKey, int],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Non-empty ranges from `start` to `end` per partition, split as Spark 3.5+ splits them.

    First a range holding more than max_records_per_partition offsets is cut into
    ceil(size / max_records_per_partition) pieces of nearly equal size; then, if there are still
    fewer ranges than min_partitions, a range gets ceil(size * min_partitions / total) pieces, so
    the number of tasks is at least min_partitions when there are enough offsets.
    """
    ranges = [
        OffsetRange(t, p, start[(t, p)], end[(t, p)])
        for t, p in sort_partitions(end)
        if (t, p) in start and end[(t, p)] > start[(t, p)]
    ]
    if max_records_per_partition:
        ranges = [
            piece
            for r in ranges
            for piece in _split(r, math.ceil(r.size / max_records_per_partition))
        ]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        out.extend(_split(r, max(1, math.ceil(r.size * min_partitions / total))))
    return out


def _split(r: OffsetRange, pieces: int) -> list[OffsetRange]:
    pieces = max(1, min(r.size, pieces))
    if pieces == 1:
        return [r]
    bounds = [r.from_offset + (r.size * i) // pieces for i in range(pieces + 1)]
    return [OffsetRange(r.topic, r.partition, bounds[i], bounds[i + 1]) for i in range(pieces)]
