"""Quota configuration as pure logic: value validation, entity conversion, DescribeClientQuotas
filters (exact / default / specified, strict), and the per-kind ClientQuotaManager."""

from __future__ import annotations

import pytest

from kafkalite.security.quota import (
    DEFAULT_ENTITY,
    ClientQuotaManager,
    QuotaEntity,
    QuotaFilter,
    entity_from_parts,
    entity_parts,
    format_quota_value,
    matching_entities,
    validate_filters,
    validate_quota_value,
)

D = DEFAULT_ENTITY


def test_values() -> None:
    assert validate_quota_value("producer_byte_rate", 1024) is None
    assert validate_quota_value("request_percentage", 12.5) is None
    assert "whole number" in (validate_quota_value("consumer_byte_rate", 1.5) or "")
    assert "positive" in (validate_quota_value("producer_byte_rate", 0) or "")
    assert "positive" in (validate_quota_value("request_percentage", float("nan")) or "")
    assert "Unknown" in (validate_quota_value("bogus_rate", 5) or "")
    # an ip entity's key (test_ipquota_config.py checks which entity may take it)
    assert validate_quota_value("connection_creation_rate", 5) is None
    assert "not enforced" in (validate_quota_value("controller_mutation_rate", 5) or "")
    assert format_quota_value("producer_byte_rate", 1048576.0) == "1048576"
    assert format_quota_value("request_percentage", 12.5) == "12.5"


def test_entities_round_trip() -> None:
    cases = [
        ({"user": "alice"}, QuotaEntity("alice", None)),
        ({"user": None}, QuotaEntity(D, None)),
        ({"user": "alice", "client-id": None}, QuotaEntity("alice", D)),
        ({"client-id": "app"}, QuotaEntity(None, "app")),
    ]
    for parts, entity in cases:
        assert entity_from_parts(parts) == entity
        assert dict(entity_parts(entity)) == parts
    with pytest.raises(ValueError, match="IP entity should not be used with user"):
        entity_from_parts({"ip": "1.2.3.4", "user": "alice"})
    with pytest.raises(ValueError, match="Unknown"):
        entity_from_parts({"topic": "t"})
    with pytest.raises(ValueError, match="empty"):
        entity_from_parts({"user": ""})


ENTITIES = [
    QuotaEntity("alice", None),
    QuotaEntity("alice", "app"),
    QuotaEntity("alice", D),
    QuotaEntity(D, None),
    QuotaEntity(None, "app"),
    QuotaEntity(None, D),
]


@pytest.mark.parametrize(
    ("filters", "strict", "expected"),
    [
        ([], False, ENTITIES),
        ([], True, []),
        ([QuotaFilter("user", 0, "alice")], False, ENTITIES[:3]),
        ([QuotaFilter("user", 0, "alice")], True, ENTITIES[:1]),
        ([QuotaFilter("user", 1)], False, [QuotaEntity(D, None)]),
        ([QuotaFilter("client-id", 2)], False, [ENTITIES[1], ENTITIES[4]]),
        ([QuotaFilter("client-id", 1)], True, [QuotaEntity(None, D)]),
        ([QuotaFilter("user", 0, "alice"), QuotaFilter("client-id", 1)], True, [ENTITIES[2]]),
    ],
)
def test_describe_filters(
    filters: list[QuotaFilter], strict: bool, expected: list[QuotaEntity]
) -> None:
    assert validate_filters(filters) is None
    assert matching_entities(ENTITIES, filters, strict) == expected


def test_bad_filters() -> None:
    assert "Duplicate" in (validate_filters([QuotaFilter("user", 1), QuotaFilter("user", 2)]) or "")
    assert "needs a name" in (validate_filters([QuotaFilter("user", 0, None)]) or "")
    assert "takes a name" in (validate_filters([QuotaFilter("user", 1, "x")]) or "")
    assert "Unknown match" in (validate_filters([QuotaFilter("user", 7)]) or "")
    assert "Unknown quota entity" in (validate_filters([QuotaFilter("topic", 1)]) or "")


def test_manager_measures_only_quota_holders_and_shares_user_sensors() -> None:
    m = ClientQuotaManager("producer_byte_rate")
    assert not m.enabled and m.record("bob", "x", 10**9, 0) == 0
    m.update_quotas({QuotaEntity("alice", None): 1000.0})
    assert m.enabled
    assert m.record("bob", "x", 10**9, 0) == 0 and m.sensor_count() == 0
    # a user quota is one sensor across the user's client ids
    assert m.record("alice", "a", 1000, 0) == 0
    assert m.record("alice", "b", 1000, 100) > 0
    assert m.sensor_count() == 1
    assert m.max_value_in_window("alice", "z") == 1000.0
    # a new quota applies at once to the existing sensor
    m.update_quotas({QuotaEntity("alice", None): 10**9})
    assert m.record("alice", "a", 1000, 200) == 0


def test_idle_sensors_expire() -> None:
    m = ClientQuotaManager("consumer_byte_rate")
    m.update_quotas({QuotaEntity(None, D): 1000.0})
    for i in range(50):
        m.record("", f"client-{i}", 1, 0)
    assert m.sensor_count() == 50
    m.record("", "late", 1, 3600 * 1000 + 60_001)
    assert m.sensor_count() == 1


def test_request_quota_caps_its_throttle() -> None:
    m = ClientQuotaManager("request_percentage", max_throttle_time_ms=1000)
    m.update_quotas({QuotaEntity(None, "busy"): 1.0})
    assert m.record("", "busy", 500.0, 0) == 1000  # 5 s of handler time at 1%: capped
