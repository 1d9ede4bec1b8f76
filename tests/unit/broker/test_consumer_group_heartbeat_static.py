"""ConsumerGroupHeartbeat on the wire for static members: a -2 leave keeps the member, a new instance
takes its partitions over, and the old member id is fenced (FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.consumer_groups import ConsumerGroupHeartbeatRequest
from kafkalite.testing import Broker

E = ErrorCode


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("cg-static")) as b:
        b.create_topic("st", 4)
        yield b


def beat(
    c: WireClient,
    group: str,
    member: str,
    epoch: int,
    instance: str | None,
    owned: Any = None,
) -> Any:
    first = epoch == 0
    req = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        instance_id=instance,
        rack_id=None,
        subscribed_topic_regex=None,
        server_assignor=None,
        rebalance_timeout_ms=30000 if first else -1,
        subscribed_topic_names=["st"] if first else None,
        topic_partitions=[] if first else owned,
    )
    return c.send(req, version=1)


def parts(r: Any) -> set[int]:
    return {p for tp in r.assignment.topic_partitions for p in tp.partitions}


def test_static_member_leave_rejoin_and_fencing(broker: Broker) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap_servers, timeout=20) as c:
        a = beat(c, group, "a" * 22, 0, "ia")
        b = beat(c, group, "b" * 22, 0, "ib")
        assert (a.error_code, b.error_code) == (E.NO_ERROR, E.NO_ERROR), a.error_message
        a = beat(c, group, "a" * 22, a.member_epoch, "ia")  # a is told to give b its share
        kept = [
            ConsumerGroupHeartbeatRequest.TopicPartitions(
                topic_id=tp.topic_id, partitions=tp.partitions
            )
            for tp in a.assignment.topic_partitions
        ]
        a = beat(c, group, "a" * 22, a.member_epoch, "ia", kept)  # and says it did
        b = beat(c, group, "b" * 22, b.member_epoch, "ib")
        assert b.error_code == E.NO_ERROR and len(parts(b)) == 2
        b_epoch, b_parts = b.member_epoch, parts(b)
        # a -2 leave needs the instance id (Kafka's request check)
        bad = beat(c, group, "b" * 22, -2, None)
        assert (
            bad.error_code == E.INVALID_REQUEST and bad.error_message == "InstanceId can't be null."
        )
        # still in use: a new instance is refused until the old one leaves
        assert beat(c, group, "c" * 22, 0, "ib").error_code == E.UNRELEASED_INSTANCE_ID
        left = beat(c, group, "b" * 22, -2, "ib")
        assert (left.error_code, left.member_epoch) == (E.NO_ERROR, -2)
        again = beat(c, group, "c" * 22, 0, "ib")
        assert again.error_code == E.NO_ERROR and again.member_epoch == b_epoch
        assert beat(c, group, "b" * 22, b_epoch, "ib").error_code == E.FENCED_INSTANCE_ID
        assert parts(again) == b_parts
