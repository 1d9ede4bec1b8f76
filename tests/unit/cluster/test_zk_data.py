"""Kafka's ZooKeeper JSON: what Kafka writes decodes, what we write is what Kafka writes, and a znode
holding anything else is a ZkDataError naming the path.
"""

from __future__ import annotations

import uuid

import pytest

from kafkalite.cluster import zk_data as zd


def test_kafka_written_znodes_decode() -> None:
    broker = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://broker-2:9092"],"jmx_port":-1,"port":9092,"host":"broker-2",'
        b'"version":5,"timestamp":"1700000000000","rack":"eu-1a"}'
    )
    reg = zd.decode_broker(2, broker, 77)
    assert (reg.host, reg.port, reg.rack, reg.epoch) == ("broker-2", 9092, "eu-1a", 77)
    state = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2,1]}'
    assert zd.decode_partition_state("t", 0, state, 4) == zd.PartitionStateZNode(2, 5, (2, 1), 3, 4)
    topic = (
        b'{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":{"0":[1,2],"1":[2,1]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    t = zd.decode_topic("t", topic)
    assert t.topic_id == uuid.UUID(int=1) and t.partitions == {0: (1, 2), 1: (2, 1)}
    assert zd.decode_controller(b'{"version":1,"brokerid":3,"timestamp":"1"}') == 3
    assert zd.decode_controller_epoch(b"12") == 12
    assert zd.decode_config("/config/topics/t", b'{"version":1,"config":{"a":"1"}}') == {"a": "1"}


def test_what_we_write_reads_back() -> None:
    tid = uuid.uuid4()
    assert zd.decode_topic_id(zd.encode_topic_id(tid)) == tid
    assert len(zd.encode_topic_id(tid)) == 22
    t = zd.decode_topic("t", zd.encode_topic(tid, {0: (3, 1, 2)}))
    assert t.partitions == {0: (3, 1, 2)} and t.topic_id == tid
    s = zd.decode_partition_state("t", 0, zd.encode_partition_state(3, 9, (3, 1), 4))
    assert (s.leader, s.leader_epoch, s.isr, s.controller_epoch) == (3, 9, (3, 1), 4)
    r = zd.decode_broker(1, zd.encode_broker("h", 5, None))
    assert (r.host, r.port, r.rack) == ("h", 5, None)
    assert zd.decode_isr_change("/x", zd.encode_isr_change([("t", 1)])) == [("t", 1)]
    assert zd.decode_producer_id_block(zd.encode_producer_id_block(2, 1000, 1999)) == (1000, 1999)
    assert zd.decode_config_change("/c", zd.encode_config_change("topics/t")) == "topics/t"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"leader":"x","leader_epoch":1,"isr":[1],"controller_epoch":1}',
        b'{"leader":1,"leader_epoch":1,"isr":"1","controller_epoch":1}',
        b"\xff\xfe",
    ],
)
def test_garbage_is_a_zk_data_error_naming_the_znode(data: bytes) -> None:
    with pytest.raises(zd.ZkDataError, match="/brokers/topics/t/partitions/0/state"):
        zd.decode_partition_state("t", 0, data)


@pytest.mark.parametrize(
    "data", [b"", b"not json", b"[1]", b'{"version":1}', b'{"block_start":"x","block_end":"9"}']
)
def test_garbage_producer_id_blocks_and_config_changes_are_clear_errors(data: bytes) -> None:
    with pytest.raises(zd.ZkDataError, match="/latest_producer_id_block"):
        zd.decode_producer_id_block(data)
    if data != b'{"block_start":"x","block_end":"9"}':
        with pytest.raises(zd.ZkDataError, match="/config/changes/c1"):
            zd.decode_config_change("/config/changes/c1", data)


def test_broker_registration_names_every_listener() -> None:
    from kafkalite.cluster.metadata_cache import ListenerEndpoint

    eps = (
        ListenerEndpoint("INTERNAL", "10.0.0.1", 9092, "PLAINTEXT"),
        ListenerEndpoint("EXTERNAL", "kafka.example.com", 9093, "SSL"),
    )
    r = zd.decode_broker(4, zd.encode_broker("10.0.0.1", 9092, "r1", eps), 9)
    assert (r.host, r.port, r.rack, r.epoch) == ("10.0.0.1", 9092, "r1", 9)
    assert r.listeners == eps
    assert r.endpoint("EXTERNAL") == ("kafka.example.com", 9093)
    assert r.endpoint("NONE") == ("10.0.0.1", 9092)
