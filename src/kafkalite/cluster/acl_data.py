"""How ACLs are stored: Kafka's ZooKeeper layout (ZK mode, Kafka 3.x AclAuthorizer) — one znode per
resource pattern holding `{"version":1,"acls":[...]}`, change notifications under /kafka-acl-changes
(literal) and /kafka-acl-extended-changes (prefixed) — and the single-node file in the data dir.
Pure: encoding and decoding only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ACL_FILE = "kafkalite-acls.json"

# the names Kafka's ZooKeeper data uses (SecurityUtils: camel case of the enum names)
STORED_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)


class AclDataError(ValueError):
    """Stored ACL data that is not what Kafka writes."""


def camel(name: str) -> str:
    """TRANSACTIONAL_ID -> TransactionalId (Kafka's SecurityUtils naming)."""
    return "".join(part.capitalize() for part in name.split("_"))


def _from_camel(enum_cls: Any, text: str) -> Any:
    wanted = text.replace("_", "").upper()
    for member in enum_cls:
        if member.name.replace("_", "") == wanted:
            return member
    raise AclDataError(f"unknown {enum_cls.__name__} {text!r}")


def resource_type_of(text: str) -> ResourceType:
    """`Topic`, `TOPIC` or `topic` -> ResourceType.TOPIC (Kafka's fromString ignores case)."""
    return _from_camel(ResourceType, text)  # type: ignore[no-any-return]


def pattern_root(pattern_type: PatternType) -> str:
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/prefixed"
    raise AclDataError(f"ACLs of pattern type {pattern_type.name} are not stored")


def resource_path(pattern: ResourcePattern) -> str:
    """/kafka-acl/Topic/orders, /kafka-acl-extended/prefixed/Group/app-"""
    return (
        f"{pattern_root(pattern.pattern_type)}/{camel(pattern.resource_type.name)}/{pattern.name}"
    )


def change_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type is PatternType.LITERAL else EXTENDED_CHANGES


def _entry_json(entry: AccessControlEntry) -> dict[str, Any]:
    return {
        "principal": entry.principal,
        "permissionType": camel(entry.permission_type.name),
        "operation": camel(entry.operation.name),
        "host": entry.host,
    }


def _entry_of(doc: Any) -> AccessControlEntry:
    if not isinstance(doc, dict):
        raise AclDataError(f"an ACL entry must be an object, got {doc!r}")
    try:
        return AccessControlEntry(
            str(doc["principal"]),
            str(doc["host"]),
            _from_camel(AclOperation, str(doc["operation"])),
            _from_camel(AclPermissionType, str(doc["permissionType"])),
        )
    except KeyError as exc:
        raise AclDataError(f"an ACL entry lacks {exc}") from None


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """The data of a resource znode: `{"version":1,"acls":[...]}` (sorted, so writes are stable)."""
    acls = sorted((_entry_json(e) for e in entries), key=lambda d: json.dumps(d, sort_keys=True))
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(path: str, data: bytes) -> set[AccessControlEntry]:
    try:
        doc = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AclDataError(f"{path}: not JSON: {exc}") from None
    if (
        not isinstance(doc, dict)
        or doc.get("version") != 1
        or not isinstance(doc.get("acls"), list)
    ):
        raise AclDataError(f"{path}: expected {{'version': 1, 'acls': [...]}}, got {doc!r}")
    try:
        return {_entry_of(e) for e in doc["acls"]}
    except AclDataError as exc:
        raise AclDataError(f"{path}: {exc}") from None


def encode_change(pattern: ResourcePattern) -> bytes:
    """A change notification: `TOPIC:orders` for a literal pattern (Kafka's legacy string; readers
    ignore the case of the type), the ExtendedAclChangeEvent JSON for the others."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    doc = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_change(pattern_type: PatternType, data: bytes) -> ResourcePattern:
    """The pattern a notification under `change_path(pattern_type)` names."""
    text = data.decode()
    if pattern_type is PatternType.LITERAL:
        kind, sep, name = text.partition(":")
        if not sep:
            raise AclDataError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(resource_type_of(kind), name, PatternType.LITERAL)
    try:
        doc = json.loads(text)
        if int(doc["version"]) > 1:
            raise AclDataError(f"unsupported ACL change event version {doc['version']}")
        return ResourcePattern(
            resource_type_of(str(doc["resourceType"])),
            str(doc["name"]),
            _from_camel(PatternType, str(doc["patternType"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, AclDataError):
            raise
        raise AclDataError(f"bad ACL change event {text!r}: {exc}") from None


def encode_acl_file(bindings: Iterable[AclBinding]) -> str:
    """The single-node file: one object per resource pattern, entries as in ZooKeeper."""
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    resources = [
        {
            "resourceType": camel(p.resource_type.name),
            "name": p.name,
            "patternType": camel(p.pattern_type.name),
            "acls": json.loads(encode_acls(entries))["acls"],
        }
        for p, entries in sorted(
            by_pattern.items(), key=lambda kv: (kv[0].resource_type, kv[0].pattern_type, kv[0].name)
        )
    ]
    return json.dumps({"version": 1, "resources": resources}, indent=1)


def decode_acl_file(text: str) -> list[AclBinding]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AclDataError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise AclDataError(f"expected version 1, got {doc!r:.100}")
    out: list[AclBinding] = []
    for res in doc.get("resources", []):
        try:
            pattern = ResourcePattern(
                resource_type_of(str(res["resourceType"])),
                str(res["name"]),
                _from_camel(PatternType, str(res["patternType"])),
            )
        except (KeyError, TypeError) as exc:
            raise AclDataError(f"bad resource {res!r}: {exc}") from None
        out.extend(AclBinding(pattern, _entry_of(e)) for e in res.get("acls", []))
    return out
