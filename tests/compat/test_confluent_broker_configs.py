"""confluent-kafka's AdminClient altering and describing dynamic broker configs of broker "0".

librdkafka refuses an empty resource name client-side, so the cluster default "" is set over the raw wire.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from kafkalite.cli.wire import WireClient  # noqa: E402
from kafkalite.protocol.schema import APIS  # noqa: E402
from kafkalite.testing import Broker  # noqa: E402


@pytest.fixture
def broker(tmp_path: Any) -> Any:
    with Broker(tmp_path / "data") as b:
        yield b


def _describe(admin: AdminClient, name: str) -> dict[str, Any]:
    res = ConfigResource(ConfigResource.Type.BROKER, name)
    return dict(admin.describe_configs([res])[res].result(30))


def test_dynamic_broker_configs_with_admin_client(broker: Any) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = f"bc-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    with WireClient(broker.bootstrap_servers, timeout=10) as wire:
        inc = APIS[44].request
        res = inc.AlterConfigsResource(
            resource_type=4,
            resource_name="",
            configs=[
                inc.AlterConfigsResource.AlterableConfig(
                    name="log.retention.ms", config_operation=0, value="90000"
                )
            ],
        )
        assert wire.send(inc(resources=[res], validate_only=False)).responses[0].error_code == 0
    assert broker.server.get_log(topic, 0).config.retention_ms == 90000

    per_broker = ConfigResource(
        ConfigResource.Type.BROKER,
        "0",
        incremental_configs=[
            ConfigEntry("log.segment.bytes", "300000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([per_broker])[per_broker].result(30)
    assert broker.server.get_log(topic, 0).config.segment_bytes == 300000

    cfg = _describe(admin, "0")
    assert cfg["log.segment.bytes"].value == "300000"
    assert cfg["log.segment.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not cfg["log.segment.bytes"].is_read_only
    assert cfg["log.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert cfg["broker.id"].is_read_only
    assert cfg["log.index.interval.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    # legacy AlterConfigs replaces the whole per-broker set
    legacy = ConfigResource(
        ConfigResource.Type.BROKER, "0", set_config={"log.flush.interval.ms": "5000"}
    )
    with (
        pytest.deprecated_call()
    ):  # confluent-kafka deprecates the legacy API; brokers still serve it
        futures = admin.alter_configs([legacy])
    futures[legacy].result(30)
    cfg = _describe(admin, "0")
    assert cfg["log.flush.interval.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert cfg["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert broker.server.get_log(topic, 0).config.flush_ms == 5000

    # read-only configs are refused (librdkafka routes a broker resource to that broker, so a
    # wrong id never reaches us: the unit tests cover that error)
    bad = ConfigResource(
        ConfigResource.Type.BROKER,
        "0",
        incremental_configs=[
            ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([bad])[bad].result(30)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST
