"""Broker configuration parsing (Kafka property names) and the local metadata store (topics, ids, meta.properties)."""

from __future__ import annotations

import uuid

import pytest

from kafkalite.broker.config.broker_config import (
    BrokerConfig,
    ConfigError,
    Listener,
    parse_properties_text,
)
from kafkalite.cluster.metadata import (
    LocalMetadataStore,
    MetadataError,
    ensure_meta_properties,
    new_cluster_id,
    topic_name_error,
)


def test_properties_text_parsing():
    text = "# comment\n! also\nbroker.id = 3\nlisteners: PLAINTEXT://0.0.0.0:1234\nlog.dirs=/a,\\\n /b\nempty=\n"
    props = parse_properties_text(text)
    assert props == {
        "broker.id": "3",
        "listeners": "PLAINTEXT://0.0.0.0:1234",
        "log.dirs": "/a,/b",
        "empty": "",
    }


def test_defaults_are_kafkas_and_serve_defaults():
    cfg = BrokerConfig()
    assert cfg.broker_id == 0
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert [str(p) for p in cfg.log_dirs] == ["data"]
    assert cfg.num_partitions == 1 and cfg.auto_create_topics
    assert cfg.message_max_bytes == 1048588
    assert cfg.socket_request_max_bytes == 104857600


def test_overrides_and_file(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("num.partitions=4\nauto.create.topics.enable=false\n")
    cfg = BrokerConfig.from_sources(f, ["num.partitions=6", "log.retention.hours=1"])
    assert cfg.num_partitions == 6 and not cfg.auto_create_topics
    assert cfg.topic_default("retention.ms") == ("3600000", "log.retention.hours")
    assert cfg.topic_default("segment.bytes") == ("1073741824", None)


def test_bad_values_are_refused():
    with pytest.raises(ConfigError):
        BrokerConfig({"num.partitions": "many"})
    with pytest.raises(ConfigError):
        BrokerConfig({"auto.create.topics.enable": "yes"})
    with pytest.raises(ConfigError):
        BrokerConfig.from_sources(None, ["no-equals-sign"])
    with pytest.raises(ConfigError):
        BrokerConfig({"listeners": "PLAINTEXT://host-without-port"})


def test_topic_names():
    assert topic_name_error("ok.name_1-2") is None
    for bad in ("", ".", "..", "a" * 250, "sp ace", "slash/", "ümlaut"):
        assert topic_name_error(bad)
    assert topic_name_error("a" * 249) is None


def test_metadata_store_persists_ids_and_configs(tmp_path):
    store = LocalMetadataStore(tmp_path)
    store.load()
    info = store.create_topic("orders", 3, {"retention.ms": "1000"})
    assert isinstance(info.topic_id, uuid.UUID)
    with pytest.raises(MetadataError):
        store.create_topic("orders", 1)
    with pytest.raises(MetadataError):
        store.create_topic("or_ders", 1) if False else store.create_topic("orders.", 0)
    store.create_topic("a.b", 1)
    with pytest.raises(MetadataError):
        store.create_topic("a_b", 1)  # collides with a.b in metric names, as in Kafka
    store.set_partitions("orders", 5)
    again = LocalMetadataStore(tmp_path)
    again.load()
    got = again.get("orders")
    assert got is not None and (got.topic_id, got.partitions, got.configs) == (
        info.topic_id,
        5,
        {"retention.ms": "1000"},
    )
    assert again.by_id(info.topic_id) is got
    again.delete_topic("orders")
    third = LocalMetadataStore(tmp_path)
    third.load()
    assert third.get("orders") is None and third.get("a.b") is not None


def test_meta_properties_cluster_id(tmp_path):
    cid = new_cluster_id()
    assert len(cid) == 22 and "=" not in cid
    a = ensure_meta_properties([tmp_path / "d1", tmp_path / "d2"], 1)
    assert len(a) == 22
    assert ensure_meta_properties([tmp_path / "d1", tmp_path / "d2"], 1) == a
    assert f"cluster.id={a}" in (tmp_path / "d2" / "meta.properties").read_text()
    with pytest.raises(MetadataError):
        ensure_meta_properties([tmp_path / "d1"], 2)
