"""A Fetch answer for a partition in error carries an empty record set, never a null one, at every
version: Kafka sends empty records there, and librdkafka cannot parse a null set (it retried the same
fetch forever after a leader-epoch bump, and the partition was never consumed again)."""

from __future__ import annotations

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.testing import Broker

FETCH = APIS[1]


def _fetch(client: WireClient, topic: str, partition: int, epoch: int, version: int) -> object:
    F = FETCH.request
    req = F(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            F.FetchTopic(
                topic=topic,
                partitions=[
                    F.FetchTopic.FetchPartition(
                        partition=partition,
                        fetch_offset=0,
                        partition_max_bytes=1 << 16,
                        current_leader_epoch=epoch,
                        log_start_offset=-1,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return client.send(req, version=version)


@pytest.mark.parametrize("version", [4, 9, 12])
def test_error_partitions_carry_empty_records(
    broker: Broker, client: WireClient, topic: str, version: int
) -> None:
    broker.create_topic(topic, 1)
    cases = [(0, 7, ErrorCode.UNKNOWN_LEADER_EPOCH), (5, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    if version < 9:  # no current leader epoch before v9: only the unknown partition
        cases = cases[1:]
    for partition, epoch, code in cases:
        resp = _fetch(client, topic, partition, epoch, version)
        (pr,) = resp.responses[0].partitions  # type: ignore[attr-defined]
        assert pr.error_code == code
        assert pr.records == b"", f"v{version} {ErrorCode.name_of(code)}: records {pr.records!r}"
