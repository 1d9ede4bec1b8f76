"""Classic consumer-group APIs: FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup,
DescribeGroups, ListGroups, DeleteGroups, and the consumer protocol subscription/assignment structs.
"""

from __future__ import annotations

from typing import Any

from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.schema import NULL, F, api, data, request, response

# ---------------------------------------------------------------------------
# FindCoordinator (10)

FindCoordinatorRequest = request(
    10,
    "FindCoordinatorRequest",
    valid="0-4",
    flexible="3+",
    fields=[
        F("key", "string", "0-3"),
        F("key_type", "int8", "1+", default=0),
        F("coordinator_keys", "[]string", "4+"),
    ],
)

FindCoordinatorResponse = response(
    10,
    "FindCoordinatorResponse",
    valid="0-4",
    flexible="3+",
    fields=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16", "0-3"),
        F("error_message", "string", "1-3", nullable="1-3", ignorable=True),
        F("node_id", "int32", "0-3"),
        F("host", "string", "0-3"),
        F("port", "int32", "0-3"),
        F(
            "coordinators",
            "[]Coordinator",
            "4+",
            fields=[
                F("key", "string", "4+"),
                F("node_id", "int32", "4+"),
                F("host", "string", "4+"),
                F("port", "int32", "4+"),
                F("error_code", "int16", "4+"),
                F("error_message", "string", "4+", nullable="4+", ignorable=True),
            ],
        ),
    ],
)

FIND_COORDINATOR = api("FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse)

# ---------------------------------------------------------------------------
# JoinGroup (11)

JoinGroupRequest = request(
    11,
    "JoinGroupRequest",
    valid="0-9",
    flexible="6+",
    fields=[
        F("group_id", "string", "0+"),
        F("session_timeout_ms", "int32", "0+"),
        F("rebalance_timeout_ms", "int32", "1+", default=-1, ignorable=True),
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "5+", nullable="5+", default=NULL),
        F("protocol_type", "string", "0+"),
        F(
            "protocols",
            "[]JoinGroupRequestProtocol",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F("metadata", "bytes", "0+"),
            ],
        ),
        F("reason", "string", "8+", nullable="8+", ignorable=True, default=NULL),
    ],
)

JoinGroupResponse = response(
    11,
    "JoinGroupResponse",
    valid="0-9",
    flexible="6+",
    fields=[
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F("error_code", "int16", "0+"),
        F("generation_id", "int32", "0+", default=-1),
        F("protocol_type", "string", "7+", nullable="7+", ignorable=True, default=NULL),
        F("protocol_name", "string", "0+", nullable="7+"),
        F("leader", "string", "0+"),
        F("skip_assignment", "bool", "9+", default=False),
        F("member_id", "string", "0+"),
        F(
            "members",
            "[]JoinGroupResponseMember",
            "0+",
            fields=[
                F("member_id", "string", "0+"),
                F("group_instance_id", "string", "5+", nullable="5+", ignorable=True, default=NULL),
                F("metadata", "bytes", "0+"),
            ],
        ),
    ],
)

JOIN_GROUP = api("JoinGroup", JoinGroupRequest, JoinGroupResponse)

# ---------------------------------------------------------------------------
# Heartbeat (12)

HeartbeatRequest = request(
    12,
    "HeartbeatRequest",
    valid="0-4",
    flexible="4+",
    fields=[
        F("group_id", "string", "0+"),
        F("generation_id", "int32", "0+"),
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=NULL),
    ],
)

HeartbeatResponse = response(
    12,
    "HeartbeatResponse",
    valid="0-4",
    flexible="4+",
    fields=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16", "0+"),
    ],
)

HEARTBEAT = api("Heartbeat", HeartbeatRequest, HeartbeatResponse)

# ---------------------------------------------------------------------------
# LeaveGroup (13)

