"""The Fetch handler's filtered branch (issue 35): the expression of request tag 10035 compiled once (cached
by its text), and each partition's read region replaced by its filtered, still valid, batches.

Unfiltered fetches never come here: their regions leave by sendfile as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kafkalite.broker.stats import FilterCounters
from kafkalite.cluster.fetch_messages import PartitionReadResult
from kafkalite.filters import (
    CompiledFilter,
    FilterError,
    FilterStats,
    NotFilterable,
    compile_filter,
    filter_records,
)
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.compression import CompressionError

log = logging.getLogger("kafkalite.broker.fetch")


def compile_request_filter(
    expression: str, client: str
) -> tuple[CompiledFilter | None, str | None]:
    """(compiled filter, None) or (None, the message for an INVALID_REQUEST answer)."""
    try:
        return compile_filter(expression), None
    except FilterError as exc:
        log.info("fetch filter from %s refused: %s", client, exc)
        return None, f"invalid fetch filter: {exc}"


def apply_filter(
    flt: CompiledFilter,
    partitions: Sequence[PartitionReadResult],
    topic: str,
    counters: FilterCounters,
) -> tuple[bool, int]:
    """Filter each partition's region in place (`records` set to the rewritten blob, `region` cleared).
    Returns (every partition was filtered, bytes saved against the unfiltered answer). A partition
    that cannot be rewritten (legacy message sets, a batch that does not decode) keeps its region and
    the answer then does not claim it filtered, so the client filters locally."""
    all_filtered = True
    saved = 0
    for pr in partitions:
        region = pr.region
        if region is None:
            continue
        raw = region.read_bytes()
        stats = FilterStats()
        try:
            out = filter_records(raw, flt, pr.aborted_transactions, stats)
        except NotFilterable:
            all_filtered = False
            continue
        except (DecodeError, CompressionError) as exc:
            log.warning(
                "fetch filter on %s-%d sends unfiltered: %s", topic, pr.partition_index, exc
            )
            all_filtered = False
            continue
        pr.region = None
        pr.records = out
        saved += len(raw) - len(out)
        c = counters
        c.bytes_scanned += len(raw)
        c.bytes_sent += len(out)
        c.batches_kept += stats.batches_kept
        c.batches_dropped += stats.batches_dropped
        c.batches_decoded += stats.batches_decoded
    return all_filtered, saved
