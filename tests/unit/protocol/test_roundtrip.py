"""Property tests: every declared request and response round-trips at every valid version.

Also pins the registry to issue 2's list of APIs and version ranges (fails, naming them, while families are missing).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import PROTOCOL_SETTINGS, message_cases, message_strategy

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.primitives import uvarint_bytes
from kafkalite.protocol.schema import APIS, Message, Request, Response

# (name, api key, lowest version, highest version) declared, from issues 2 and 13
EXPECTED_APIS: list[tuple[str, int, int, int]] = [
    ("Produce", 0, 0, 11),
    ("Fetch", 1, 0, 18),
    ("ListOffsets", 2, 0, 10),
    ("Metadata", 3, 0, 12),
    ("OffsetCommit", 8, 0, 9),
    ("OffsetFetch", 9, 0, 9),
    ("FindCoordinator", 10, 0, 4),
    ("JoinGroup", 11, 0, 9),
    ("Heartbeat", 12, 0, 4),
    ("LeaveGroup", 13, 0, 5),
    ("SyncGroup", 14, 0, 5),
    ("DescribeGroups", 15, 0, 5),
    ("ListGroups", 16, 0, 5),
    ("SaslHandshake", 17, 0, 1),
    ("ApiVersions", 18, 0, 4),
    ("CreateTopics", 19, 0, 7),
    ("DeleteTopics", 20, 0, 6),
    ("DeleteRecords", 21, 0, 2),
    ("InitProducerId", 22, 0, 4),
    ("OffsetForLeaderEpoch", 23, 0, 4),
    ("AddPartitionsToTxn", 24, 0, 5),
    ("AddOffsetsToTxn", 25, 0, 3),
    ("EndTxn", 26, 0, 3),
    ("WriteTxnMarkers", 27, 0, 1),
    ("TxnOffsetCommit", 28, 0, 3),
    ("DescribeConfigs", 32, 0, 4),
    ("AlterConfigs", 33, 0, 2),
    ("AlterReplicaLogDirs", 34, 0, 2),  # issue 19: JBOD
    ("DescribeLogDirs", 35, 0, 4),
    ("SaslAuthenticate", 36, 0, 2),
    ("CreatePartitions", 37, 0, 3),
    ("CreateDelegationToken", 38, 0, 2),
    ("RenewDelegationToken", 39, 0, 2),
    ("ExpireDelegationToken", 40, 0, 2),
    ("DescribeDelegationToken", 41, 0, 2),
    ("DeleteGroups", 42, 0, 2),
    ("ElectLeaders", 43, 0, 2),  # KIP-460 (issue 19)
    ("IncrementalAlterConfigs", 44, 0, 1),
    ("AlterPartitionReassignments", 45, 0, 0),  # KIP-455 (issue 19)
    ("ListPartitionReassignments", 46, 0, 0),
    ("OffsetDelete", 47, 0, 0),
    ("DescribeCluster", 60, 0, 1),
    ("DescribeProducers", 61, 0, 0),
    ("DescribeTransactions", 65, 0, 0),
    ("ListTransactions", 66, 0, 1),  # v1: KIP-994 duration filter
    # issue 13: the inter-broker APIs of ZooKeeper mode
    ("LeaderAndIsr", 4, 0, 7),
    ("StopReplica", 5, 0, 4),
    ("UpdateMetadata", 6, 0, 8),
    ("ControlledShutdown", 7, 0, 3),
    ("AlterPartition", 56, 0, 3),
    # the ACL administration APIs
    ("DescribeAcls", 29, 0, 3),
    ("CreateAcls", 30, 0, 3),
    ("DeleteAcls", 31, 0, 3),
    # SCRAM credential administration (KIP-554)
    ("DescribeUserScramCredentials", 50, 0, 0),
    ("AlterUserScramCredentials", 51, 0, 0),
    # client quota administration (KIP-546)
    ("DescribeClientQuotas", 48, 0, 1),
    ("AlterClientQuotas", 49, 0, 1),
    # KIP-848 consumer groups
    ("ConsumerGroupHeartbeat", 68, 0, 1),
    ("ConsumerGroupDescribe", 69, 0, 1),
    # KIP-966: partitions paged by a cursor
    ("DescribeTopicPartitions", 75, 0, 0),
    # KIP-932 share groups (v1 is Kafka 4.1's stable version)
    ("ShareGroupHeartbeat", 76, 0, 1),
    ("ShareGroupDescribe", 77, 0, 1),
    ("ShareFetch", 78, 0, 2),
    ("ShareAcknowledge", 79, 0, 2),
    # KIP-932: share-group offset administration, as Kafka 4.1 declares it
    ("DescribeShareGroupOffsets", 90, 0, 1),
    ("AlterShareGroupOffsets", 91, 0, 0),
    ("DeleteShareGroupOffsets", 92, 0, 0),
    # KIP-932: the share coordinator's inter-broker APIs
    ("InitializeShareGroupState", 83, 0, 0),
    ("ReadShareGroupState", 84, 0, 0),
    ("WriteShareGroupState", 85, 0, 0),
    ("DeleteShareGroupState", 86, 0, 0),
    ("ReadShareGroupStateSummary", 87, 0, 0),
]

CASES = list(message_cases())


def _check_roundtrip(cls: type[Message], version: int, msg: Any, cut: int) -> None:
    data = msg.encode(version)
    assert isinstance(data, bytes)
    decoded = cls.decode(data, version)
    # decode(encode(x)) == x
    assert decoded == msg, f"{cls.__name__} v{version}: {decoded!r} != {msg!r}"
    # encode(decode(b)) == b
    assert decoded.encode(version) == data
    # the framing layer may hand over any buffer type
    assert cls.decode(memoryview(data), version) == msg
    assert cls.decode(bytearray(data), version) == msg
    # a value of another shape must not be equal by accident
    assert type(decoded) is cls
    # any strict prefix is a truncated message: a typed DecodeError, never another exception
    if data:
        prefix = data[: cut % len(data)]
        with pytest.raises(DecodeError):
            cls.decode(prefix, version)
    # a trailing byte is an error when the whole buffer must be one message
    with pytest.raises(DecodeError):
        cls.decode(data + b"\x00", version)
    # ...and is left alone when decoding from the middle of a larger buffer
    obj, end = cls.decode_from(b"\xaa" + data + b"\x00", version, 1)
    assert end == 1 + len(data)
    assert obj == msg
    # a tagged field this side does not know is skipped (forward compatibility of flexible versions)
    if cls.is_flexible(version) and _top_level_tags_at_default(cls, version, msg):
        assert data.endswith(b"\x00"), (
            "flexible message must end with its (empty) tagged-field section"
        )
        unknown = b"\x01" + uvarint_bytes(UNKNOWN_TAG) + b"\x03abc"
        extended = data[:-1] + unknown
        assert cls.decode(extended, version) == msg
        with pytest.raises(DecodeError):  # declared size beyond the end
            cls.decode(data[:-1] + b"\x01" + uvarint_bytes(UNKNOWN_TAG) + b"\x09abc", version)


UNKNOWN_TAG = 10_000


def _top_level_tags_at_default(cls: type[Message], version: int, msg: Any) -> bool:
    schema = cls._schema
    codec = schema.codec(version)
    return all(
        getattr(msg, name) == schema.default_of(fdecl)
        for name, _, _, fdecl in codec.tagged.values()
    )


@pytest.mark.parametrize(("cls", "version"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_message_roundtrip(cls: type[Message], version: int) -> None:
    @PROTOCOL_SETTINGS
    @given(msg=message_strategy(cls, version), cut=st.integers(0, 2**16))
    def check(msg: Any, cut: int) -> None:
        _check_roundtrip(cls, version, msg, cut)

    check()


@pytest.mark.parametrize(("cls", "version"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_default_instance_roundtrips(cls: type[Message], version: int) -> None:
    """`Cls()` (every field at its default) is encodable at every version and decodes back to itself."""
    msg = cls()
    data = msg.encode(version)
    assert cls.decode(data, version) == msg


def test_at_least_one_api_registered() -> None:
    assert CASES, "no API registered: kafkalite.protocol.messages imported nothing"


@pytest.mark.parametrize(
    ("name", "key", "low", "high"), EXPECTED_APIS, ids=[e[0] for e in EXPECTED_APIS]
)
def test_api_declared_at_issue_versions(name: str, key: int, low: int, high: int) -> None:
    api = APIS.get(key)
    assert api is not None, f"{name} (key {key}) is not declared"
    assert api.name == name
    assert api.request.__name__ == f"{name}Request"
    assert api.response.__name__ == f"{name}Response"
    assert issubclass(api.request, Request) and issubclass(api.response, Response)
    assert api.request.API_KEY == api.response.API_KEY == key
    assert api.request.IS_REQUEST and not api.response.IS_REQUEST
    for cls in (api.request, api.response):
        assert (cls.VALID_VERSIONS.low, cls.VALID_VERSIONS.high) == (low, high), cls.__name__
    assert api.request.FLEXIBLE_VERSIONS == api.response.FLEXIBLE_VERSIONS
    assert api.request.RESPONSE is api.response
    assert (api.min_version, api.max_version) == (low, high)


def test_no_unexpected_apis() -> None:
    expected = {key for _, key, _, _ in EXPECTED_APIS}
    extra = {k: APIS[k].name for k in APIS if k not in expected}
    assert not extra, f"APIs registered beyond the expected list: {extra}"


def test_unknown_version_is_rejected() -> None:
    for _, cls, _ in CASES:
        above = cls.VALID_VERSIONS.high + 1
        with pytest.raises(DecodeError):
            cls.decode(b"", above)


class _SliceRecordingBytes(bytes):
    """bytes that remember the size of every slice taken through indexing."""

    largest_slice = 0

    def __getitem__(self, item: Any) -> Any:
        got = super().__getitem__(item)
        if isinstance(item, slice):
            type(self).largest_slice = max(type(self).largest_slice, len(got))
        return got


def test_tagged_fields_decode_without_copying_the_buffer() -> None:
    fetch = APIS.get(1)
    if fetch is None or not fetch.response.is_flexible(fetch.max_version):
        pytest.skip("Fetch (flexible) not declared yet")
    resp_cls = fetch.response
    topic_cls = resp_cls._schema.children["responses"]
    part_cls = topic_cls._schema.children["partitions"]
    epoch_cls = part_cls._schema.children["diverging_epoch"]
    record_size = 4096
    parts = [
        part_cls(
            partition_index=i,
            records=bytes(record_size),
            diverging_epoch=epoch_cls(epoch=1, end_offset=5),
        )
        for i in range(64)
    ]
    msg = resp_cls(responses=[topic_cls(partitions=parts)])
    data = msg.encode(fetch.max_version)
    _SliceRecordingBytes.largest_slice = 0
    assert resp_cls.decode(_SliceRecordingBytes(data), fetch.max_version) == msg
    # no single copy should be much larger than one partition's records
    assert _SliceRecordingBytes.largest_slice <= 2 * record_size, (
        f"a {_SliceRecordingBytes.largest_slice}-byte slice of a {len(data)}-byte message"
    )
