"""Client quotas at rest: the single-node file in the data dir and the quota keys of Kafka's
entity config znodes (/config/users/..., /config/clients/..., /config/ips/...), values as strings.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping

from kafkalite.security.quota import (
    QUOTA_KEYS,
    QuotaEntity,
    format_quota_value,
    validate_quota_value,
)

QUOTA_FILE = "kafkalite-client-quotas.json"


class QuotaDataError(ValueError):
    """Stored quotas that cannot be read back."""


def quotas_from_config(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config (other keys, such as SCRAM credentials, are skipped)."""
    out: dict[str, float] = {}
    for key in QUOTA_KEYS:
        text = config.get(key)
        if text is None:
            continue
        try:
            value = float(text)
        except ValueError:
            raise QuotaDataError(f"{key}={text!r} is not a number") from None
        why = validate_quota_value(key, value)
        if why is not None:
            raise QuotaDataError(why)
        out[key] = value
    return out


def apply_quota_changes(
    config: Mapping[str, str], upsert: Mapping[str, float], remove: Collection[str]
) -> dict[str, str]:
    """An entity config with quota keys set and removed; its other keys are kept."""
    out = {k: v for k, v in config.items() if k not in remove}
    out.update({k: format_quota_value(k, v) for k, v in upsert.items()})
    return out


def _entry(e: QuotaEntity, values: Mapping[str, float]) -> dict[str, object]:
    entry: dict[str, object] = {
        "user": e.user,
        "client-id": e.client_id,
        "config": {k: format_quota_value(k, v) for k, v in sorted(values.items())},
    }
    if e.ip is not None:  # written only for ip entities: files without one read as before
        entry["ip"] = e.ip
    return entry


def encode_quota_file(quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> str:
    entries = [
        _entry(e, values)
        for e, values in sorted(
            quotas.items(),
            key=lambda kv: (kv[0].user or "", kv[0].client_id or "", kv[0].ip or ""),
        )
        if values
    ]
    return json.dumps({"version": 1, "entities": entries}, indent=1, sort_keys=True)


def decode_quota_file(text: str) -> dict[QuotaEntity, dict[str, float]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise QuotaDataError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entities"), list):
        raise QuotaDataError("no entities list")
    out: dict[QuotaEntity, dict[str, float]] = {}
    for entry in doc["entities"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
            raise QuotaDataError(f"bad entity entry {entry!r}")
        user, client, ip = entry.get("user"), entry.get("client-id"), entry.get("ip")
        if not all(isinstance(n, str | None) for n in (user, client, ip)):
            raise QuotaDataError(f"bad entity names in {entry!r}")
        try:
            entity = QuotaEntity(user, client, ip)
        except ValueError as exc:
            raise QuotaDataError(str(exc)) from None
        out[entity] = quotas_from_config({str(k): str(v) for k, v in entry["config"].items()})
    return out


def describe_entity(entity: QuotaEntity) -> str:
    """A person's name for an entity, for log lines: user=alice, client-id=<default>, ip=10.0.0.1."""
    if entity.ip is not None:
        return f"ip={entity.ip}"
    parts = []
    if entity.user is not None:
        parts.append(f"user={entity.user}")
    if entity.client_id is not None:
        parts.append(f"client-id={entity.client_id}")
    return ", ".join(parts)
