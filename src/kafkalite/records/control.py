"""Control batches: transaction markers (commit / abort) and the control-record key and value formats.

Key: version int16 + type int16; end-transaction marker value: version int16 + coordinator epoch int32.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from enum import IntEnum

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.batch import Record, RecordBatchBuilder

_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A commit or abort marker as written by the transaction coordinator."""

    control_type: ControlRecordType
    coordinator_epoch: int
    version: int = END_TXN_MARKER_VERSION

    @property
    def is_commit(self) -> bool:
        return self.control_type == ControlRecordType.COMMIT


def control_key(control_type: int, version: int = CONTROL_KEY_VERSION) -> bytes:
    return _KEY.pack(version, control_type)


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """(version, type) of a control record's key; DecodeError when malformed."""
    if key is None or len(key) < 4:
        raise DecodeError("control record key needs 4 bytes (version, type)")
    version, ctype = _KEY.unpack_from(key, 0)
    if version < 0:
        raise DecodeError(f"invalid control record key version {version}")
    return int(version), int(ctype)


def control_type_of(record: Record) -> int:
    return parse_control_key(record.key)[1]


def parse_end_txn_marker(record: Record) -> EndTxnMarker:
    """The marker of a commit/abort control record; DecodeError for other control records."""
    _, ctype = parse_control_key(record.key)
    if ctype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise DecodeError(f"control record type {ctype} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise DecodeError("end-transaction marker value needs 6 bytes")
    version, epoch = _END_TXN_VALUE.unpack_from(value, 0)
    if version < 0:
        raise DecodeError(f"invalid end-transaction marker version {version}")
    return EndTxnMarker(ControlRecordType(ctype), int(epoch), int(version))


def build_end_txn_marker_batch(
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    *,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker."""
    ctype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        control_key(ctype),
        _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
        (),
        int(time.time() * 1000) if timestamp is None else timestamp,
    )
    return builder.build()
