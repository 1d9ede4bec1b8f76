"""The produce validation's record walk: the (key, value) pairs it reads from uncompressed v2 batches
are the decoder's, and compressed batches fall back to the decoder.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastavro")

from kafkalite.broker.apis.data._schema_validation import _scan_uncompressed
from kafkalite.records.batch import iter_batches
from kafkalite.records.builder import RecordBatchBuilder

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(maybe_bytes, maybe_bytes), min_size=1, max_size=20), min_size=1, max_size=3))  # fmt: skip
def test_walk_matches_the_decoder(batches: list[list[tuple[bytes | None, bytes | None]]]) -> None:
    blob = b""
    for records in batches:
        builder = RecordBatchBuilder()
        for key, value in records:
            builder.append(key, value, [("h", b"v")])
        blob += builder.build()
    decoded = [(r.key, r.value) for b in iter_batches(blob) for r in b.records]
    walked = _scan_uncompressed(blob)
    assert walked is not None
    assert [(k and bytes(k), v and bytes(v)) for k, v in walked] == [
        (k and bytes(k), v and bytes(v)) for k, v in decoded
    ]


def test_compressed_batches_fall_back() -> None:
    builder = RecordBatchBuilder(compression=1)
    builder.append(b"k", b"v")
    assert _scan_uncompressed(builder.build()) is None
