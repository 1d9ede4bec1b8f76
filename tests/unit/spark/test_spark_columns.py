"""The C ColumnBuilder (`kafkalite.records._columns`) against its pure-Python twin `Columns`: the same
Arrow rows from the same fetched blobs (headers, nulls, LogAppendTime, compression, legacy, ranges)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.records.batch import build_batch
from kafkalite.records.legacy import encode_message
from kafkalite.spark.columnar import Columns, decode_blob
from kafkalite.spark.schema import arrow_schema, columns_to_batch, kafka_schema

try:
    from kafkalite.records._columns import ColumnBuilder
except ImportError:  # not built: the pure-Python path is the only one
    ColumnBuilder = None

pytestmark = pytest.mark.skipif(ColumnBuilder is None, reason="C column builder not built")


def both(
    blob: bytes, start: int, until: int, headers: bool
) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    schema = arrow_schema(kafka_schema(headers))
    py, c = Columns(), ColumnBuilder(headers)
    assert decode_blob(blob, start, until, py) == decode_blob(blob, start, until, c)
    assert c.offsets == py.offsets and c.keys == py.keys and c.values == py.values
    assert c.last_offset == py.last_offset and len(c) == len(py)
    want = columns_to_batch(py, "topic-a", 7, schema, headers)
    got = columns_to_batch(c, "topic-a", 7, schema, headers)
    got.validate(full=True)
    return want, got


@pytest.mark.parametrize("headers", [False, True])
def test_the_builder_matches_the_python_decoder(headers):
    blob = (
        build_batch(
            [
                (b"k%d" % i, b"v" * (i * 40), [("h", b"x"), ("é", None)] if i % 2 else [], 1000 + i)
                for i in range(10)
            ],
            base_offset=100,
        )
        + build_batch(
            [(None, None, [], 5000 + i) for i in range(5)], base_offset=110, compression=1
        )
        + build_batch([(b"", b"", [("", b"")], 7)], base_offset=115, timestamp_type=1)
    )
    want, got = both(blob, 103, 116, headers)
    assert got.equals(want)
    assert got.num_rows == 13
    assert got.column("value").null_count == 5
    assert got.column("partition").to_pylist() == [7] * 13


def test_legacy_messages_go_through_add():
    blob = b"".join(encode_message(o, 1, 0, 1_000 + o, b"k", b"v%d" % o) for o in range(3))
    want, got = both(blob, 1, 3, True)
    assert got.equals(want) and got.column("offset").to_pylist() == [1, 2]


def test_a_malformed_record_is_a_clear_error():
    # attributes, timestamp delta, offset delta, null key, a value of 50 bytes but only 2 given
    body = b"\x00\x00\x00\x01\x64ab\x00"
    record = bytes([len(body) * 2]) + body
    with pytest.raises(ValueError, match="past"):
        ColumnBuilder(False).add_v2(record, 1, 0, 1, 1, 0, 0, 10)
    with pytest.raises(ValueError, match="past its batch"):
        ColumnBuilder(False).add_v2(record[:-1], 1, 0, 1, 1, 0, 0, 10)


records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=200)),
        st.lists(
            st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=3
        ),
        st.integers(-1, 2**41),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(records, st.integers(0, 40), st.integers(0, 40), st.booleans())
def test_any_batch_decodes_the_same(recs, a, b, headers):
    blob = build_batch(recs, base_offset=0)
    want, got = both(blob, min(a, b), max(a, b), headers)
    assert got.equals(want)
