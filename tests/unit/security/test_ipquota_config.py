"""KIP-612's ip quota entity as pure logic: which names and keys it takes, how it is refused
beside a user or client-id, and how DescribeClientQuotas filters find it."""

from __future__ import annotations

import pytest

from kafkalite.security.quota import (
    DEFAULT_ENTITY,
    IP_RATE_UNLIMITED,
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
IP = QuotaEntity(ip="10.0.0.1")


@pytest.mark.parametrize(
    ("name", "entity"),
    [
        ("10.0.0.1", QuotaEntity(ip="10.0.0.1")),
        (None, QuotaEntity(ip=D)),  # null: the default of every address without its own
        ("::0001", QuotaEntity(ip="::1")),  # kept in canonical form
        ("2001:DB8:0:0::1", QuotaEntity(ip="2001:db8::1")),
    ],
)
def test_ip_entities(name: str | None, entity: QuotaEntity) -> None:
    assert entity_from_parts({"ip": name}) == entity
    assert entity_parts(entity) == [("ip", name if name is None else entity.ip)]


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        ({"ip": "10.0.0.1", "user": "alice"}, "IP entity should not be used with user/client ID"),
        ({"ip": None, "client-id": "app"}, "IP entity should not be used with user/client ID"),
        ({"ip": "not-an-ip"}, "not-an-ip is not a valid IP address"),
        ({"ip": "localhost"}, "not host names"),
        ({"ip": "10.0.0.256"}, "not a valid IP"),
        ({"ip": ""}, "empty"),
    ],
)
def test_bad_ip_entities(parts: dict[str, str | None], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        entity_from_parts(parts)
    with pytest.raises(ValueError, match="IP entity should not"):
        QuotaEntity("alice", None, "10.0.0.1")


def test_an_ip_entity_takes_only_connection_creation_rate() -> None:
    assert validate_quota_value("connection_creation_rate", 100, IP) is None
    assert validate_quota_value("connection_creation_rate", 0, IP) is None  # Kafka: at least 0
    assert validate_quota_value("connection_creation_rate", IP_RATE_UNLIMITED, IP) is None
    for key in ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "bogus"):
        why = validate_quota_value(key, 100, IP) or ""
        assert "only connection_creation_rate" in why, key
    # Kafka's type for it is INT, at least 0
    assert "INT" in (validate_quota_value("connection_creation_rate", 2.5, IP) or "")
    for bad in (-1.0, float("nan"), float("inf"), IP_RATE_UNLIMITED + 1.0):
        assert "between 0 and" in (validate_quota_value("connection_creation_rate", bad, IP) or "")
    # ... and a user or client-id entity does not take it
    for entity in (QuotaEntity("alice", None), QuotaEntity(None, D)):
        why = validate_quota_value("connection_creation_rate", 5, entity) or ""
        assert "quota of ip entities" in why
        assert validate_quota_value("producer_byte_rate", 5, entity) is None
    assert format_quota_value("connection_creation_rate", 100.0) == "100"


ENTITIES = [
    QuotaEntity("alice", None),
    QuotaEntity(None, "app"),
    QuotaEntity(ip="10.0.0.1"),
    QuotaEntity(ip="10.0.0.2"),
    QuotaEntity(ip=D),
]


@pytest.mark.parametrize(
    ("filters", "strict", "expected"),
    [
        ([], False, ENTITIES),
        ([QuotaFilter("ip", 0, "10.0.0.1")], False, [ENTITIES[2]]),
        ([QuotaFilter("ip", 1)], True, [ENTITIES[4]]),
        ([QuotaFilter("ip", 2)], True, ENTITIES[2:4]),
        ([QuotaFilter("user", 2)], False, ENTITIES[:1]),  # a user filter finds no ip entity
        ([QuotaFilter("client-id", 2)], True, ENTITIES[1:2]),
    ],
)
def test_describe_filters_find_ip_entities(
    filters: list[QuotaFilter], strict: bool, expected: list[QuotaEntity]
) -> None:
    assert validate_filters(filters) is None
    assert matching_entities(ENTITIES, filters, strict) == expected


def test_an_ip_filter_is_not_combined_with_user_or_client_id() -> None:
    why = validate_filters([QuotaFilter("ip", 2), QuotaFilter("user", 1)]) or ""
    assert "IP filter component should not be used with user or clientId" in why
