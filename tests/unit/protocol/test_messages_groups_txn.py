"""Focused checks of the group, transaction and SASL declarations (messages/groups.py, txn.py, sasl.py).

kafka-python's classes built from Apache Kafka's JSON definitions are the oracle, byte for byte, both ways;
plus the consumer protocol subscription/assignment helpers and the version-gating rules that matter to a broker.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import protocol as kp_protocol
from kafka.protocol.admin import groups as kp_admin_groups
from kafka.protocol.admin import transactions as kp_admin_txn
from kafka.protocol.consumer import group as kp_group
from kafka.protocol.consumer import metadata as kp_consumer_metadata
from kafka.protocol.metadata import find_coordinator as kp_find_coordinator
from kafka.protocol.old import consumer_protocol as kp_old_consumer
from kafka.protocol.producer import transaction as kp_txn
from kafka.protocol.schemas.fields.codecs.types import BitField

from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError, EncodeError
from kafkalite.protocol.messages import groups, sasl, txn
from kafkalite.protocol.schema import APIS, Message, Struct, Versions, all_versions

# API key -> (name, versions we serve, first flexible version); the ranges are the ones the broker advertises
# (issue 2), the flexible boundaries are Kafka's.
EXPECTED = {
    10: ("FindCoordinator", "0-4", 3),
    11: ("JoinGroup", "0-9", 6),
    12: ("Heartbeat", "0-4", 4),
    13: ("LeaveGroup", "0-5", 4),
    14: ("SyncGroup", "0-5", 4),
    15: ("DescribeGroups", "0-5", 5),
    16: ("ListGroups", "0-5", 3),
    42: ("DeleteGroups", "0-2", 2),
    22: ("InitProducerId", "0-4", 2),
    24: ("AddPartitionsToTxn", "0-5", 3),
    25: ("AddOffsetsToTxn", "0-3", 3),
    26: ("EndTxn", "0-3", 3),
    27: ("WriteTxnMarkers", "0-1", 1),
    28: ("TxnOffsetCommit", "0-3", 3),
    61: ("DescribeProducers", "0", 0),
    65: ("DescribeTransactions", "0", 0),
    66: ("ListTransactions", "0-1", 0),  # v1: KIP-994 duration filter
    17: ("SaslHandshake", "0-1", None),
    36: ("SaslAuthenticate", "0-2", 2),
}

_KP_MODULES = (
    kp_find_coordinator,
    kp_group,
    kp_admin_groups,
    kp_txn,
    kp_admin_txn,
    kp_protocol.sasl,
)
KP: dict[str, Any] = {
    name: obj
    for mod in _KP_MODULES
    for name, obj in vars(mod).items()
    if isinstance(obj, type) and getattr(obj, "_json", None) is not None
}

CASES = [
    (key, version, nulls)
    for key in EXPECTED
    for version in range(
        Versions.parse(EXPECTED[key][1]).low, Versions.parse(EXPECTED[key][1]).high + 1
    )
    for nulls in (False, True)
]


# ---------------------------------------------------------------------------
# instance builders


def sample(cls: type[Struct], version: int, nulls: bool, ctr: Iterator[int]) -> Any:
    """Every field present at `version` gets a distinct non-default value (or null, with `nulls`, where allowed)."""
    schema = cls._schema
    kw: dict[str, Any] = {}
    for f in schema.fields:
        if version not in Versions.parse(f.versions):
            continue
        n = next(ctr)
        if nulls and version in Versions.parse(f.nullable):
            kw[f.name] = None
            continue
        t = f.type
        if t.startswith("[]"):
            elem = t[2:]
            if elem == "int32":
                kw[f.name] = [n, -n, 2**31 - 1]
            elif elem == "int64":
                kw[f.name] = [n, -(2**62)]
            elif elem == "string":
                kw[f.name] = [f"s{n}", "", "\u00fc"]
            else:
                child = schema.children[f.name]
                kw[f.name] = [sample(child, version, nulls, ctr) for _ in range(2)]
        elif t == "int8":
            kw[f.name] = n % 100 + 1
        elif t == "int16":
            kw[f.name] = n + 300
        elif t == "int32":
            kw[f.name] = n + 70_000
        elif t == "int64":
            kw[f.name] = n + 2**40
        elif t == "bool":
            kw[f.name] = not f.default
        elif t == "string":
            kw[f.name] = f"str{n}-\u00e9"
        elif t == "bytes":
            kw[f.name] = bytes([n % 256, 0, 255])
        else:  # pragma: no cover - a type these families do not use
            raise AssertionError(f"no sample for {t}")
    return cls(**kw)


def to_kp(kcls: Any, obj: Struct, version: int, top: bool = True) -> Any:
    """The same values as a kafka-python object (nested classes looked up by Kafka's struct type name)."""
    kw: dict[str, Any] = {}
    for f in obj._schema.fields:
        if version not in Versions.parse(f.versions):
            continue
        value = getattr(obj, f.name)
        child = obj._schema.children.get(f.name)
        if child is not None and value is not None:
            kchild = getattr(kcls, child.__name__)
            value = [to_kp(kchild, x, version, top=False) for x in value]
        if f.name == "authorized_operations":  # kafka-python patches this int32 into a set of bits
            value = BitField.from_32_bit_field(value & 0xFFFFFFFF)
        kw[f.name] = value
    return kcls(version=version, **kw) if top else kcls(**kw)


def _pair(key: int) -> list[tuple[type[Message], Any]]:
    a = APIS[key]
    return [(a.request, KP[a.request.__name__]), (a.response, KP[a.response.__name__])]


# ---------------------------------------------------------------------------
# registration


def test_registered_names_ranges_and_flexible_versions() -> None:
    for key, (name, valid, flex) in EXPECTED.items():
        a = APIS[key]
        assert a.name == name
        assert a.request.__name__ == f"{name}Request"
        assert a.response.__name__ == f"{name}Response"
        for cls in (a.request, a.response):
            assert key == cls.API_KEY
            assert Versions.parse(valid) == cls.VALID_VERSIONS
            first_flexible = [v for v in all_versions(cls) if cls.is_flexible(v)]
            assert (first_flexible[0] if first_flexible else None) == flex, cls.__name__


def test_module_exports() -> None:
    assert groups.JoinGroupRequest is APIS[11].request
    assert txn.InitProducerIdResponse is APIS[22].response
    assert sasl.SaslAuthenticateRequest is APIS[36].request
    assert groups.JoinGroupRequest.JoinGroupRequestProtocol.__name__ == "JoinGroupRequestProtocol"
    assert (
        txn.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic.__name__ == "AddPartitionsToTxnTopic"
    )
    resp = txn.AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    assert resp.AddPartitionsToTxnPartitionResult.__name__ == "AddPartitionsToTxnPartitionResult"


# ---------------------------------------------------------------------------
# kafka-python oracle


@pytest.mark.parametrize(("key", "version", "nulls"), CASES)
def test_bytes_match_kafka_python(key: int, version: int, nulls: bool) -> None:
    for ours, kcls in _pair(key):
        obj = sample(ours, version, nulls, itertools.count(1))
        ours_bytes = obj.encode(version)
        kp_bytes = bytes(to_kp(kcls, obj, version).encode(version=version))
        assert ours_bytes == kp_bytes, f"{ours.__name__} v{version}"
        # ours -> kafka-python -> bytes again
        assert bytes(kcls.decode(ours_bytes, version=version).encode()) == ours_bytes
        # kafka-python -> ours: same values, same bytes
        back = ours.decode(kp_bytes, version)
        assert back == obj
        assert back.encode(version) == kp_bytes


@pytest.mark.parametrize("key", list(EXPECTED))
def test_defaults_match_kafka_python(key: int) -> None:
    for ours, kcls in _pair(key):
        for version in all_versions(ours):
            kp_default = bytes(kcls(version=version).encode(version=version))
            assert ours().encode(version) == kp_default, f"{ours.__name__} v{version}"


def test_null_defaults_are_null_not_empty() -> None:
    # static membership hangs on group_instance_id being null, not "", for every version
    for cls in (groups.JoinGroupRequest, groups.HeartbeatRequest, groups.SyncGroupRequest):
        assert cls().group_instance_id is None
        assert cls.decode(cls(group_id="g").encode(0), 0).group_instance_id is None
    assert txn.TxnOffsetCommitRequest().group_instance_id is None
    assert groups.JoinGroupRequest().reason is None
    assert groups.SyncGroupResponse().protocol_name is None
    assert groups.JoinGroupResponse().protocol_type is None
    assert groups.JoinGroupResponse().protocol_name == ""  # nullable from v7 but no null default
    m = groups.LeaveGroupRequest.MemberIdentity(member_id="m")
    assert m.group_instance_id is None
    assert m.reason is None
    assert groups.DescribeGroupsResponse.DescribedGroup().authorized_operations == -(2**31)
    state = txn.DescribeProducersResponse.TopicResponse.PartitionResponse.ProducerState()
    assert (state.last_sequence, state.last_timestamp, state.current_txn_start_offset) == (
        -1,
        -1,
        -1,
    )


# ---------------------------------------------------------------------------
# version gating the broker relies on


def test_find_coordinator_single_key_and_batched() -> None:
    req = groups.FindCoordinatorRequest(key="g", key_type=1)
    with pytest.raises(EncodeError):  # transaction coordinators need v1+
        req.encode(0)
    assert groups.FindCoordinatorRequest.decode(req.encode(3), 3).key == "g"
    batched = groups.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
    with pytest.raises(EncodeError):  # CoordinatorKeys is not ignorable
        batched.encode(3)
    assert groups.FindCoordinatorRequest.decode(batched.encode(4), 4).coordinator_keys == ["a", "b"]
    coord = groups.FindCoordinatorResponse.Coordinator(key="a", node_id=1, host="h", port=9092)
    resp = groups.FindCoordinatorResponse(coordinators=[coord])
    assert (
        groups.FindCoordinatorResponse.decode(resp.encode(4), 4).coordinators[0].error_message == ""
    )


def test_ignorable_fields_are_dropped_silently() -> None:
    req = groups.JoinGroupRequest(group_id="g", rebalance_timeout_ms=5000, reason="why")
    v0 = groups.JoinGroupRequest.decode(req.encode(0), 0)
    assert (v0.rebalance_timeout_ms, v0.reason) == (-1, None)
    assert groups.JoinGroupRequest.decode(req.encode(8), 8).reason == "why"
    resp = txn.InitProducerIdResponse(throttle_time_ms=7, producer_id=3, producer_epoch=1)
    assert txn.InitProducerIdResponse.decode(resp.encode(0), 0).throttle_time_ms == 7


def test_non_ignorable_fields_refuse_old_versions() -> None:
    with pytest.raises(EncodeError):
        groups.JoinGroupRequest(group_instance_id="static-1").encode(4)
    with pytest.raises(EncodeError):
        groups.LeaveGroupRequest(
            members=[groups.LeaveGroupRequest.MemberIdentity(member_id="m")]
        ).encode(2)
    with pytest.raises(EncodeError):
        txn.InitProducerIdRequest(producer_id=5).encode(2)
    with pytest.raises(EncodeError):
        txn.TxnOffsetCommitRequest(generation_id=3).encode(2)


def test_leave_group_single_member_and_batch() -> None:
    old = groups.LeaveGroupRequest(group_id="g", member_id="m1")
    assert groups.LeaveGroupRequest.decode(old.encode(2), 2).member_id == "m1"
    batch = groups.LeaveGroupRequest(
        group_id="g",
        members=[
            groups.LeaveGroupRequest.MemberIdentity(
                member_id="m1", group_instance_id="i1", reason="bye"
            )
        ],
    )
    dec = groups.LeaveGroupRequest.decode(batch.encode(5), 5)
    assert (dec.member_id, dec.members[0].group_instance_id, dec.members[0].reason) == (
        "",
        "i1",
        "bye",
    )
    assert groups.LeaveGroupRequest.decode(batch.encode(3), 3).members[0].reason is None


def test_truncated_bodies_are_decode_errors() -> None:
    for key in EXPECTED:
        for cls, _ in _pair(key):
            for version in all_versions(cls):
                body = sample(cls, version, False, itertools.count(1)).encode(version)
                # every proper prefix of a non-empty body is short of bytes
                for cut in sorted({0, 1, len(body) // 2, len(body) - 1} & set(range(len(body)))):
                    with pytest.raises(DecodeError):
                        cls.decode(body[:cut], version)


# ---------------------------------------------------------------------------
# consumer protocol (JoinGroup metadata / SyncGroup assignment bytes)

KpSubscription = kp_consumer_metadata.ConsumerProtocolSubscription
KpAssignment = kp_consumer_metadata.ConsumerProtocolAssignment


def _subscription_fields(version: int) -> dict[str, Any]:
    tp = groups.ConsumerProtocolSubscription.TopicPartition
    fields: dict[str, Any] = {"topics": ["orders", "payments"], "user_data": b"\x01ud"}
    if version >= 1:
        fields["owned_partitions"] = [
            tp(topic="orders", partitions=[0, 3]),
            tp(topic="payments", partitions=[]),
        ]
    if version >= 2:
        fields["generation_id"] = 17
    if version >= 3:
        fields["rack_id"] = "rack-b"
    return fields


def _assignment_fields() -> dict[str, Any]:
    tp = groups.ConsumerProtocolAssignment.TopicPartition
    return {
        "assigned_partitions": [
            tp(topic="orders", partitions=[1, 2]),
            tp(topic="x", partitions=[7]),
        ],
        "user_data": b"au",
    }


@pytest.mark.parametrize("version", range(4))
def test_subscription_matches_kafka_python(version: int) -> None:
    fields = _subscription_fields(version)
    ours = groups.encode_subscription(version, **fields)
    assert ours[:2] == version.to_bytes(2, "big")
    sub = groups.ConsumerProtocolSubscription(**fields)
    kp_bytes = bytes(to_kp(KpSubscription, sub, version).encode())
    assert ours == kp_bytes
    assert groups.decode_subscription(kp_bytes) == sub
    assert bytes(KpSubscription.decode(ours).encode()) == ours


@pytest.mark.parametrize("version", range(4))
def test_assignment_matches_kafka_python(version: int) -> None:
    fields = _assignment_fields()
    ours = groups.encode_assignment(version, **fields)
    asg = groups.ConsumerProtocolAssignment(**fields)
    kp_bytes = bytes(to_kp(KpAssignment, asg, version).encode())
    assert ours == kp_bytes
    assert groups.decode_assignment(kp_bytes) == asg
    assert KpAssignment.decode(ours).assigned_partitions[0].partitions == [1, 2]


def test_consumer_protocol_v0_matches_old_hand_written_structs() -> None:
    old_meta = kp_old_consumer.ConsumerProtocolMemberMetadata_v0(
        version=0, topics=["a", "b"], user_data=b"u"
    )
    sub = groups.decode_subscription(old_meta.encode())
    assert (sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id) == (
        ["a", "b"],
        b"u",
        [],
        -1,
    )
    assert groups.encode_subscription(0, topics=["a", "b"], user_data=b"u") == old_meta.encode()
    old_asg = kp_old_consumer.ConsumerProtocolMemberAssignment_v0(
        version=0, assigned_partitions=[("t", [0, 1])], user_data=None
    )
    asg = groups.decode_assignment(old_asg.encode())
    assert [(tp.topic, tp.partitions) for tp in asg.assigned_partitions] == [("t", [0, 1])]
    assert asg.user_data is None
    ours = groups.encode_assignment(0, **_assignment_fields())
    decoded = kp_old_consumer.ConsumerProtocolMemberAssignment_v0.decode(io.BytesIO(ours))
    assert decoded.version == 0
    assert decoded.assigned_partitions == [("orders", [1, 2]), ("x", [7])]
    assert decoded.user_data == b"au"
    assert decoded.encode() == ours


def test_consumer_protocol_defaults() -> None:
    sub = groups.decode_subscription(groups.encode_subscription(0, topics=["t"]))
    assert (sub.user_data, sub.generation_id, sub.rack_id) == (None, -1, None)
    assert groups.ConsumerProtocolAssignment().user_data is None
    # v0 silently drops the ignorable later fields, like Kafka's serializer
    b0 = groups.encode_subscription(0, **_subscription_fields(3))
    assert b0 == groups.encode_subscription(0, topics=["orders", "payments"], user_data=b"\x01ud")


@pytest.mark.parametrize("newer", [4, 9, 0x7FFF])
def test_newer_versions_decode_as_highest_known(newer: int) -> None:
    body = groups.encode_subscription(3, **_subscription_fields(3))[2:]
    newer_bytes = bytearray()
    p.write_int16(newer_bytes, newer)
    newer_bytes += body + b"\x00\x00\x00\x05future"  # a field a newer writer appended
    assert groups.decode_subscription(bytes(newer_bytes)) == groups.ConsumerProtocolSubscription(
        **_subscription_fields(3)
    )
    abody = groups.encode_assignment(3, **_assignment_fields())[2:]
    abytes = bytearray()
    p.write_int16(abytes, newer)
    abytes += abody + b"\xff"
    assert groups.decode_assignment(bytes(abytes)) == groups.ConsumerProtocolAssignment(
        **_assignment_fields()
    )


@pytest.mark.parametrize(
    "bad", [b"", b"\x00", b"\xff\xff\x00\x00\x00\x00", b"\x00\x01\x00\x00\x00\x05\x00\x01a"]
)
def test_malformed_consumer_protocol_bytes(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        groups.decode_subscription(bad)
    with pytest.raises(DecodeError):
        groups.decode_assignment(bad)
