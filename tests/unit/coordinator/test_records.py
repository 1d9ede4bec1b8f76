"""`__consumer_offsets` record layouts and group placement (Java String.hashCode, Kafka's Utils.abs)."""

from __future__ import annotations

import struct

import pytest

from kafkalite.coordinator import records as r
from kafkalite.coordinator.types import OffsetAndMetadata
from kafkalite.protocol.exceptions import DecodeError


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("", 0),
        ("a", 97),
        ("Aa", 2112),  # the classic collision pair
        ("BB", 2112),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # hashes to Integer.MIN_VALUE
        ("\u00e9", 233),
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # two UTF-16 code units
    ],
)
def test_java_string_hash(s: str, h: int) -> None:
    assert r.java_string_hash(s) == h


def test_java_hash_wraps_like_int32() -> None:
    h = r.java_string_hash("a-rather-long-consumer-group-name-0123456789")
    assert -(2**31) <= h < 2**31


@pytest.mark.parametrize(
    ("group", "n", "partition"),
    [
        ("hello", 50, 99162322 % 50),
        ("polygenelubricants", 50, 0),  # Utils.abs(MIN_VALUE) == 0, not MIN_VALUE
        ("", 50, 0),
        ("Aa", 7, 2112 % 7),
    ],
)
def test_partition_for(group: str, n: int, partition: int) -> None:
    assert r.partition_for(group, n) == partition


def test_partition_for_negative_hash_uses_absolute_value() -> None:
    # find a string with a negative hash and check abs() placement
    s = next(g for i in range(100) if r.java_string_hash(g := f"{i}-consumer-group") < 0)
    assert r.partition_for(s, 50) == (-r.java_string_hash(s)) % 50


def _kstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_offset_key_layout() -> None:
    key = r.offset_key("grp", "topic", 7)
    assert key == struct.pack(">h", 1) + _kstr("grp") + _kstr("topic") + struct.pack(">i", 7)
    assert r.parse_key(key) == r.OffsetKey("grp", "topic", 7)
    # version 0 keys have the same layout
    assert r.parse_key(struct.pack(">h", 0) + key[2:]) == r.OffsetKey("grp", "topic", 7)


def test_group_key_layout() -> None:
    key = r.group_key("grp")
    assert key == struct.pack(">h", 2) + _kstr("grp")
    assert r.parse_key(key) == r.GroupKey("grp")


@pytest.mark.parametrize(
    "bad", [b"", b"\x00", struct.pack(">h", 99) + _kstr("x"), struct.pack(">h", 1) + b"\x00\x05ab"]
)
def test_bad_keys_raise_decode_error(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        r.parse_key(bad)


def test_offset_value_v3_layout() -> None:
    om = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=1000)
    value = r.offset_value(om)
    assert value == struct.pack(">hqi", 3, 42, 5) + _kstr("meta") + struct.pack(">q", 1000)
    assert r.parse_offset_value(value) == om


def test_offset_value_with_expiry_is_v1() -> None:
    om = OffsetAndMetadata(offset=42, metadata="", commit_timestamp=1000, expire_timestamp=2000)
    value = r.offset_value(om)
    assert value == struct.pack(">hq", 1, 42) + _kstr("") + struct.pack(">qq", 1000, 2000)
    assert r.parse_offset_value(value) == om


def test_offset_value_v0_and_v4() -> None:
    v0 = struct.pack(">hq", 0, 9) + _kstr("m") + struct.pack(">q", 77)
    assert r.parse_offset_value(v0) == OffsetAndMetadata(9, -1, "m", 77, None)
    v4 = r.OffsetCommitValue(offset=9, leader_epoch=2, metadata="m", commit_timestamp=77).encode(4)
    assert r.parse_offset_value(struct.pack(">h", 4) + v4) == OffsetAndMetadata(9, 2, "m", 77, None)


def _group_value(version: int) -> bytes:
    member = r.GroupMetadataValue.MemberMetadata(
        member_id="m1",
        group_instance_id="inst" if version >= 3 else None,
        client_id="cid",
        client_host="/1.2.3.4",
        rebalance_timeout=30000,
        session_timeout=10000,
        subscription=b"sub",
        assignment=b"asg",
    )
    v = r.GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m1",
        current_state_timestamp=123 if version >= 2 else -1,
        members=[member],
    )
    return struct.pack(">h", version) + v.encode(version)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_value_every_version(version: int) -> None:
    v = r.parse_group_value(_group_value(version))
    assert (v.protocol_type, v.generation, v.protocol, v.leader) == ("consumer", 3, "range", "m1")
    m = v.members[0]
    assert (m.member_id, m.client_id, m.client_host, m.session_timeout) == (
        "m1",
        "cid",
        "/1.2.3.4",
        10000,
    )
    assert (m.subscription, m.assignment) == (b"sub", b"asg")
    assert m.rebalance_timeout == (30000 if version >= 1 else 0)
    assert (m.group_instance_id or None) == ("inst" if version >= 3 else None)
    assert v.current_state_timestamp == (123 if version >= 2 else -1)


def test_group_value_v3_layout_by_hand() -> None:
    raw = _group_value(3)
    expected = (
        struct.pack(">h", 3)
        + _kstr("consumer")
        + struct.pack(">i", 3)
        + _kstr("range")
        + _kstr("m1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + _kstr("m1")
        + _kstr("inst")
        + _kstr("cid")
        + _kstr("/1.2.3.4")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 3)
        + b"asg"
    )
    assert raw == expected
    assert r.group_value(r.parse_group_value(raw)) == raw


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    v = r.GroupMetadataValue(
        protocol_type="consumer", generation=4, protocol=None, leader=None, members=[]
    )
    raw = r.group_value(v)
    assert raw == struct.pack(">h", 3) + _kstr("consumer") + struct.pack(">ihhqi", 4, -1, -1, -1, 0)
    back = r.parse_group_value(raw)
    assert back.protocol is None and back.leader is None and back.members == []


def test_tombstones() -> None:
    assert r.group_tombstone("g").value is None
    t = r.offset_tombstone("g", "t", 1)
    assert t.value is None and r.parse_key(t.key) == r.OffsetKey("g", "t", 1)
