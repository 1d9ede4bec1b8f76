"""DescribeAcls, CreateAcls and DeleteAcls: hand-built bytes of the layouts Kafka's clients send, at a
non-flexible and a flexible version, and truncated bodies that fail with DecodeError.
"""

from __future__ import annotations

import struct

import pytest

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.acls import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _cs(text: str | None) -> bytes:
    """A compact (flexible) string: uvarint length + 1, 0 for null."""
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_create_acls_v1_layout() -> None:
    body = (
        struct.pack(">i", 1)
        + struct.pack(">b", 2)
        + _s("orders")
        + struct.pack(">b", 4)  # PREFIXED
        + _s("User:alice")
        + _s("*")
        + struct.pack(">bb", 3, 3)  # READ, ALLOW
    )
    req = CreateAclsRequest.decode(body, 1)
    c = req.creations[0]
    assert (c.resource_type, c.resource_name, c.resource_pattern_type) == (2, "orders", 4)
    assert (c.principal, c.host, c.operation, c.permission_type) == ("User:alice", "*", 3, 3)
    assert req.encode(1) == body


def test_create_acls_v0_has_no_pattern_type_and_defaults_to_literal() -> None:
    body = struct.pack(">i", 1) + struct.pack(">b", 3) + _s("g") + _s("User:*") + _s("*")
    body += struct.pack(">bb", 2, 2)
    req = CreateAclsRequest.decode(body, 0)
    assert req.creations[0].resource_pattern_type == 3
    assert req.encode(0) == body


def test_describe_acls_v2_flexible_layout() -> None:
    body = (
        struct.pack(">b", 1)  # ANY resource type
        + _cs(None)
        + struct.pack(">b", 2)  # MATCH
        + _cs("User:bob")
        + _cs(None)
        + struct.pack(">bb", 1, 1)
        + b"\x00"  # no tagged fields
    )
    req = DescribeAclsRequest.decode(body, 2)
    assert req.resource_name_filter is None and req.principal_filter == "User:bob"
    assert req.pattern_type_filter == 2
    assert req.encode(2) == body


def test_describe_acls_response_v1_layout() -> None:
    R = DescribeAclsResponse
    resp = R(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        resources=[
            R.DescribeAclsResource(
                resource_type=2,
                resource_name="t",
                pattern_type=3,
                acls=[
                    R.DescribeAclsResource.AclDescription(
                        principal="User:a", host="*", operation=4, permission_type=3
                    )
                ],
            )
        ],
    )
    expected = (
        struct.pack(">ihh", 0, 0, -1)
        + struct.pack(">i", 1)
        + struct.pack(">b", 2)
        + _s("t")
        + struct.pack(">b", 3)
        + struct.pack(">i", 1)
        + _s("User:a")
        + _s("*")
        + struct.pack(">bb", 4, 3)
    )
    assert resp.encode(1) == expected
    assert R.decode(expected, 1) == resp


def test_delete_acls_roundtrip_v3() -> None:
    F = DeleteAclsRequest.DeleteAclsFilter
    req = DeleteAclsRequest(
        filters=[
            F(
                resource_type_filter=2,
                resource_name_filter="x",
                pattern_type_filter=1,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            )
        ]
    )
    assert DeleteAclsRequest.decode(req.encode(3), 3) == req
    R = DeleteAclsResponse
    resp = R(
        throttle_time_ms=5,
        filter_results=[
            R.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[])
        ],
    )
    assert R.decode(resp.encode(3), 3) == resp


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_truncated_create_acls_fails(version: int) -> None:
    C = CreateAclsRequest.AclCreation
    req = CreateAclsRequest(
        creations=[
            C(
                resource_type=2,
                resource_name="orders",
                resource_pattern_type=3,
                principal="User:alice",
                host="*",
                operation=3,
                permission_type=3,
            )
        ]
    )
    data = req.encode(version)
    with pytest.raises(DecodeError):
        CreateAclsRequest.decode(data[:-3], version)
    assert (
        CreateAclsResponse.decode(
            CreateAclsResponse(throttle_time_ms=0, results=[]).encode(version), version
        ).results
        == []
    )
