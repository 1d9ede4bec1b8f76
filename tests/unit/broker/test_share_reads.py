"""Share-partition log reads: the batches found from their headers alone (big batches, sent by sendfile)
are those found in the whole read, control batches and aborted transactions left out alike."""

from __future__ import annotations

import os
from pathlib import Path

from kafkalite.broker.coordinators.share_reads import batch_spans, header_spans
from kafkalite.records import build_batch, build_end_txn_marker_batch
from kafkalite.records.header import parse_batch_header

BIG = b"v" * 4000  # 30 records of 4 KB: batches of about 120 KB


def _batch(base: int, n: int, *, producer_id: int = -1, txn: bool = False) -> bytes:
    return build_batch(
        [(None, BIG)] * n,
        base_offset=base,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=txn,
    )


def _log(tmp_path: Path) -> tuple[int, bytes, list[tuple[int, int]]]:
    """A plain batch, an aborted transaction's batch and its marker, a committed one's, a plain one."""
    blob = b"".join(
        [
            _batch(0, 30),
            _batch(30, 30, producer_id=7, txn=True),
            build_end_txn_marker_batch(False, 7, 0, 0, base_offset=60),
            _batch(61, 30, producer_id=8, txn=True),
            build_end_txn_marker_batch(True, 8, 0, 0, base_offset=91),
            _batch(92, 30),
        ]
    )
    path = tmp_path / "log"
    path.write_bytes(blob)
    return os.open(path, os.O_RDONLY), blob, [(7, 30)]


def test_header_spans_find_what_the_whole_read_finds(tmp_path: Path) -> None:
    fd, blob, aborted = _log(tmp_path)
    try:
        bounds = [0]
        while bounds[-1] < len(blob):  # every batch's end, control batches' too
            bounds.append(bounds[-1] + parse_batch_header(blob, bounds[-1]).size)
        for abort in ([], aborted):
            for i, bound in enumerate(bounds[1:], 1):
                # reads ending at a batch's end, and reads cutting the batch after it
                whole = batch_spans(blob[:bound], abort)
                assert header_spans(fd, 0, bound, abort) == whole, (abort, bound)
                prev = batch_spans(blob[: bounds[i - 1]], abort) if i > 1 else ([], -1)
                for cut in {bound - 1, min(bounds[i - 1] + 61, bound - 1)}:
                    assert header_spans(fd, 0, cut, abort) == prev, (abort, cut)
        spans, end = header_spans(fd, 0, len(blob), aborted) or ([], -1)
        assert [(b, last) for b, last, _, _ in spans] == [(0, 29), (61, 90), (92, 121)]
        assert end == 122
    finally:
        os.close(fd)


def test_a_legacy_or_bad_region_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "bad"
    path.write_bytes(_batch(0, 30) + b"\x00" * 16 + b"\x01" + b"\x00" * 200)  # magic 1 after
    fd = os.open(path, os.O_RDONLY)
    try:
        assert header_spans(fd, 0, os.path.getsize(path)) is None
    finally:
        os.close(fd)
