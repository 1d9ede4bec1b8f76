"""Kafka's ACL model with its wire codes, the filters of DescribeAcls/DeleteAcls, and AclAuthorizer's decision.

`AclIndex` keeps bindings by resource type, literal name and prefix, so a check never scans every ACL.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Self

from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.principal import WILDCARD_PRINCIPAL, KafkaPrincipal

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class _WireEnum(enum.IntEnum):
    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member with this wire code, or UNKNOWN for a code this broker does not know."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_WireEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_WireEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        """LITERAL and PREFIXED are the only types an ACL binding may have."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(_WireEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_WireEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class InvalidAclError(ValueError):
    """An ACL or filter Kafka rejects; the broker answers with `error_code` and the message."""

    error_code = ErrorCode.INVALID_REQUEST


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """What an ACL is on: a resource type and a LITERAL name (maybe `*`) or a PREFIXED name."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type is ResourceType.ANY:
            raise InvalidAclError("resourceType must not be ANY")
        if self.pattern_type in (PatternType.MATCH, PatternType.ANY):
            raise InvalidAclError(f"patternType must not be {self.pattern_type.name}")

    @property
    def is_unknown(self) -> bool:
        return PatternType.UNKNOWN in (self.pattern_type, self.resource_type)


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Selects patterns: ANY type, `name=None` for any name, pattern type ANY or MATCH as well."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    @property
    def is_unknown(self) -> bool:
        return PatternType.UNKNOWN in (self.pattern_type, self.resource_type)

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: every pattern that would apply to a resource of this literal name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (`User:alice` or `User:*`), from which host (`*` for any), may or may not do what."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        if self.operation is AclOperation.ANY:
            raise InvalidAclError("operation must not be ANY")
        if self.permission_type is AclPermissionType.ANY:
            raise InvalidAclError("permissionType must not be ANY")

    @property
    def is_unknown(self) -> bool:
        return (
            self.operation is AclOperation.UNKNOWN
            or self.permission_type is AclPermissionType.UNKNOWN
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """`None` principal or host match any; ANY operation or permission type match any."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @property
    def is_unknown(self) -> bool:
        return (
            self.operation is AclOperation.UNKNOWN
            or self.permission_type is AclPermissionType.UNKNOWN
        )

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation not in (AclOperation.ANY, entry.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, entry.permission_type)


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(
            binding.entry
        )


ANY_FILTER = AclBindingFilter()


def validate_acl_binding(binding: AclBinding) -> None:
    """The checks a broker makes on each CreateAcls creation; raises InvalidAclError."""
    pattern, entry = binding.pattern, binding.entry
    if binding.is_unknown:
        raise InvalidAclError("ACL binding contains unknown elements")
    if not pattern.pattern_type.is_specific:
        raise InvalidAclError(f"Invalid patternType {pattern.pattern_type.name}")
    if not pattern.name:
        raise InvalidAclError("Invalid empty resource name")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if "/" in pattern.name:
        raise InvalidAclError(f"ACL binding contains invalid resource name: {pattern.name}")
    try:
        KafkaPrincipal.parse(entry.principal)
    except ValueError as e:
        raise InvalidAclError(str(e)) from None
    if not entry.host:
        raise InvalidAclError("Invalid empty host")


def validate_acl_binding_filter(binding_filter: AclBindingFilter) -> None:
    """DescribeAcls and DeleteAcls refuse a filter holding UNKNOWN elements."""
    if binding_filter.is_unknown:
        raise InvalidAclError("Filter contain UNKNOWN elements")


# An ALLOW of any of these operations also allows the key (AclAuthorizer's implied operations).
# the operations an ACL on each resource type can grant (Kafka's supported operations)
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)  # the wire's "not asked for"


def authorized_operations(
    allowed: Callable[[AclOperation], bool], resource_type: ResourceType
) -> int:
    """The bit field of authorized-operations answers (KIP-430): bit `op` set for each supported
    operation `allowed(op)` grants."""
    mask = 0
    for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
        if allowed(op):
            mask |= 1 << int(op)
    return mask


IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE}
        | {AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


class AclIndex:
    """The broker's ACL set: literal entries by (type, name), prefixed entries by (type, prefix)."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._literal: dict[tuple[ResourceType, str], set[AccessControlEntry]] = {}
        self._prefixed: dict[tuple[ResourceType, str], set[AccessControlEntry]] = {}
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}
        for binding in bindings:
            self.add(binding)

    def _table(
        self, pattern: ResourcePattern
    ) -> dict[tuple[ResourceType, str], set[AccessControlEntry]]:
        if pattern.pattern_type is PatternType.PREFIXED:
            return self._prefixed
        if pattern.pattern_type is PatternType.LITERAL:
            return self._literal
        raise InvalidAclError(f"Invalid patternType {pattern.pattern_type.name}")

    def add(self, binding: AclBinding) -> bool:
        """Add one binding; False if it was already there."""
        pattern = binding.pattern
        entries = self._table(pattern).setdefault((pattern.resource_type, pattern.name), set())
        if binding.entry in entries:
            return False
        entries.add(binding.entry)
        if pattern.pattern_type is PatternType.PREFIXED and len(entries) == 1:
            lengths = self._prefix_lengths.setdefault(pattern.resource_type, {})
            lengths[len(pattern.name)] = lengths.get(len(pattern.name), 0) + 1
        return True

    def remove(self, binding: AclBinding) -> bool:
        pattern = binding.pattern
        table = self._table(pattern)
        key = (pattern.resource_type, pattern.name)
        entries = table.get(key)
        if entries is None or binding.entry not in entries:
            return False
        entries.discard(binding.entry)
        if not entries:
            del table[key]
            if pattern.pattern_type is PatternType.PREFIXED:
                lengths = self._prefix_lengths[pattern.resource_type]
                lengths[len(pattern.name)] -= 1
                if not lengths[len(pattern.name)]:
                    del lengths[len(pattern.name)]
        return True

    def __iter__(self) -> Iterator[AclBinding]:
        for table, pattern_type in (
            (self._literal, PatternType.LITERAL),
            (self._prefixed, PatternType.PREFIXED),
        ):
            for (resource_type, name), entries in table.items():
                pattern = ResourcePattern(resource_type, name, pattern_type)
                for entry in entries:
                    yield AclBinding(pattern, entry)

    def __len__(self) -> int:
        return sum(len(e) for t in (self._literal, self._prefixed) for e in t.values())

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Every binding the filter matches (DescribeAcls; DeleteAcls removes these)."""
        return [b for b in self if binding_filter.matches(b)]

    def delete(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        matched = self.describe(binding_filter)
        for binding in matched:
            self.remove(binding)
        return matched

    def matching_entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries that apply to one resource: its literal name, `*`, and every prefix of it."""
        found: list[AccessControlEntry] = []
        for literal in (name, WILDCARD_RESOURCE) if name != WILDCARD_RESOURCE else (name,):
            found.extend(self._literal.get((resource_type, literal), ()))
        for length in self._prefix_lengths.get(resource_type, {}):
            if length <= len(name):
                found.extend(self._prefixed.get((resource_type, name[:length]), ()))
        return found


def _entry_matches(
    entry: AccessControlEntry,
    principals: tuple[str, str],
    host: str,
    operations: Collection[AclOperation],
    permission_type: AclPermissionType,
) -> bool:
    return (
        entry.permission_type is permission_type
        and entry.principal in principals
        and (entry.operation in operations or entry.operation is AclOperation.ALL)
        and entry.host in (host, WILDCARD_HOST)
    )


def authorize(
    acls: AclIndex,
    principal: KafkaPrincipal,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    resource_name: str,
    *,
    super_users: Collection[KafkaPrincipal] = (),
    allow_everyone_if_no_acl_found: bool = False,
) -> bool:
    """AclAuthorizer's decision for one action on one resource.

    Super users may do anything. Otherwise, with no ACL at all on the resource (literal, `*` or
    any matching prefix, for anyone), `allow.everyone.if.no.acl.found` decides; else a matching
    DENY (of the operation or ALL) refuses, and a matching ALLOW (of the operation, ALL, or an
    operation that implies it) permits. Principals match exactly or through `User:*`.
    """
    if principal in super_users:
        return True
    entries = acls.matching_entries(resource_type, resource_name)
    if not entries:
        return allow_everyone_if_no_acl_found
    principals = (str(principal), str(WILDCARD_PRINCIPAL))
    if any(
        _entry_matches(e, principals, host, (operation,), AclPermissionType.DENY) for e in entries
    ):
        return False
    allowed_by = IMPLIED_BY.get(operation, frozenset({operation}))
    return any(
        _entry_matches(e, principals, host, allowed_by, AclPermissionType.ALLOW) for e in entries
    )
