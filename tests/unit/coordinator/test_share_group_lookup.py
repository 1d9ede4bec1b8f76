"""The group coordinator's share-group lookup for the offset APIs (90-92): NOT_COORDINATOR for a group of a
partition it does not own, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, an empty group made on demand, and the
topics a share group has state for remembered after its members leave.
"""

from __future__ import annotations

import uuid

from coordinator_helpers import Harness

from kafkalite.coordinator.consumer_assignors import SubscribedTopic
from kafkalite.coordinator.share_group import ShareGroupConfig, ShareHeartbeat
from kafkalite.protocol.errors import ErrorCode

E = ErrorCode
TOPIC = SubscribedTopic(uuid.uuid4(), "t", 2)


def _join(h: Harness, group: str) -> str:
    r = h.coord.share_group_heartbeat(
        group, ShareHeartbeat("", 0, None, ("t",)), {"t": TOPIC}, ShareGroupConfig()
    )
    assert r.error == E.NO_ERROR and r.member_id
    return r.member_id


def test_lookup_errors_and_emptiness(h: Harness) -> None:
    assert h.coord.share_group_lookup("g").error == E.GROUP_ID_NOT_FOUND
    member = _join(h, "g")
    found = h.coord.share_group_lookup("g")
    assert found.error == E.NO_ERROR and found.group is not None
    assert found.group.state_topics == {"t": TOPIC.topic_id}
    assert h.coord.share_group_lookup("g", require_empty=True).error == E.NON_EMPTY_GROUP

    left = h.coord.share_group_heartbeat(
        "g", ShareHeartbeat(member, -1, None, None), {"t": TOPIC}, ShareGroupConfig()
    )
    assert left.error == E.NO_ERROR
    empty = h.coord.share_group_lookup("g", require_empty=True)
    assert empty.error == E.NO_ERROR and empty.group is not None
    assert empty.group.state_topics == {"t": TOPIC.topic_id}  # still listed by describe

    made = h.coord.share_group_lookup("fresh", require_empty=True, create=True)
    assert made.error == E.NO_ERROR and made.group is not None and not made.group.members
    assert "fresh" in h.coord.share_groups


def test_not_coordinator_for_an_unowned_partition(h: Harness) -> None:
    group = "elsewhere"
    h.coord.owned_partitions.discard(h.coord.partition_for(group))
    assert not h.coord.is_coordinator_for(group)
    assert h.coord.share_group_lookup(group, create=True).error == E.NOT_COORDINATOR
    assert group not in h.coord.share_groups


def test_a_classic_group_is_not_a_share_group(h: Harness) -> None:
    h.join("classic")
    found = h.coord.share_group_lookup("classic", create=True)
    assert found.error == E.GROUP_ID_NOT_FOUND
    assert found.message == "Group classic is not a share group."
