"""The broker's remote storage manager from server.properties: Kafka's LocalTieredStorage and Aiven's plugin
names map to the directory store; anything else, or a missing or unusable directory, is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.remote_storage import (
    AIVEN_FILESYSTEM,
    AIVEN_RSM,
    AIVEN_S3,
    KAFKA_LOCAL_TIERED_STORAGE,
    build_remote_storage_manager,
)
from kafkalite.storage.remote import LocalTieredStorage


def _cfg(tmp: Path, **props: str) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp / "data"), **props})


def test_kafka_and_aiven_names_give_the_directory_store(tmp_path: Path) -> None:
    cfg = _cfg(
        tmp_path,
        **{
            "remote.log.storage.manager.class.name": KAFKA_LOCAL_TIERED_STORAGE,
            "rsm.config.dir": str(tmp_path / "a"),
        },
    )
    assert not any("rsm.config" in w for w in cfg.warnings)
    rsm = build_remote_storage_manager(cfg)
    assert isinstance(rsm, LocalTieredStorage) and rsm.root == tmp_path / "a"
    cfg = _cfg(
        tmp_path,
        **{
            "remote.log.storage.manager.class.name": AIVEN_RSM,
            "rsm.config.storage.backend.class": AIVEN_FILESYSTEM,
            "rsm.config.storage.root": str(tmp_path / "b"),
        },
    )
    assert isinstance(build_remote_storage_manager(cfg), LocalTieredStorage)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({}, "needs remote.log.storage.manager.class.name"),
        ({"remote.log.storage.manager.class.name": "com.example.Nope"}, "not a manager"),
        ({"remote.log.storage.manager.class.name": KAFKA_LOCAL_TIERED_STORAGE}, "rsm.config.dir"),
        (
            {
                "remote.log.storage.manager.class.name": AIVEN_RSM,
                "rsm.config.storage.backend.class": AIVEN_S3,
            },
            "needs rsm.config.storage.s3.bucket.name",
        ),
        (
            {
                "remote.log.storage.manager.class.name": AIVEN_RSM,
                "rsm.config.storage.backend.class": AIVEN_S3,
                "rsm.config.storage.s3.bucket.name": "b",
                "rsm.config.storage.s3.endpoint.url": "http://127.0.0.1:9",
                "rsm.config.storage.s3.region": "us-east-1",
                "rsm.config.storage.aws.access.key.id": "k",
                "rsm.config.storage.aws.secret.access.key": "s",
            },
            "bucket 'b' at http://127.0.0.1:9 is not reachable",
        ),
    ],
)
def test_bad_settings_are_one_line(props: dict[str, str], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        build_remote_storage_manager(_cfg(tmp_path, **props))
    assert "\n" not in str(info.value)


def test_an_unusable_directory_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    cfg = _cfg(
        tmp_path,
        **{
            "remote.log.storage.manager.class.name": KAFKA_LOCAL_TIERED_STORAGE,
            "rsm.config.dir": str(tmp_path / "file" / "sub"),
        },
    )
    with pytest.raises(ConfigError, match=r"rsm\.config\.dir="):
        build_remote_storage_manager(cfg)
