"""`__transaction_state` keys and values are laid out byte for byte as Kafka's TransactionLogKey v0 and
TransactionLogValue v0/v1, and malformed bytes are DecodeErrors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.coordinator import records as group_records
from kafkalite.coordinator.txn_records import (
    parse_key,
    parse_value,
    partition_for,
    txn_key,
    txn_record,
    txn_tombstone,
    txn_value,
)
from kafkalite.coordinator.txn_state import TransactionState, TxnTransitMetadata
from kafkalite.coordinator.types import TopicPartition
from kafkalite.protocol.exceptions import DecodeError

S = TransactionState


def _ongoing() -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=1000,
        prev_producer_id=1000,
        next_producer_id=-1,
        producer_epoch=3,
        last_producer_epoch=-1,
        txn_timeout_ms=60_000,
        txn_state=S.ONGOING,
        topic_partitions=frozenset(
            {TopicPartition("b", 2), TopicPartition("a", 1), TopicPartition("a", 0)}
        ),
        txn_start_timestamp=5,
        txn_last_update_timestamp=6,
    )


def test_key_v0_bytes() -> None:
    assert txn_key("tx") == b"\x00\x00" + b"\x00\x02tx"
    assert parse_key(b"\x00\x00\x00\x02tx") == "tx"


def test_value_v0_bytes() -> None:
    expected = (
        struct.pack(">hqhib", 0, 1000, 3, 60_000, 1)  # version, pid, epoch, timeout, status Ongoing
        + struct.pack(">i", 2)  # two topics
        + struct.pack(">h", 1)
        + b"a"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">h", 1)
        + b"b"
        + struct.pack(">ii", 1, 2)
        + struct.pack(">qq", 6, 5)  # last update, start
    )
    assert txn_value(_ongoing(), 0) == expected


def test_empty_value_v0_has_null_partitions() -> None:
    empty = TxnTransitMetadata(1000, -1, -1, 0, -1, 60_000, S.EMPTY, frozenset(), -1, 6)
    expected = struct.pack(">hqhibiqq", 0, 1000, 0, 60_000, 0, -1, 6, -1)
    assert txn_value(empty, 0) == expected


def test_value_v1_bytes_with_tagged_fields() -> None:
    # compact arrays and strings (length + 1), one empty tag section per partition struct, then the
    # top-level tags: 0 = PreviousProducerId (differs from its default -1), 2 = ClientTransactionVersion
    transit = TxnTransitMetadata(
        1000,
        999,
        -1,
        3,
        -1,
        60_000,
        S.PREPARE_COMMIT,
        frozenset({TopicPartition("a", 0)}),
        5,
        6,
        client_transaction_version=1,
    )
    expected = (
        struct.pack(">hqhib", 1, 1000, 3, 60_000, 2)
        + bytes([2])  # one topic
        + bytes([2])
        + b"a"
        + bytes([2])
        + struct.pack(">i", 0)
        + bytes([0])  # PartitionsSchema tagged fields
        + struct.pack(">qq", 6, 5)
        + bytes([2])  # two tagged fields
        + bytes([0, 8])
        + struct.pack(">q", 999)
        + bytes([2, 2])
        + struct.pack(">h", 1)
    )
    assert txn_value(transit, 1) == expected
    assert parse_value(expected) == transit


@pytest.mark.parametrize("version", [0, 1])
def test_round_trip(version: int) -> None:
    t = _ongoing()
    parsed = parse_value(txn_value(t, version))
    if version == 0:  # v0 has no previous/next producer id: they read as their defaults
        assert parsed.prev_producer_id == -1
        assert parsed == TxnTransitMetadata(
            t.producer_id,
            -1,
            -1,
            t.producer_epoch,
            -1,
            t.txn_timeout_ms,
            t.txn_state,
            t.topic_partitions,
            t.txn_start_timestamp,
            t.txn_last_update_timestamp,
        )
    else:
        assert parsed == t


@given(
    pid=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 32767),
    timeout=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in S if s is not S.EMPTY]),
    tps=st.frozensets(
        st.builds(TopicPartition, st.text(min_size=1, max_size=5), st.integers(0, 1000)),
        max_size=6,
    ),
    version=st.sampled_from([0, 1]),
)
def test_round_trip_property(
    pid: int, epoch: int, timeout: int, state: S, tps: frozenset[TopicPartition], version: int
) -> None:
    t = TxnTransitMetadata(pid, -1, -1, epoch, -1, timeout, state, tps, 1, 2)
    assert parse_value(txn_value(t, version)) == t


def test_malformed_bytes_are_decode_errors() -> None:
    good = txn_value(_ongoing(), 0)
    with pytest.raises(DecodeError):
        parse_value(b"\x00\x02" + good[2:])  # unknown version
    with pytest.raises(DecodeError):
        parse_value(good[:-3])  # truncated
    with pytest.raises(DecodeError):
        parse_value(good[:20] + b"\x09" + good[21:])  # unknown status
    with pytest.raises(DecodeError):
        parse_key(b"\x00\x01\x00\x02tx")  # unknown key version
    with pytest.raises(DecodeError):
        parse_key(b"\x00\x00\x00\x09tx")
    with pytest.raises(DecodeError):
        parse_key(b"\x00")


def test_records_and_tombstones() -> None:
    t = _ongoing()
    rec = txn_record("tx", t)
    assert (rec.key, rec.value, rec.parsed_key, rec.parsed_value) == (
        txn_key("tx"),
        txn_value(t),
        "tx",
        t,
    )
    tomb = txn_tombstone("tx")
    assert tomb.key == txn_key("tx") and tomb.value is None and tomb.parsed_key == "tx"


def test_partition_for_is_kafkas_placement() -> None:
    for txn_id in ["tx", "my-transactional-id", "", "éü", "a" * 50]:
        expected = group_records.kafka_abs(group_records.java_string_hash(txn_id)) % 50
        assert partition_for(txn_id, 50) == expected
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0
    assert partition_for("polygenelubricants", 50) == 0
