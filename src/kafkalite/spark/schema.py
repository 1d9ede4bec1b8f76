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


def columns_to_batch(
    cols: Any, topic: str, partition: int, schema: pa.Schema, include_headers: bool
) -> pa.RecordBatch:
    """`columnar.Columns` of one partition -> one RecordBatch with exactly `schema`."""
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
