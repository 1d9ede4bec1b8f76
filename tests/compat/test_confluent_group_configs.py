"""confluent-kafka's AdminClient setting and describing a group's configs (ConfigResource GROUP).

The overrides outlive a broker restart; a bad value comes back as INVALID_CONFIG.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from kafkalite.testing import Broker  # noqa: E402

pytestmark = pytest.mark.compat


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"


def _describe(admin: AdminClient, group: str) -> dict[str, Any]:
    res = ConfigResource(ResourceType.GROUP, group)
    return dict(admin.describe_configs([res])[res].result(30))


def _set(admin: AdminClient, group: str, **configs: str) -> None:
    res = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)


def test_group_configs_with_admin_client(data_dir: Path) -> None:
    group = "share-g"
    with Broker(data_dir) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        before = _describe(admin, group)
        assert before["share.auto.offset.reset"].value == "latest"
        assert before["share.auto.offset.reset"].source == ConfigSource.DEFAULT_CONFIG.value
        assert not before["share.auto.offset.reset"].is_read_only

        _set(
            admin,
            group,
            **{"share.auto.offset.reset": "earliest", "errors.deadletterqueue.topic.name": "dlq"},
        )
        cfg = _describe(admin, group)
        assert cfg["share.auto.offset.reset"].value == "earliest"
        assert cfg["share.auto.offset.reset"].source == ConfigSource.GROUP_CONFIG.value
        assert cfg["errors.deadletterqueue.topic.name"].value == "dlq"
        assert cfg["share.record.lock.duration.ms"].value == "30000"

        with pytest.raises(KafkaException) as refused:
            _set(admin, group, **{"share.delivery.count.limit": "11"})
        err = refused.value.args[0]
        assert err.code() == KafkaError.INVALID_CONFIG
        assert "share.delivery.count.limit" in err.str()
        assert _describe(admin, group)["share.delivery.count.limit"].value == "5"
        del admin, refused  # no client left retrying the stopped broker

    with Broker(data_dir) as b:  # a restart on the same data dir
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        cfg = _describe(admin, group)
        assert cfg["share.auto.offset.reset"].value == "earliest"
        assert cfg["share.auto.offset.reset"].source == ConfigSource.GROUP_CONFIG.value
        assert cfg["errors.deadletterqueue.topic.name"].value == "dlq"
        assert b.server.group_configs.share_config(group).dlq_topic == "dlq"
        del admin
