"""Produce's schema validation (issue 33): for topics with `confluent.key/value.schema.validation`, a
partition whose batch holds a record without a registered schema id for its subject is refused with
INVALID_RECORD and KIP-467 record errors; the other partitions are appended as usual.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkalite.broker.fastpath import PartitionData
from kafkalite.cluster.append_records import PartitionAppendResult
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.produce import ProduceRequest
from kafkalite.records.batch import iter_batches
from kafkalite.schemas.registry import RegistryState
from kafkalite.schemas.validation import FieldRule, check, short_strategy
from kafkalite.storage.config import LogConfig

if TYPE_CHECKING:
    from kafkalite.broker.coordinators.schema_registry import SchemaRegistryComponent

log = logging.getLogger("kafkalite.broker.produce")


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


def _refusal(
    state: RegistryState, topic: str, rules: tuple[FieldRule | None, FieldRule | None], blob: bytes
) -> list[tuple[int, str]]:
    errors: list[tuple[int, str]] = []
    key_rule, value_rule = rules
    index = 0
    try:
        for batch in iter_batches(blob, verify_crc=False):
            for r in batch.records:
                why = None
                if key_rule is not None:
                    why = check(state, topic, key_rule, r.key)
                if why is None and value_rule is not None:
                    why = check(state, topic, value_rule, r.value)
                if why is not None and len(errors) < _MAX_RECORD_ERRORS:
                    errors.append((index, why))
                index += 1
    except (DecodeError, ValueError) as exc:
        return [(0, f"the batch cannot be read: {exc}")]
    return errors


async def refuse_invalid(
    registry: SchemaRegistryComponent, rm: ReplicaManager, entries: Entries, positions: list[int]
) -> dict[int, list[PartitionAppendResult]]:
    """Drop from `entries` (in place) the partitions whose records fail validation; their answers
    by topic position."""
    state = await registry.current()
    refused: dict[int, list[PartitionAppendResult]] = {}
    for i in positions:
        name, partition_data = entries[i]
        part = rm.get_partition(name, partition_data[0].index)
        if part is None:
            continue
        rules = rules_of(part.config)
        kept: list = []  # type: ignore[type-arg]
        for pdata in partition_data:
            errors = _refusal(state, name, rules, bytes(pdata.records or b""))
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
