"""The hardened source's pure parts: option checks (min <= max, fetchOffset.*, group ids), Spark 3.5's
maxRecordsPerPartition splitting, offset-lookup retries, bounded client timeouts, read_committed decoding."""

from __future__ import annotations

import logging

import pytest

from kafkalite.records.batch import build_batch
from kafkalite.records.control import build_end_txn_marker_batch
from kafkalite.spark.columnar import Columns, decode_blob
from kafkalite.spark.kafkaio import (
    DATA_LOSS_SKIPPED,
    DataLossError,
    bounded_client,
    report_data_loss,
    with_retries,
)
from kafkalite.spark.options import parse_source_options
from kafkalite.spark.planning import OffsetRange, plan_ranges

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a"}


def test_min_offsets_per_trigger_above_max_is_refused():
    with pytest.raises(ValueError, match=r"'minOffsetsPerTrigger' \(50\) must not be greater"):
        parse_source_options(
            {**BASE, "minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"}, streaming=True
        )
    ok = parse_source_options(
        {**BASE, "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "10"}, streaming=True
    )
    assert (ok.min_offsets_per_trigger, ok.max_offsets_per_trigger) == (10, 10)
    # batch queries ignore the trigger options, as Spark does
    parse_source_options(
        {**BASE, "minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"}, streaming=False
    )


def test_new_options_are_parsed_and_validated():
    opts = parse_source_options(
        {
            **BASE,
            "maxRecordsPerPartition": "1000",
            "fetchOffset.numRetries": "0",
            "fetchOffset.retryIntervalMs": "250",
            "groupIdPrefix": "dash",
            "kafka.group.id": "fixed",
        },
        streaming=True,
    )
    assert opts.max_records_per_partition == 1000
    assert (opts.fetch_offset_num_retries, opts.fetch_offset_retry_interval_ms) == (0, 250)
    assert (opts.group_id, opts.group_id_prefix) == ("fixed", "dash")
    assert opts.client["group.id"] == "fixed"  # kafka.* pass through unchanged
    defaults = parse_source_options(BASE, streaming=True)
    assert (defaults.fetch_offset_num_retries, defaults.fetch_offset_retry_interval_ms) == (3, 10)
    assert defaults.group_id is None and defaults.group_id_prefix is None
    for name, bad in (
        ("maxRecordsPerPartition", "0"),
        ("fetchOffset.numRetries", "-1"),
        ("fetchOffset.retryIntervalMs", "x"),
        ("groupIdPrefix", " "),
    ):
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            parse_source_options({**BASE, name: bad}, streaming=True)


def test_max_records_per_partition_splits_big_ranges_then_min_partitions_applies():
    start = {("t", 0): 0, ("t", 1): 100}
    end = {("t", 0): 1000, ("t", 1): 150}
    ranges = plan_ranges(start, end, max_records_per_partition=300)
    assert [(r.partition, r.size) for r in ranges] == [(0, 250)] * 4 + [(1, 50)]
    assert ranges[0] == OffsetRange("t", 0, 0, 250) and ranges[-1] == OffsetRange("t", 1, 100, 150)
    more = plan_ranges(start, end, min_partitions=10, max_records_per_partition=300)
    assert len(more) >= 10 and all(r.size <= 300 for r in more)
    covered = sorted((r.partition, o) for r in more for o in range(r.from_offset, r.until_offset))
    assert covered == [(0, o) for o in range(1000)] + [(1, o) for o in range(100, 150)]


def test_offset_lookups_are_retried_then_fail():
    calls: list[int] = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("no answer")
        return 7

    assert with_retries("lookup", flaky, retries=2, interval_ms=1) == 7 and len(calls) == 3
    calls.clear()
    with pytest.raises(TimeoutError):
        with_retries("lookup", flaky, retries=1, interval_ms=1)
    assert len(calls) == 2


def test_range_read_timeouts_are_bounded_by_the_poll_timeout():
    cfg = bounded_client({"bootstrap.servers": "x", "request.timeout.ms": "40000"}, 2000)
    assert cfg["request.timeout.ms"] == 2000 and cfg["default.api.timeout.ms"] == 2000
    assert cfg["socket.connection.setup.timeout.ms"] == 2000 and cfg["bootstrap.servers"] == "x"
    assert bounded_client({"request.timeout.ms": "500"}, 2000)["request.timeout.ms"] == 500


def test_data_loss_fails_or_is_logged_and_counted(caplog):
    with pytest.raises(DataLossError, match="Data loss: offsets gone"):
        report_data_loss("offsets gone", True)
    before = DATA_LOSS_SKIPPED.events
    with caplog.at_level(logging.WARNING, logger="kafkalite.spark"):
        report_data_loss("offsets gone", False)
    assert DATA_LOSS_SKIPPED.events == before + 1
    assert "offsets gone" in caplog.text and "failOnDataLoss=false" in caplog.text


def _txn(pid: int, base: int, values: list[bytes]) -> bytes:
    return build_batch(
        [(None, v, [], 1000) for v in values],
        base_offset=base,
        producer_id=pid,
        producer_epoch=0,
        is_transactional=True,
    )


def test_decode_blob_drops_aborted_transactions_and_markers():
    # producer 1 commits offsets 0-1 (marker 2); producer 2 aborts 3-4 (marker 6) while producer 1
    # writes 5 and commits it (marker 7); a plain record at 8
    blob = (
        _txn(1, 0, [b"c0", b"c1"])
        + build_end_txn_marker_batch(True, 1, 0, 0, base_offset=2)
        + _txn(2, 3, [b"a3", b"a4"])
        + _txn(1, 5, [b"c5"])
        + build_end_txn_marker_batch(False, 2, 0, 0, base_offset=6)
        + build_end_txn_marker_batch(True, 1, 0, 0, base_offset=7)
        + build_batch([(None, b"p8", [], 1000)], base_offset=8)
    )
    committed = Columns()
    assert decode_blob(blob, 0, 9, committed, aborted=[(3, 2)]) == 9
    assert committed.offsets == [0, 1, 5, 8]
    assert committed.values == [b"c0", b"c1", b"c5", b"p8"]
    everything = Columns()
    decode_blob(blob, 0, 9, everything)  # read_uncommitted: all data records, no markers
    assert everything.offsets == [0, 1, 3, 4, 5, 8]