LeaveGroupRequest = request(
    13,
    "LeaveGroupRequest",
    valid="0-5",
    flexible="4+",
    fields=[
        F("group_id", "string", "0+"),
        F("member_id", "string", "0-2"),
        F(
            "members",
            "[]MemberIdentity",
            "3+",
            fields=[
                F("member_id", "string", "3+"),
                F("group_instance_id", "string", "3+", nullable="3+", default=NULL),
                F("reason", "string", "5+", nullable="5+", ignorable=True, default=NULL),
            ],
        ),
    ],
)

LeaveGroupResponse = response(
    13,
    "LeaveGroupResponse",
    valid="0-5",
    flexible="4+",
    fields=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16", "0+"),
        F(
            "members",
            "[]MemberResponse",
            "3+",
            fields=[
                F("member_id", "string", "3+"),
                F("group_instance_id", "string", "3+", nullable="3+"),
                F("error_code", "int16", "3+"),
            ],
        ),
    ],
)

LEAVE_GROUP = api("LeaveGroup", LeaveGroupRequest, LeaveGroupResponse)

# ---------------------------------------------------------------------------
# SyncGroup (14)

SyncGroupRequest = request(
    14,
    "SyncGroupRequest",
    valid="0-5",
    flexible="4+",
    fields=[
        F("group_id", "string", "0+"),
        F("generation_id", "int32", "0+"),
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=NULL),
        F("protocol_type", "string", "5+", nullable="5+", ignorable=True, default=NULL),
        F("protocol_name", "string", "5+", nullable="5+", ignorable=True, default=NULL),
        F(
            "assignments",
            "[]SyncGroupRequestAssignment",
            "0+",
            fields=[
                F("member_id", "string", "0+"),
                F("assignment", "bytes", "0+"),
            ],
        ),
    ],
)

SyncGroupResponse = response(
    14,
    "SyncGroupResponse",
    valid="0-5",
    flexible="4+",
    fields=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16", "0+"),
        F("protocol_type", "string", "5+", nullable="5+", ignorable=True, default=NULL),
        F("protocol_name", "string", "5+", nullable="5+", ignorable=True, default=NULL),
        F("assignment", "bytes", "0+"),
    ],
)

SYNC_GROUP = api("SyncGroup", SyncGroupRequest, SyncGroupResponse)

# ---------------------------------------------------------------------------
# DescribeGroups (15)

DescribeGroupsRequest = request(
    15,
    "DescribeGroupsRequest",
    valid="0-5",
    flexible="5+",
    fields=[
        F("groups", "[]string", "0+"),
        F("include_authorized_operations", "bool", "3+"),
    ],
)

DescribeGroupsResponse = response(
    15,
    "DescribeGroupsResponse",
    valid="0-5",
    flexible="5+",
    fields=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F(
            "groups",
            "[]DescribedGroup",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("group_id", "string", "0+"),
                F("group_state", "string", "0+"),
                F("protocol_type", "string", "0+"),
                F("protocol_data", "string", "0+"),
                F(
                    "members",
                    "[]DescribedGroupMember",
                    "0+",
                    fields=[
                        F("member_id", "string", "0+"),
                        F(
                            "group_instance_id",
                            "string",
                            "4+",
                            nullable="4+",
                            ignorable=True,
                            default=NULL,
                        ),
                        F("client_id", "string", "0+"),
                        F("client_host", "string", "0+"),
                        F("member_metadata", "bytes", "0+"),
                        F("member_assignment", "bytes", "0+"),
                    ],
                ),
                F("authorized_operations", "int32", "3+", default=-(2**31)),
            ],
        ),
    ],
)

DESCRIBE_GROUPS = api("DescribeGroups", DescribeGroupsRequest, DescribeGroupsResponse)

# ---------------------------------------------------------------------------
# ListGroups (16)

ListGroupsRequest = request(
    16,
    "ListGroupsRequest",
    valid="0-5",
    flexible="3+",
    fields=[
        F("states_filter", "[]string", "4+"),
        F("types_filter", "[]string", "5+"),
    ],
)

