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


prefixes = st.sampled_from(
    [b"\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x02", b"\x01\x00\x00\x00\x01"]
)
values = st.one_of(st.none(), st.binary(max_size=4), st.tuples(prefixes, st.binary(max_size=300)).map(b"".join))  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(maybe_bytes, values, st.integers(0, 10**6)), min_size=1, max_size=30),
    st.sets(prefixes),
)
def test_prefix_walk_passes_exactly_the_good_batches(
    records: list[tuple[bytes | None, bytes | None, int]], ok: set[bytes]
) -> None:
    from kafkalite.broker.apis.data._schema_validation import _C_WALK, _value_prefixes_pass

    builder = RecordBatchBuilder()
    for key, value, ts in records:
        builder.append(key, value, [], 1_700_000_000_000 + ts)
    blob = builder.build()
    expected = all(v is not None and len(v) >= 5 and v[:5] in ok for _, v, _ in records)
    assert _value_prefixes_pass(blob, ok) is expected
    if _C_WALK is not None:  # the C twin agrees, torn batches included
        assert _C_WALK(blob, ok) is expected
        assert _C_WALK(blob, set(ok) | {bytes([9, i, 0, 0, 0]) for i in range(20)}) is expected
        assert _C_WALK(blob[: len(blob) - 3], ok) in (None, False)
