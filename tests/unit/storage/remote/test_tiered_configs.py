"""KIP-405's topic configs under Kafka's names and defaults, and Kafka's refusals of bad combinations."""

from __future__ import annotations

import pytest

from kafkalite.storage.config import TOPIC_CONFIG_DEFAULTS, LogConfig
from kafkalite.storage.errors import InvalidConfig


def test_defaults_and_the_local_part_following_retention() -> None:
    for name, default in {
        "remote.storage.enable": "false",
        "local.retention.ms": "-2",
        "local.retention.bytes": "-2",
        "remote.log.copy.disable": "false",
        "remote.log.delete.on.disable": "false",
    }.items():
        assert TOPIC_CONFIG_DEFAULTS[name] == default
    cfg = LogConfig.from_properties({"retention.ms": "5000", "retention.bytes": "900"})
    assert (cfg.local_retention_ms_effective, cfg.local_retention_bytes_effective) == (5000, 900)
    cfg = LogConfig.from_properties(
        {"remote.storage.enable": "true", "local.retention.ms": "10", "retention.ms": "5000"}
    )
    assert cfg.local_retention_ms_effective == 10
    broker = LogConfig.from_broker_properties({"log.local.retention.bytes": "123"})
    assert broker.local_retention_bytes == 123


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"remote.storage.enable": "true", "cleanup.policy": "compact"},
            "Remote log storage is unsupported for the compacted topics",
        ),
        (
            {"remote.storage.enable": "true", "local.retention.ms": "9000", "retention.ms": "5000"},
            "Invalid value 9000 for configuration local.retention.ms: Value must not be more than "
            "retention.ms property value: 5000",
        ),
        (
            {
                "remote.storage.enable": "true",
                "local.retention.bytes": "-1",
                "retention.bytes": "50",
            },
            "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as "
            "retention.bytes value is set as 50.",
        ),
        ({"local.retention.ms": "-3"}, "Value must be at least -2"),
        ({"remote.storage.enable": "maybe"}, "Expected value to be either true or false"),
    ],
)
def test_kafkas_refusals(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfig, match=message.replace(".", r"\.")):
        LogConfig.from_properties(props)


def test_a_local_part_without_a_whole_log_bound_is_fine() -> None:
    LogConfig.from_properties(
        {"remote.storage.enable": "true", "local.retention.ms": "-1", "retention.ms": "-1"}
    )
    LogConfig.from_properties({"remote.storage.enable": "true", "local.retention.bytes": "10"})
