"""Produce's schema validation (issue 33): for topics with `confluent.key/value.schema.validation`, a
partition whose batch holds a record without a registered schema id for its subject is refused with
INVALID_RECORD and KIP-467 record errors; the other partitions are appended as usual.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkalite.broker.fastpath import PartitionData
from kafkalite.cluster.append_records import PartitionAppendResult
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.produce import ProduceRequest
from kafkalite.records.batch import iter_batches
from kafkalite.schemas.registry import RegistryState
from kafkalite.schemas.validation import UNKNOWN_ID, FieldRule, check, short_strategy
from kafkalite.storage.config import LogConfig

if TYPE_CHECKING:
    from kafkalite.broker.coordinators.schema_registry import SchemaRegistryComponent

log = logging.getLogger("kafkalite.broker.produce")


def _load_c_walk() -> Callable[[bytes, set[bytes]], bool | None] | None:
    """The C twin of `_value_prefixes_pass` when it is built (KAFKALITE_NO_SPEEDUPS=1: never)."""
    if os.environ.get("KAFKALITE_NO_SPEEDUPS", "") not in ("", "0"):
        return None
    try:
        from kafkalite.schemas._framing import value_prefixes_pass
    except ImportError:
        return None
    return value_prefixes_pass


_PartitionData = list[PartitionData] | list[ProduceRequest.TopicProduceData.PartitionProduceData]
Entries = list[tuple[str, _PartitionData]]
_MAX_RECORD_ERRORS = 100


def rules_of(config: LogConfig) -> tuple[FieldRule | None, FieldRule | None]:
    payload = config.kafkalite_schema_payload_validation
    key = (
        FieldRule(True, short_strategy(config.confluent_key_subject_name_strategy), payload)
        if config.confluent_key_schema_validation
        else None
    )
    value = (
        FieldRule(False, short_strategy(config.confluent_value_subject_name_strategy), payload)
        if config.confluent_value_schema_validation
        else None
    )
    return key, value


def validated_topics(rm: ReplicaManager, entries: Entries) -> list[int] | None:
    """The positions in `entries` of topics with validation on; None (the usual answer, one
    config read per topic) when there are none."""
    found: list[int] | None = None
    for i, (name, partition_data) in enumerate(entries):
        if not partition_data:
            continue
        part = rm.get_partition(name, partition_data[0].index)
        if part is None:
            continue
        cfg = part.config
        if cfg.confluent_value_schema_validation or cfg.confluent_key_schema_validation:
            found = found if found is not None else []
            found.append(i)
    return found


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, next position)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos + 1
        shift += 7


_V2_HEADER = 61  # base offset .. records count
_ATTRIBUTES = 21  # offset of the batch attributes


def _scan_uncompressed(blob: bytes) -> list[tuple[bytes | None, bytes | None]] | None:
    """The (key, value) of every record when all batches are uncompressed v2 ones, walking the
    record framing without building records; None (the caller decodes) otherwise."""
    out: list[tuple[bytes | None, bytes | None]] = []
    pos, end = 0, len(blob)
    while pos < end:
        if end - pos < _V2_HEADER or blob[pos + 16] != 2:
            return None
        batch_end = pos + 12 + int.from_bytes(blob[pos + 8 : pos + 12], "big")
        if batch_end > end or blob[pos + _ATTRIBUTES + 1] & 0x07:
            return None
        p = pos + _V2_HEADER
        while p < batch_end:
            length, p = _varint(blob, p)
            nxt = p + length
            _, q = _varint(blob, p + 1)  # timestamp delta (after the attributes byte)
            _, q = _varint(blob, q)  # offset delta
            klen, q = _varint(blob, q)
            key = None if klen < 0 else blob[q : q + klen]
            q += max(klen, 0)
            vlen, q = _varint(blob, q)
            value = None if vlen < 0 else blob[q : q + vlen]
            out.append((key, value))
            p = nxt
        pos = batch_end
    return out


def _value_prefixes_pass(blob: bytes, ok: set[bytes]) -> bool | None:
    """The fast path for value id checks: True when every record of these uncompressed v2 batches
    has a value whose 5-byte framing is in `ok` (prefixes already judged good); False when one is
    not (the caller looks closer); None when a batch is compressed or legacy. One tight loop, with
    one-byte varints (the usual ones) read inline."""
    pos, end = 0, len(blob)
    while pos < end:
        if end - pos < _V2_HEADER or blob[pos + 16] != 2 or blob[pos + _ATTRIBUTES + 1] & 0x07:
            return None
        batch_end = pos + 12 + int.from_bytes(blob[pos + 8 : pos + 12], "big")
        if batch_end > end:
            return None
        p = pos + _V2_HEADER
        while p < batch_end:
            b = blob[p]
            if b < 0x80:
                nxt = p + 1 + ((b >> 1) ^ -(b & 1))
                q = p + 2  # past the length and the attributes byte
            else:
                length, p = _varint(blob, p)
                nxt, q = p + length, p + 1
            if blob[q] < 0x80:  # timestamp delta
                q += 1
            else:
                q = _varint(blob, q)[1]
            if blob[q] < 0x80:  # offset delta
                q += 1
            else:
                q = _varint(blob, q)[1]
            b = blob[q]  # key length
            if b < 0x80:
                q += 1 + (b >> 1 if not b & 1 else 0)
            else:
                klen, q = _varint(blob, q)
                q += max(klen, 0)
            b = blob[q]  # value length
            if b < 0x80:
                if b & 1 or b < 10:  # null, or shorter than the framing
                    return False
                q += 1
            else:
                q = _varint(blob, q)[1]
            if blob[q : q + 5] not in ok:
                return False
            p = nxt
        pos = batch_end
    return True


_C_WALK = _load_c_walk()


def _refusal(
    state: RegistryState,
    topic: str,
    rules: tuple[FieldRule | None, FieldRule | None],
    blob: bytes,
    ok: set[bytes],
) -> list[tuple[int, str]]:
    """KIP-467 record errors (index in the partition's records, message) of one partition's batch.
    Without payload checks a verdict depends on the 5-byte framing only: the value prefixes found
    good are kept in `ok` (per request) and a batch whose every value has one passes in one walk."""
    key_rule, value_rule = rules
    if key_rule is None and value_rule is not None and not value_rule.payload and ok:
        try:
            if (_C_WALK or _value_prefixes_pass)(blob, ok):
                return []
        except IndexError:
            pass  # a torn record: the decoder below says so
    try:
        pairs = _scan_uncompressed(blob)
        if pairs is None:
            pairs = [(r.key, r.value) for b in iter_batches(blob) for r in b.records]
    except (DecodeError, ValueError, IndexError) as exc:
        return [(0, f"the batch cannot be read: {exc}")]
    errors: list[tuple[int, str]] = []
    verdicts: dict[tuple[bool, bytes | None], str | None] = {}
    for index, (key, value) in enumerate(pairs):
        why = None
        for rule, data in ((key_rule, key), (value_rule, value)):
            if rule is None:
                continue
            if rule.payload:
                why = check(state, topic, rule, data)
            else:
                memo = (rule.is_key, None if data is None else bytes(data[:5]))
                if memo in verdicts:
                    why = verdicts[memo]
                else:
                    why = verdicts[memo] = check(state, topic, rule, data)
                    if why is None and not rule.is_key and memo[1] is not None:
                        ok.add(memo[1])
            if why is not None:
                break
        if why is not None:
            errors.append((index, why))
            if len(errors) >= _MAX_RECORD_ERRORS:
                break
    return errors


async def refuse_invalid(
    registry: SchemaRegistryComponent, rm: ReplicaManager, entries: Entries, positions: list[int]
) -> dict[int, list[PartitionAppendResult]]:
    """Drop from `entries` (in place) the partitions whose records fail validation; their answers
    by topic position."""
    state = await registry.current()
    refused: dict[int, list[PartitionAppendResult]] = {}
    ok = registry.good_value_prefixes(state)
    for i in positions:
        name, partition_data = entries[i]
        part = rm.get_partition(name, partition_data[0].index)
        if part is None:
            continue
        rules = rules_of(part.config)
        kept: list = []  # type: ignore[type-arg]
        for pdata in partition_data:
            good = ok.setdefault((name, rules[1].strategy if rules[1] else ""), set())
            blob = bytes(pdata.records or b"")
            errors = _refusal(state, name, rules, blob, good)
            if errors and any(UNKNOWN_ID in why for _, why in errors):
                # a schema registered a moment ago may not be in this broker's replica yet
                state = await registry.after_miss()
                errors = _refusal(state, name, rules, blob, good)
            if not errors:
                kept.append(pdata)
                continue
            result = PartitionAppendResult(pdata.index, ErrorCode.INVALID_RECORD)
            result.record_errors = [(idx, msg) for idx, msg in errors]
            result.error_message = errors[0][1]
            refused.setdefault(i, []).append(result)
            log.info("produce to %s-%d refused: %s", name, pdata.index, errors[0][1])
        if len(kept) != len(partition_data):
            entries[i] = (name, kept)
    return refused
