"""Shared by the ACL APIs: wire fields <-> security.acl bindings and filters."""

from __future__ import annotations

from kafkalite.protocol.messages.acls import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from kafkalite.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)


def binding_of(c: CreateAclsRequest.AclCreation) -> AclBinding:
    """A CreateAcls creation; raises InvalidAclError for ANY / MATCH values."""
    return AclBinding(
        ResourcePattern(
            ResourceType.from_code(c.resource_type),
            c.resource_name,
            PatternType.from_code(c.resource_pattern_type),
        ),
        AccessControlEntry(
            c.principal,
            c.host,
            AclOperation.from_code(c.operation),
            AclPermissionType.from_code(c.permission_type),
        ),
    )


def filter_of(f: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter (same field names)."""
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType.from_code(f.resource_type_filter),
            f.resource_name_filter,
            PatternType.from_code(f.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            f.principal_filter,
            f.host_filter,
            AclOperation.from_code(f.operation),
            AclPermissionType.from_code(f.permission_type),
        ),
    )
