"""The fetch filter on ShareFetch (issue 35): which acquired records are delivered (the filter selects them)
and which are archived unseen, and the acquired batches rewritten to hold only the delivered ones.

Pure: the handler acknowledges the rest as archived for the member (docs/fetch-filter.md says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkalite.coordinator.share_partition_types import AckBatch, AcknowledgeType, AcquiredRange
from kafkalite.filters import CompiledFilter, FilterStats, filter_records
from kafkalite.records import iter_batches


@dataclass(frozen=True, slots=True)
class FilteredAcquisition:
    records: bytes  # the acquired batches with only delivered records (valid RecordBatch v2)
    delivered: list[AcquiredRange]  # what the answer's AcquiredRecords say
    archived: list[tuple[int, int]]  # acquired offsets not delivered: (first, last) runs


def split_acquired(
    blob: bytes,
    flt: CompiledFilter,
    ranges: Sequence[AcquiredRange],
    stats: FilterStats | None = None,
) -> FilteredAcquisition:
    """Filter the acquired batches `blob` and split `ranges` into the offsets delivered (the records the
    filter selects, each keeping its delivery count) and the rest (non-matching records, and offsets
    with no record such as compaction gaps). Raises NotFilterable (legacy message sets) or
    DecodeError, as `filter_records` does: the caller then delivers unfiltered."""
    out = filter_records(blob, flt, None, stats)
    kept: set[int] = set()
    pos = 0
    for batch in iter_batches(out, allow_truncated_tail=True):
        if not batch.is_control and not batch.records_count:
            # the empty batch a Fetch keeps to move the consumer's offset on: a share consumer
            # has no fetch offset (archiving moves the share-partition on), so it is left out
            out = out[:pos] + out[pos + batch.size :]
            continue
        pos += batch.size
        if not batch.is_control:
            kept.update(r.offset for r in batch)
    delivered: list[AcquiredRange] = []
    archived: list[tuple[int, int]] = []
    for r in ranges:
        run_first = r.first_offset
        run_kept = r.first_offset in kept
        for offset in range(r.first_offset + 1, r.last_offset + 2):
            now_kept = offset in kept if offset <= r.last_offset else not run_kept
            if now_kept == run_kept:
                continue
            if run_kept:
                _extend(delivered, run_first, offset - 1, r.delivery_count)
            else:
                archived.append((run_first, offset - 1))
            run_first, run_kept = offset, now_kept
    return FilteredAcquisition(out if delivered else b"", delivered, archived)


def archive_batches(archived: Sequence[tuple[int, int]]) -> list[AckBatch]:
    """The member's acknowledgement of the records the filter left out: archived, as GAP offsets are
    (no dead letter, never delivered again)."""
    return [AckBatch(first, last, (int(AcknowledgeType.GAP),)) for first, last in archived]


def _extend(out: list[AcquiredRange], first: int, last: int, count: int) -> None:
    if out and out[-1].last_offset + 1 == first and out[-1].delivery_count == count:
        out[-1] = AcquiredRange(out[-1].first_offset, last, count)
    else:
        out.append(AcquiredRange(first, last, count))
