"""The `_schemas` topic's record layout, as Confluent Schema Registry and Karapace write it: JSON keys
(`keytype` SCHEMA, CONFIG, MODE, DELETE_SUBJECT, NOOP) and JSON values; a null value deletes the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
NOOP = "NOOP"


def _dump(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dump({"keytype": NOOP, "magic": 0})


def dump_value(value: dict[str, object] | None) -> bytes | None:
    return None if value is None else _dump(value)


@dataclass(frozen=True, slots=True)
class Key:
    keytype: str
    subject: str | None
    version: int | None


def parse_key(raw: bytes | None) -> Key | None:
    """The key of one `_schemas` record; None for a key this registry does not read."""
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("keytype"), str):
        return None
    subject = obj.get("subject")
    version = obj.get("version")
    return Key(
        obj["keytype"],
        subject if isinstance(subject, str) else None,
        version if isinstance(version, int) else None,
    )


def parse_value(raw: bytes | None) -> dict[str, object] | None:
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None
