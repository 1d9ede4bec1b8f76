"""Every version of the group APIs through the broker on the wire: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, LeaveGroup, DeleteGroups, OffsetDelete."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import groups as gm
from kafkalite.protocol.messages import offsets as om
from kafkalite.testing import Broker

E = ErrorCode


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("group-apis"), group_initial_rebalance_delay_ms=0) as b:
        b.create_topic("gt", 2)
        yield b


@pytest.fixture
def client(gbroker: Broker) -> Iterator[WireClient]:
    with WireClient(gbroker.bootstrap_servers, timeout=20) as c:
        yield c


SUB = gm.encode_subscription(0, topics=["gt"], user_data=None)


@pytest.mark.parametrize("version", range(5))
def test_find_coordinator(gbroker: Broker, client: WireClient, version: int) -> None:
    if version >= 4:
        req = gm.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
        r = client.send(req, version=version)
        assert [(c.key, c.error_code, c.node_id, c.port) for c in r.coordinators] == [
            ("a", 0, 0, gbroker.port),
            ("b", 0, 0, gbroker.port),
        ]
    else:
        r = client.send(gm.FindCoordinatorRequest(key="grp", key_type=0), version=version)
        assert (r.error_code, r.node_id, r.host, r.port) == (0, 0, gbroker.host, gbroker.port)
    if version >= 1:
        bad = client.send(
            gm.FindCoordinatorRequest(
                key="" if version >= 4 else "x",
                key_type=7,
                coordinator_keys=["x"] if version >= 4 else [],
            ),
            version=version,
        )
        code = bad.coordinators[0].error_code if version >= 4 else bad.error_code
        assert code == E.INVALID_REQUEST


def _join(client: WireClient, group: str, version: int, member_id: str = "") -> Any:
    req = gm.JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[gm.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUB)],
    )
    return client.send(req, version=version)


@pytest.mark.parametrize("version", range(10))
def test_group_lifecycle_at_every_join_version(client: WireClient, version: int) -> None:
    group = f"lc-{version}-{uuid.uuid4().hex[:6]}"
    r = _join(client, group, version)
    if version >= 4:
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
        r = _join(client, group, version, r.member_id)
    assert r.error_code == 0, E.name_of(r.error_code)
    me = r.member_id
    assert (r.generation_id, r.leader, r.protocol_name) == (1, me, "range")
    assert [(m.member_id, m.metadata) for m in r.members] == [(me, SUB)]

    sv = min(version, 5)
    assignment = gm.encode_assignment(0, assigned_partitions=[], user_data=None)
    s = client.send(
        gm.SyncGroupRequest(
            group_id=group,
            generation_id=1,
            member_id=me,
            protocol_type="consumer" if sv >= 5 else None,
            protocol_name="range" if sv >= 5 else None,
            assignments=[
                gm.SyncGroupRequest.SyncGroupRequestAssignment(member_id=me, assignment=assignment)
            ],
        ),
        version=sv,
    )
    assert (s.error_code, s.assignment) == (0, assignment)

    hv = min(version, 4)
    hb = client.send(gm.HeartbeatRequest(group_id=group, generation_id=1, member_id=me), version=hv)
    assert hb.error_code == 0
    hb = client.send(gm.HeartbeatRequest(group_id=group, generation_id=9, member_id=me), version=hv)
    assert hb.error_code == E.ILLEGAL_GENERATION

    d = client.send(gm.DescribeGroupsRequest(groups=[group]), version=min(version, 5))
    (g,) = d.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.member_assignment) for m in g.members] == [(me, assignment)]

    lv = min(version, 5)
    if lv >= 3:
        leave = gm.LeaveGroupRequest(
            group_id=group,
            members=[gm.LeaveGroupRequest.MemberIdentity(member_id=me, group_instance_id=None)],
        )
        lr = client.send(leave, version=lv)
        assert lr.error_code == 0 and [(m.member_id, m.error_code) for m in lr.members] == [(me, 0)]
    else:
        lr = client.send(gm.LeaveGroupRequest(group_id=group, member_id=me), version=lv)
        assert lr.error_code == 0
    d = client.send(gm.DescribeGroupsRequest(groups=[group]), version=min(version, 5))
    assert d.groups[0].group_state == "Empty"
    dv = min(version, 2)
    dr = client.send(gm.DeleteGroupsRequest(groups_names=[group, "no-such-group"]), version=dv)
    assert [(x.group_id, x.error_code) for x in dr.results] == [
        (group, 0),
        ("no-such-group", E.GROUP_ID_NOT_FOUND),
    ]


@pytest.mark.parametrize("version", range(10))
def test_offset_commit_and_fetch_every_version(client: WireClient, version: int) -> None:
    group = f"oc-{version}-{uuid.uuid4().hex[:6]}"
    P = om.OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    req = om.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            om.OffsetCommitRequest.OffsetCommitRequestTopic(
                name="gt",
                partitions=[
                    P(partition_index=0, committed_offset=42, committed_metadata="meta"),
                    P(partition_index=1, committed_offset=7, committed_metadata=None),
                    P(partition_index=9, committed_offset=1, committed_metadata=""),
                ],
            ),
            om.OffsetCommitRequest.OffsetCommitRequestTopic(
                name="nope",
                partitions=[P(partition_index=0, committed_offset=1, committed_metadata="")],
            ),
        ],
    )
    r = client.send(req, version=version)
    assert [[(p.partition_index, p.error_code) for p in t.partitions] for t in r.topics] == [
        [(0, 0), (1, 0), (9, E.UNKNOWN_TOPIC_OR_PARTITION)],
        [(0, E.UNKNOWN_TOPIC_OR_PARTITION)],
    ]
    fv = version
    if fv >= 8:
        fr = client.send(
            om.OffsetFetchRequest(
                groups=[
                    om.OffsetFetchRequest.OffsetFetchRequestGroup(
                        group_id=group,
                        topics=[
                            om.OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                                name="gt", partition_indexes=[0, 1]
                            )
                        ],
                    ),
                    om.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None),
                ]
            ),
            version=fv,
        )
        listed, everything = fr.groups
        parts = [
            (p.partition_index, p.committed_offset, p.metadata)
            for t in listed.topics
            for p in t.partitions
        ]
        assert parts == [(0, 42, "meta"), (1, 7, "")]
        assert [
            (p.partition_index, p.committed_offset) for t in everything.topics for p in t.partitions
        ] == [(0, 42), (1, 7)]
    else:
        fr = client.send(
            om.OffsetFetchRequest(
                group_id=group,
                topics=[
                    om.OffsetFetchRequest.OffsetFetchRequestTopic(
                        name="gt", partition_indexes=[0, 1, 5]
                    )
                ],
            ),
            version=fv,
        )
        parts = [
            (p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for t in fr.topics
            for p in t.partitions
        ]
        assert parts == [(0, 42, "meta", 0), (1, 7, "", 0), (5, -1, "", 0)]
        if fv >= 2:
            fr = client.send(om.OffsetFetchRequest(group_id=group, topics=None), version=fv)
            assert [
                (p.partition_index, p.committed_offset) for t in fr.topics for p in t.partitions
            ] == [(0, 42), (1, 7)]


def test_offset_delete_and_list_groups(client: WireClient) -> None:
    group = f"od-{uuid.uuid4().hex[:6]}"
    P = om.OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    client.send(
        om.OffsetCommitRequest(
            group_id=group,
            topics=[
                om.OffsetCommitRequest.OffsetCommitRequestTopic(
                    name="gt", partitions=[P(partition_index=0, committed_offset=3)]
                )
            ],
        ),
        version=2,
    )
    for v in range(6):
        listed = client.send(
            gm.ListGroupsRequest(states_filter=["Empty"] if v >= 4 else []), version=v
        )
        assert listed.error_code == 0
        mine = [g for g in listed.groups if g.group_id == group]
        assert len(mine) == 1 and mine[0].protocol_type == ""
        if v >= 4:
            assert mine[0].group_state == "Empty"
        if v >= 5:
            assert mine[0].group_type == "classic"
    # filters compare case-insensitively (KIP-518 states, KIP-848 types); every group is classic
    for states, types, shown in [
        (["EMPTY"], ["Classic"], True),
        (["Stable"], [], False),
        ([], ["consumer"], False),
        ([], ["no-such-type"], False),
    ]:
        listed = client.send(
            gm.ListGroupsRequest(states_filter=states, types_filter=types), version=5
        )
        assert listed.error_code == 0
        assert any(g.group_id == group for g in listed.groups) is shown, (states, types)
    D = om.OffsetDeleteRequest
    r = client.send(
        D(
            group_id=group,
            topics=[
                D.OffsetDeleteRequestTopic(
                    name="gt",
                    partitions=[
                        D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)
                    ],
                )
            ],
        ),
        version=0,
    )
    assert r.error_code == 0 and r.topics[0].partitions[0].error_code == 0
    r = client.send(D(group_id="missing-group", topics=[]), version=0)
    assert r.error_code == E.GROUP_ID_NOT_FOUND
    fr = client.send(om.OffsetFetchRequest(group_id=group, topics=None), version=7)
    assert fr.topics == []
