"""Validation on produce: a record's key or value must carry Confluent's framing (magic byte 0 and a
4-byte schema id) with an id registered under the subject its topic's subject name strategy names;
optionally the payload must match that schema. Answers the KIP-467 per-record message, or None.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.schemas.model import RegistryError
from kafkalite.schemas.registry import RegistryState

TOPIC_NAME = "TopicNameStrategy"
RECORD_NAME = "RecordNameStrategy"
TOPIC_RECORD_NAME = "TopicRecordNameStrategy"
UNKNOWN_ID = "is not registered"  # in the message of a record whose id this registry lacks


@dataclass(frozen=True, slots=True)
class FieldRule:
    """How one side (key or value) of a topic's records is checked."""

    is_key: bool
    strategy: str  # the short name of the subject name strategy
    payload: bool  # check the payload against the schema too


def short_strategy(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def subject_for(topic: str, rule: FieldRule, record_name: str | None) -> str | None:
    """The subject a record's schema must be registered under (None: the strategy needs a record
    name the schema does not have)."""
    if rule.strategy == TOPIC_NAME:
        return f"{topic}-{'key' if rule.is_key else 'value'}"
    if record_name is None:
        return None
    if rule.strategy == RECORD_NAME:
        return record_name
    return f"{topic}-{record_name}"


def check(state: RegistryState, topic: str, rule: FieldRule, data: bytes | None) -> str | None:
    """Why this key or value is refused (None: it passes)."""
    side = "key" if rule.is_key else "value"
    if data is None or len(data) < 5 or data[0] != 0:
        return f"The {side} is not framed with a schema id (magic byte 0 and a 4-byte id)"
    schema_id = int.from_bytes(data[1:5], "big")
    sv = state.by_id.get(schema_id)
    if sv is None:
        return f"The {side}'s schema id {schema_id} {UNKNOWN_ID}"
    try:
        parsed = state.parsed(schema_id)
    except RegistryError as exc:
        return f"The {side}'s schema id {schema_id} cannot be read: {exc.message}"
    needs_name = rule.strategy != TOPIC_NAME
    subject = subject_for(topic, rule, parsed.record_name(bytes(data[5:])) if needs_name else None)
    if subject is None or schema_id not in state.live_ids(subject):
        return f"The {side}'s schema id {schema_id} is not registered under subject {subject}"
    if rule.payload:
        why = parsed.validate(bytes(data[5:]))
        if why is not None:
            return f"The {side} does not match schema id {schema_id}: {why}"
    return None
