"""The `__transaction_state` record format (TransactionLogKey v0, TransactionLogValue v0/v1) and placement.

Keys and values are an int16 version followed by the versioned struct, byte-compatible with Kafka's.
"""

from __future__ import annotations

import functools
from typing import Any

from kafkalite.coordinator.records import java_string_hash, kafka_abs
from kafkalite.coordinator.txn_state import (
    NO_PRODUCER_EPOCH,
    TransactionState,
    TxnTransitMetadata,
)
from kafkalite.coordinator.types import CoordinatorRecord, TopicPartition
from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError, EncodeError
from kafkalite.protocol.schema import F, data

TRANSACTION_STATE_TOPIC = "__transaction_state"
TXN_KEY_VERSION = 0
# v0 is what Kafka writes until transaction.version 1 is finalized (and what pre-4.0 brokers can read);
# kafkalite finalizes transaction.version 1 (see the ApiVersions features), so it writes the flexible v1
TXN_VALUE_VERSION = 1

TransactionLogKey = data(
    "TransactionLogKey",
    valid="0",
    flexible="none",
    fields=[F("transactional_id", "string", "0")],
)

TransactionLogValue = data(
    "TransactionLogValue",
    valid="0-1",
    flexible="1+",
    fields=[
        F("producer_id", "int64", "0+"),
        F("previous_producer_id", "int64", "1+", tag=0, tagged="1+", default=-1, ignorable=True),
        F("next_producer_id", "int64", "1+", tag=1, tagged="1+", default=-1, ignorable=True),
        F("producer_epoch", "int16", "0+"),
        F("transaction_timeout_ms", "int32", "0+"),
        F("transaction_status", "int8", "0+"),
        F(
            "transaction_partitions",
            "[]PartitionsSchema",
            "0+",
            nullable="0+",
            fields=[
                F("topic", "string", "0+"),
                F("partition_ids", "[]int32", "0+"),
            ],
        ),
        F("transaction_last_update_timestamp_ms", "int64", "0+"),
        F("transaction_start_timestamp_ms", "int64", "0+"),
        F("client_transaction_version", "int16", "1+", tag=2, tagged="1+", ignorable=True),
    ],
)


@functools.lru_cache(maxsize=65536)
def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The `__transaction_state` partition whose leader coordinates this transactional id."""
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


def _versioned(struct_obj: Any, version: int) -> bytes:
    out = bytearray()
    p.write_int16(out, version)
    out += struct_obj.encode(version)
    return bytes(out)


# ---------------------------------------------------------------------------
# keys


def txn_key(transactional_id: str) -> bytes:
    return _versioned(TransactionLogKey(transactional_id=transactional_id), TXN_KEY_VERSION)


def parse_key(buf: bytes) -> str:
    """The transactional id of a record key; DecodeError for a malformed key or an unknown version."""
    version, pos = p.read_int16(buf, 0)
    if version != TXN_KEY_VERSION:
        raise DecodeError(f"unknown __transaction_state key version {version}")
    key = TransactionLogKey.decode(buf, version, pos)
    transactional_id: str = key.transactional_id
    return transactional_id


# ---------------------------------------------------------------------------
# values


def txn_value(transit: TxnTransitMetadata, version: int = TXN_VALUE_VERSION) -> bytes:
    """Encode a transit as Kafka does: an Empty transaction has null partitions, others are grouped by
    topic (sorted here, so the bytes are deterministic)."""
    if transit.txn_state is TransactionState.EMPTY and transit.topic_partitions:
        raise EncodeError(f"an Empty transaction has no partitions: {transit}")
    partitions: list[Any] | None
    if transit.txn_state is TransactionState.EMPTY:
        partitions = None
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(transit.topic_partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        schema = TransactionLogValue.PartitionsSchema
        partitions = [schema(topic=t, partition_ids=ids) for t, ids in by_topic.items()]
    value = TransactionLogValue(
        producer_id=transit.producer_id,
        previous_producer_id=transit.prev_producer_id,
        next_producer_id=transit.next_producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=transit.txn_state.id,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp,
        client_transaction_version=transit.client_transaction_version,
    )
    return _versioned(value, version)


def parse_value(buf: bytes) -> TxnTransitMetadata:
    """Decode a value (v0 or v1) into the transit it records. The log keeps no last epoch, so it reads
    as none, as in Kafka; partitions of an Empty transaction are ignored."""
    version, pos = p.read_int16(buf, 0)
    if version not in TransactionLogValue.VALID_VERSIONS:
        raise DecodeError(f"unknown __transaction_state value version {version}")
    v = TransactionLogValue.decode(buf, version, pos, exact=False)
    state = TransactionState.from_id(v.transaction_status)
    if state is None:
        raise DecodeError(f"unknown transaction status {v.transaction_status}")
    partitions: frozenset[TopicPartition] = frozenset()
    if state is not TransactionState.EMPTY and v.transaction_partitions:
        partitions = frozenset(
            TopicPartition(ps.topic, pid)
            for ps in v.transaction_partitions
            for pid in ps.partition_ids
        )
    return TxnTransitMetadata(
        producer_id=v.producer_id,
        prev_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id,
        producer_epoch=v.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=v.transaction_timeout_ms,
        txn_state=state,
        topic_partitions=partitions,
        txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
        client_transaction_version=v.client_transaction_version,
    )


# ---------------------------------------------------------------------------
# records: bytes to append plus the decoded key and value, which the live path replays


def txn_record(
    transactional_id: str, transit: TxnTransitMetadata, version: int = TXN_VALUE_VERSION
) -> CoordinatorRecord:
    return CoordinatorRecord(
        txn_key(transactional_id), txn_value(transit, version), transactional_id, transit
    )


def txn_tombstone(transactional_id: str) -> CoordinatorRecord:
    """The record that removes an expired transactional id (compaction drops it later)."""
    return CoordinatorRecord(txn_key(transactional_id), None, transactional_id, None)