ListGroupsResponse = response(
    16,
    "ListGroupsResponse",
    valid="0-5",
    flexible="3+",
    fields=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16", "0+"),
        F(
            "groups",
            "[]ListedGroup",
            "0+",
            fields=[
                F("group_id", "string", "0+"),
                F("protocol_type", "string", "0+"),
                F("group_state", "string", "4+", ignorable=True),
                F("group_type", "string", "5+", ignorable=True),
            ],
        ),
    ],
)

LIST_GROUPS = api("ListGroups", ListGroupsRequest, ListGroupsResponse)

# ---------------------------------------------------------------------------
# DeleteGroups (42)

DeleteGroupsRequest = request(
    42,
    "DeleteGroupsRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        F("groups_names", "[]string", "0+"),
    ],
)

DeleteGroupsResponse = response(
    42,
    "DeleteGroupsResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "results",
            "[]DeletableGroupResult",
            "0+",
            fields=[
                F("group_id", "string", "0+"),
                F("error_code", "int16", "0+"),
            ],
        ),
    ],
)

DELETE_GROUPS = api("DeleteGroups", DeleteGroupsRequest, DeleteGroupsResponse)

# ---------------------------------------------------------------------------
# Consumer embedded protocol ("consumer" protocol type): the bytes carried in
# JoinGroup protocol metadata and SyncGroup assignments, each after an int16 version.

CONSUMER_PROTOCOL_TYPE = "consumer"

ConsumerProtocolSubscription = data(
    "ConsumerProtocolSubscription",
    valid="0-3",
    flexible="none",
    fields=[
        F("topics", "[]string", "0+"),
        F("user_data", "bytes", "0+", nullable="0+", default=NULL),
        F(
            "owned_partitions",
            "[]TopicPartition",
            "1+",
            ignorable=True,
            fields=[
                F("topic", "string", "1+"),
                F("partitions", "[]int32", "1+"),
            ],
        ),
        F("generation_id", "int32", "2+", default=-1, ignorable=True),
        F("rack_id", "string", "3+", nullable="3+", ignorable=True, default=NULL),
    ],
)

ConsumerProtocolAssignment = data(
    "ConsumerProtocolAssignment",
    valid="0-3",
    flexible="none",
    fields=[
        F(
            "assigned_partitions",
            "[]TopicPartition",
            "0+",
            fields=[
                F("topic", "string", "0+"),
                F("partitions", "[]int32", "0+"),
            ],
        ),
        F("user_data", "bytes", "0+", nullable="0+", default=NULL),
    ],
)


def _encode_prefixed(cls: Any, version: int, fields: dict[str, Any]) -> bytes:
    out = bytearray()
    p.write_int16(out, version)
    cls(**fields).encode_into(out, version)
    return bytes(out)


def _decode_prefixed(cls: Any, buf: p.Buffer) -> Any:
    version, pos = p.read_int16(buf, 0)
    if version < 0:
        raise DecodeError(f"{cls.__name__}: negative version {version}")
    # a newer writer only appends fields: read the newest layout we know, ignore the rest
    known = min(version, cls.VALID_VERSIONS.high)
    return cls.decode(buf, known, pos, exact=False)


def encode_subscription(version: int, **fields: Any) -> bytes:
    """Serialize a ConsumerProtocolSubscription as JoinGroup metadata: int16 version, then the struct."""
    return _encode_prefixed(ConsumerProtocolSubscription, version, fields)


def decode_subscription(buf: p.Buffer) -> Any:
    """Parse JoinGroup consumer metadata; versions newer than 3 are read as 3 (trailing bytes ignored)."""
    return _decode_prefixed(ConsumerProtocolSubscription, buf)


def encode_assignment(version: int, **fields: Any) -> bytes:
    """Serialize a ConsumerProtocolAssignment as a SyncGroup assignment: int16 version, then the struct."""
    return _encode_prefixed(ConsumerProtocolAssignment, version, fields)


def decode_assignment(buf: p.Buffer) -> Any:
    """Parse a SyncGroup consumer assignment; versions newer than 3 are read as 3 (trailing bytes ignored)."""
    return _decode_prefixed(ConsumerProtocolAssignment, buf)
