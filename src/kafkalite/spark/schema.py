"""The fixed row schema of the `kafkalite` source (Spark's Kafka source schema) and the conversion of
consumed records into Arrow record batches whose schema is exactly the one Spark expects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool = False) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks a Python data source's batches against."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def records_to_batch(
    records: Sequence[Any], topic: str, partition: int, schema: pa.Schema, include_headers: bool
) -> pa.RecordBatch:
    """ConsumerRecords of one partition -> one RecordBatch with exactly `schema`."""
    n = len(records)
    ts_ms = pa.array([r.timestamp for r in records], type=pa.int64())
    columns = [
        pa.array([r.key for r in records], type=pa.binary()),
        pa.array([r.value for r in records], type=pa.binary()),
        pa.array([topic] * n, type=pa.string()),
        pa.array([partition] * n, type=pa.int32()),
        pa.array([r.offset for r in records], type=pa.int64()),
        pc.multiply(ts_ms, 1000).cast(schema.field("timestamp").type),
        pa.array([r.timestamp_type for r in records], type=pa.int32()),
    ]
    if include_headers:
        columns.append(
            pa.array(
                [
                    [{"key": k, "value": v} for k, v in r.headers] if r.headers else None
                    for r in records
                ],
                type=schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _binary(typ: pa.DataType, n: int, bufs: tuple[bytes | None, bytes, bytes, int]) -> pa.Array:
    valid, offsets, data, nulls = bufs
    return pa.Array.from_buffers(
        typ,
        n,
        [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls,
    )


def _fixed(typ: pa.DataType, n: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(data)], null_count=0)


def builder_to_batch(
    cols: Any, topic: str, partition: int, schema: pa.Schema, include_headers: bool
) -> pa.RecordBatch:
    """A C `ColumnBuilder` chunk of one partition -> one RecordBatch with exactly `schema`, made
    from its buffers (no per-record Python work)."""
    n, key, value, offsets, stamps, types, headers = cols.buffers()
    arrays = [
        _binary(pa.binary(), n, key),
        _binary(pa.binary(), n, value),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        _fixed(pa.int64(), n, offsets),
        _fixed(schema.field("timestamp").type, n, stamps),
        _fixed(pa.int32(), n, types),
    ]
    if include_headers:
        list_type = schema.field("headers").type
        valid, list_offsets, list_nulls, hkey, hvalue = headers
        entry = list_type.value_type
        count = hkey[1] and len(hkey[1]) // 4 - 1
        keys = _binary(entry.field("key").type, count, hkey)
        keys.validate(full=True)  # header keys are UTF-8 strings
        entries = pa.StructArray.from_arrays(
            [keys, _binary(entry.field("value").type, count, hvalue)], fields=list(entry)
        )
        arrays.append(
            pa.Array.from_buffers(
                list_type,
                n,
                [None if valid is None else pa.py_buffer(valid), pa.py_buffer(list_offsets)],
                null_count=list_nulls,
                children=[entries],
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def columns_to_batch(
    cols: Any, topic: str, partition: int, schema: pa.Schema, include_headers: bool
) -> pa.RecordBatch:
    """A `columnar.new_columns()` chunk of one partition -> one RecordBatch with exactly `schema`."""
    if hasattr(cols, "buffers"):
        return builder_to_batch(cols, topic, partition, schema, include_headers)
    n = len(cols)
    arrays = [
        pa.array(cols.keys, type=pa.binary()),
        pa.array(cols.values, type=pa.binary()),
        pa.array([topic] * n, type=pa.string()),
        pa.array([partition] * n, type=pa.int32()),
        pa.array(cols.offsets, type=pa.int64()),
        pc.multiply(pa.array(cols.timestamps, type=pa.int64()), 1000).cast(
            schema.field("timestamp").type
        ),
        pa.array(cols.types, type=pa.int32()),
    ]
    if include_headers:
        arrays.append(
            pa.array(
                [
                    None if hs is None else [{"key": k, "value": v} for k, v in hs]
                    for hs in cols.headers
                ],
                type=schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
