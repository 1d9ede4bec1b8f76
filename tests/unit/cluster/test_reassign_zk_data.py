"""The znodes of reassignment as Kafka writes them: a topic's adding / removing replicas (Kafka 2.4+),
and the legacy /admin/reassign_partitions request; malformed documents are refused.
"""

from __future__ import annotations

import json
import uuid

import pytest

from kafkalite.cluster import zk_data as zd


def test_topic_znode_keeps_the_moves_in_flight() -> None:
    tid = uuid.uuid4()
    data = zd.encode_topic(tid, {0: (2, 3, 4, 1), 1: (1, 2)}, {0: (4,)}, {0: (1,)})
    doc = json.loads(data)
    assert doc["partitions"] == {"0": [2, 3, 4, 1], "1": [1, 2]}
    assert doc["adding_replicas"] == {"0": [4]} and doc["removing_replicas"] == {"0": [1]}
    a = zd.decode_topic("t", data)
    assert (a.topic_id, a.adding, a.removing) == (tid, {0: (4,)}, {0: (1,)})
    # a znode written by Kafka before 2.4 has no such fields; empty lists mean nothing moves
    old = json.dumps({"version": 1, "partitions": {"0": [1]}}).encode()
    assert zd.decode_topic("t", old).adding == {}
    empty = json.dumps({"version": 2, "partitions": {"0": [1]}, "adding_replicas": {"0": []}})
    assert zd.decode_topic("t", empty.encode()).adding == {}
    with pytest.raises(zd.ZkDataError):
        zd.decode_topic("t", b'{"partitions":{"0":[1]},"adding_replicas":{"0":"x"}}')


def test_legacy_reassignment_request_round_trips_kafkas_json() -> None:
    kafka_written = (
        b'{"version":1,"partitions":[{"topic":"a","partition":4,"replicas":[2,4,7]},'
        b'{"topic":"b","partition":2,"replicas":[1,5,7],"log_dirs":["any","any","any"]}]}'
    )
    targets = zd.decode_reassignment_request(kafka_written)
    assert targets == {("a", 4): (2, 4, 7), ("b", 2): (1, 5, 7)}
    assert zd.decode_reassignment_request(zd.encode_reassignment_request(targets)) == targets
    for bad in (b"[]", b'{"version":1}', b'{"partitions":[{"topic":"a","replicas":[1]}]}'):
        with pytest.raises(zd.ZkDataError):
            zd.decode_reassignment_request(bad)
