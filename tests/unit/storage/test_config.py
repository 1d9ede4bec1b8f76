"""LogConfig: Kafka property names, defaults, parsing and validation."""

from __future__ import annotations

import pytest

from kafkalite.storage.config import TOPIC_CONFIG_DEFAULTS, TOPIC_CONFIG_DOCS, LogConfig
from kafkalite.storage.errors import InvalidConfig


def test_defaults_match_kafka() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.flush_messages == 2**63 - 1
    assert c.cleanup_policy == "delete"
    assert c.max_message_bytes == 1048588
    assert TOPIC_CONFIG_DEFAULTS["segment.bytes"] == "1073741824"
    assert TOPIC_CONFIG_DEFAULTS["min.cleanable.dirty.ratio"] == "0.5"
    assert set(TOPIC_CONFIG_DOCS) == set(TOPIC_CONFIG_DEFAULTS)


def test_from_properties_roundtrip() -> None:
    c = LogConfig.from_properties(
        {
            "segment.bytes": "1000",
            "cleanup.policy": "compact,delete",
            "retention.ms": "-1",
            "message.timestamp.type": "LogAppendTime",
            "unclean.leader.election.enable": "true",
        }
    )
    assert c.segment_bytes == 1000 and c.compact and c.delete and c.retention_ms == -1
    assert c.log_append_time and c.unclean_leader_election_enable
    again = LogConfig.from_properties(c.to_properties())
    assert again == c
    assert c.overrides_from(LogConfig()) == {
        "segment.bytes": "1000",
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
        "message.timestamp.type": "LogAppendTime",
        "unclean.leader.election.enable": "true",
    }


def test_base_config_is_kept() -> None:
    base = LogConfig(segment_bytes=5000)
    c = LogConfig.from_properties({"retention.bytes": "10"}, base)
    assert c.segment_bytes == 5000 and c.retention_bytes == 10
    assert base.retention_bytes == -1


@pytest.mark.parametrize(
    "props",
    [
        {"no.such.config": "1"},
        {"segment.bytes": "abc"},
        {"cleanup.policy": "shred"},
        {"message.timestamp.type": "Whenever"},
        {"min.cleanable.dirty.ratio": "2"},
        {"segment.bytes": "1"},
    ],
)
def test_invalid_properties(props: dict[str, str]) -> None:
    with pytest.raises(InvalidConfig):
        LogConfig.from_properties(props)


def test_broker_property_names() -> None:
    c = LogConfig.from_broker_properties(
        {"log.retention.hours": "1", "log.segment.bytes": "2048", "message.max.bytes": "99"}
    )
    assert c.retention_ms == 3_600_000 and c.segment_bytes == 2048 and c.max_message_bytes == 99
    c = LogConfig.from_broker_properties({"log.retention.hours": "1", "log.retention.ms": "5"})
    assert c.retention_ms == 5
