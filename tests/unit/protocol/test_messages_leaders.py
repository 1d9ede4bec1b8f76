"""ElectLeaders (43) on the wire: a null partition list (every partition) and the election type (absent
at v0, where it is always preferred) survive a round trip at each version; the response's top-level
error code exists from v1.
"""

from __future__ import annotations

import pytest

from kafkalite.protocol.exceptions import EncodeError
from kafkalite.protocol.messages.leaders import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    ElectLeadersRequest,
    ElectLeadersResponse,
)


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("named", [True, False])
def test_request_round_trip(version: int, named: bool) -> None:
    topics = [ElectLeadersRequest.TopicPartitions(topic="orders", partitions=[0, 2])]
    etype = ELECTION_UNCLEAN if version >= 1 else ELECTION_PREFERRED
    req = ElectLeadersRequest(
        election_type=etype, topic_partitions=topics if named else None, timeout_ms=1234
    )
    back = ElectLeadersRequest.decode(req.encode(version), version)
    assert back.timeout_ms == 1234
    assert back.election_type == etype
    if named:
        assert [(t.topic, list(t.partitions)) for t in back.topic_partitions] == [
            ("orders", [0, 2])
        ]
    else:
        assert back.topic_partitions is None


def test_v0_cannot_carry_an_unclean_election() -> None:
    with pytest.raises(EncodeError):
        ElectLeadersRequest(election_type=ELECTION_UNCLEAN, topic_partitions=None).encode(0)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_response_round_trip(version: int) -> None:
    T = ElectLeadersResponse.ReplicaElectionResult
    resp = ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=41 if version >= 1 else 0,
        replica_election_results=[
            T(
                topic="orders",
                partition_result=[
                    T.PartitionResult(partition_id=0, error_code=0, error_message=None),
                    T.PartitionResult(partition_id=1, error_code=84, error_message="not needed"),
                ],
            )
        ],
    )
    back = ElectLeadersResponse.decode(resp.encode(version), version)
    assert back.error_code == (41 if version >= 1 else 0)
    (r,) = back.replica_election_results
    assert [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result] == [
        (0, 0, None),
        (1, 84, "not needed"),
    ]
