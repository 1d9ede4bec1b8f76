"""Metadata answers reuse each unchanged topic's encoded entry: the bytes are those of encoding it
afresh at every version, a change to the topic or to the live brokers is seen at once, and a
deleted topic's entries go with it (they are the broker's, not the process's)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.codec import Encoded
from kafkalite.protocol.messages.metadata import MetadataResponse
from kafkalite.protocol.schema import APIS, all_versions
from kafkalite.testing import Broker

_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition


def _response(topics: list[Any]) -> Any:
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id="c",
        controller_id=1,
        topics=topics,
    )


def test_an_encoded_topic_writes_the_bytes_of_the_topic_at_every_version() -> None:
    def topic(i: int) -> Any:
        return _Topic(
            error_code=0,
            name=f"t{i}",
            topic_id=uuid.UUID(int=i + 1),
            partitions=[
                _Partition(
                    error_code=0,
                    partition_index=p,
                    leader_id=1,
                    leader_epoch=3,
                    replica_nodes=[1, 2],
                    isr_nodes=[1],
                    offline_replicas=[2],
                )
                for p in range(4)
            ],
        )

    for v in all_versions(MetadataResponse):
        codec = _Topic._schema.codec(v)
        plain = _response([topic(0), topic(1)]).encode(v)
        mixed = _response([codec.encode(topic(0)), topic(1)]).encode(v)
        assert isinstance(codec.encode(topic(0)), Encoded)
        assert mixed == plain, v


def test_metadata_answers_follow_topic_changes(tmp_path: Path) -> None:
    with Broker(tmp_path) as b, WireClient(b.bootstrap_servers, timeout=10) as wc:
        create = APIS[19].request
        wc.send(
            create(
                topics=[create.CreatableTopic(name="m", num_partitions=2, replication_factor=1)],
                timeout_ms=5000,
            )
        )
        for v in (1, 9, 12):  # (each version has its own entry)
            first = wc.send(APIS[3].request(topics=None), version=v)
            again = wc.send(APIS[3].request(topics=None), version=v)
            assert [len(t.partitions) for t in first.topics if t.name == "m"] == [2]
            assert first.topics == again.topics
        grow = APIS[37].request
        answer = wc.send(
            grow(
                topics=[grow.CreatePartitionsTopic(name="m", count=5, assignments=None)],
                timeout_ms=5000,
            )
        )
        assert answer.results[0].error_code == 0
        for v in (1, 9, 12):
            md = wc.send(APIS[3].request(topics=None), version=v)
            assert [
                sorted(p.partition_index for p in t.partitions) for t in md.topics if t.name == "m"
            ] == [[0, 1, 2, 3, 4]], v
        assert "m" in b.server.metadata_cache.derived
        drop = APIS[20].request
        gone = wc.send(drop(topic_names=["m"], timeout_ms=5000), version=4)
        assert gone.responses[0].error_code == 0
        md = wc.send(APIS[3].request(topics=None), version=12)
        assert not [t for t in md.topics if t.name == "m"]
        assert "m" not in b.server.metadata_cache.derived
