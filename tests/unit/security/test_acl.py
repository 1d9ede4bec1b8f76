"""ACL model: wire codes, filter matching (DescribeAcls/DeleteAcls), validation, authorizer decisions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import (
    ANY_FILTER,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclIndex,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    authorize,
    validate_acl_binding,
    validate_acl_binding_filter,
)
from kafkalite.security.principal import KafkaPrincipal

T = ResourceType.TOPIC
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")


def acl(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern_type: PatternType = LIT,
    resource_type: ResourceType = T,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, op, perm),
    )


def test_wire_codes_match_kafka() -> None:
    assert [(m.name, m.value) for m in ResourceType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5), ("DELEGATION_TOKEN", 6), ("USER", 7),
    ]  # fmt: skip
    assert [(m.name, m.value) for m in PatternType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4),
    ]  # fmt: skip
    assert [m.name for m in AclOperation] == [
        "UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
        "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
        "CREATE_TOKENS", "DESCRIBE_TOKENS",
    ]  # fmt: skip
    assert [m.value for m in AclOperation] == list(range(15))
    assert [(m.name, m.value) for m in AclPermissionType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3),
    ]  # fmt: skip
    assert ResourceType.from_code(99) is ResourceType.UNKNOWN
    assert AclOperation.from_code(3) is AclOperation.READ


def check(
    acls: list[AclBinding],
    op: AclOperation,
    name: str = "payments",
    principal: KafkaPrincipal = ALICE,
    host: str = "10.0.0.1",
    **kw: bool,
) -> bool:
    return authorize(AclIndex(acls), principal, host, op, T, name, **kw)


DECISIONS: list[tuple[str, list[AclBinding], AclOperation, bool]] = [
    ("no acls, default deny", [], Op.READ, False),
    ("literal allow", [acl("payments", Op.READ)], Op.READ, True),
    ("other operation", [acl("payments", Op.WRITE)], Op.READ, False),
    ("ALL allows", [acl("payments", Op.ALL)], Op.CREATE, True),
    ("wildcard resource", [acl("*", Op.READ)], Op.READ, True),
    ("prefixed", [acl("pay", Op.READ, pattern_type=PRE)], Op.READ, True),
    ("prefix of whole name", [acl("payments", Op.READ, pattern_type=PRE)], Op.READ, True),
    ("prefix not matching", [acl("payx", Op.READ, pattern_type=PRE)], Op.READ, False),
    ("literal is not prefix", [acl("pay", Op.READ)], Op.READ, False),
    ("wildcard principal", [acl("payments", Op.READ, principal="User:*")], Op.READ, True),
    ("other principal", [acl("payments", Op.READ, principal="User:bob")], Op.READ, False),
    ("exact host", [acl("payments", Op.READ, host="10.0.0.1")], Op.READ, True),
    ("other host", [acl("payments", Op.READ, host="10.0.0.2")], Op.READ, False),
    ("deny wins", [acl("payments", Op.READ), acl("*", Op.READ, DENY)], Op.READ, False),
    ("deny ALL wins", [acl("payments", Op.READ), acl("pa", Op.ALL, DENY, pattern_type=PRE)], Op.READ, False),
    ("deny other op", [acl("payments", Op.READ), acl("payments", Op.WRITE, DENY)], Op.READ, True),
    ("deny other user", [acl("payments", Op.READ), acl("payments", Op.READ, DENY, "User:bob")], Op.READ, True),
    ("deny other host", [acl("payments", Op.READ), acl("payments", Op.READ, DENY, host="h")], Op.READ, True),
    ("deny everyone", [acl("payments", Op.READ), acl("payments", Op.READ, DENY, "User:*")], Op.READ, False),
    ("READ implies DESCRIBE", [acl("payments", Op.READ)], Op.DESCRIBE, True),
    ("WRITE implies DESCRIBE", [acl("payments", Op.WRITE)], Op.DESCRIBE, True),
    ("DELETE implies DESCRIBE", [acl("payments", Op.DELETE)], Op.DESCRIBE, True),
    ("ALTER implies DESCRIBE", [acl("payments", Op.ALTER)], Op.DESCRIBE, True),
    ("CREATE does not imply DESCRIBE", [acl("payments", Op.CREATE)], Op.DESCRIBE, False),
    ("DESCRIBE does not imply READ", [acl("payments", Op.DESCRIBE)], Op.READ, False),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl("payments", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, True),
    ("deny READ keeps DESCRIBE via WRITE", [acl("payments", Op.WRITE), acl("payments", Op.READ, DENY)], Op.DESCRIBE, True),
    ("deny DESCRIBE beats implied", [acl("payments", Op.READ), acl("payments", Op.DESCRIBE, DENY)], Op.DESCRIBE, False),
    ("other resource type", [acl("payments", Op.READ, resource_type=ResourceType.GROUP)], Op.READ, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("acls", "op", "allowed"), [d[1:] for d in DECISIONS], ids=[d[0] for d in DECISIONS]
)
def test_decision_table(acls: list[AclBinding], op: AclOperation, allowed: bool) -> None:
    assert check(acls, op) is allowed


def test_allow_everyone_if_no_acl_found() -> None:
    assert check([], Op.READ, allow_everyone_if_no_acl_found=True)
    # an ACL for someone else on the resource means "ACLs found": alice is refused
    bob_only = [acl("payments", Op.READ, principal="User:bob")]
    assert not check(bob_only, Op.READ, allow_everyone_if_no_acl_found=True)
    # ACLs on other resources do not count
    assert check([acl("other", Op.READ)], Op.READ, allow_everyone_if_no_acl_found=True)


def test_super_users() -> None:
    denied = [acl("payments", Op.ALL, DENY, principal="User:*")]
    assert authorize(AclIndex(denied), BOB, "h", Op.WRITE, T, "payments", super_users={BOB})
    assert not authorize(AclIndex(denied), ALICE, "h", Op.WRITE, T, "payments", super_users={BOB})


def test_pattern_filter_matching() -> None:
    lit = ResourcePattern(T, "payments", LIT)
    star = ResourcePattern(T, "*", LIT)
    pre = ResourcePattern(T, "pay", PRE)
    other = ResourcePattern(ResourceType.GROUP, "payments", LIT)
    every = [lit, star, pre, other]

    def sel(f: ResourcePatternFilter) -> list[ResourcePattern]:
        return [p for p in every if f.matches(p)]

    assert sel(ResourcePatternFilter()) == every
    assert sel(ResourcePatternFilter(T)) == [lit, star, pre]
    assert sel(ResourcePatternFilter(T, "payments", PatternType.ANY)) == [lit]
    assert sel(ResourcePatternFilter(T, "payments", PatternType.MATCH)) == [lit, star, pre]
    assert sel(ResourcePatternFilter(T, "*", LIT)) == [star]
    assert sel(ResourcePatternFilter(T, "pay", PRE)) == [pre]
    assert sel(ResourcePatternFilter(T, None, PRE)) == [pre]
    assert sel(ResourcePatternFilter(ResourceType.ANY, "payments", LIT)) == [lit, other]


def test_entry_filter_matching() -> None:
    e = AccessControlEntry("User:alice", "*", Op.READ, ALLOW)
    assert AccessControlEntryFilter().matches(e)
    assert AccessControlEntryFilter("User:alice", "*", Op.READ, ALLOW).matches(e)
    assert not AccessControlEntryFilter(principal="User:*").matches(e)  # filters match exactly
    assert not AccessControlEntryFilter(host="10.0.0.1").matches(e)
    assert not AccessControlEntryFilter(operation=Op.ALL).matches(e)
    assert not AccessControlEntryFilter(permission_type=DENY).matches(e)


def test_describe_and_delete() -> None:
    index = AclIndex(
        [acl("payments", Op.READ), acl("pay", Op.WRITE, pattern_type=PRE), acl("x", Op.READ)]
    )
    match = AclBindingFilter(ResourcePatternFilter(T, "payments", PatternType.MATCH))
    assert len(index.describe(match)) == 2
    deleted = index.delete(
        AclBindingFilter(entry_filter=AccessControlEntryFilter(operation=Op.READ))
    )
    assert {b.pattern.name for b in deleted} == {"payments", "x"}
    assert [b.pattern.name for b in index] == ["pay"]
    assert len(index) == 1 and not index.add(acl("pay", Op.WRITE, pattern_type=PRE))
    assert not index.remove(acl("nothing", Op.READ))
    assert index.delete(ANY_FILTER) and len(index) == 0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ResourcePattern(ResourceType.ANY, "x"), "resourceType must not be ANY"),
        (lambda: ResourcePattern(T, "x", PatternType.MATCH), "patternType must not be MATCH"),
        (lambda: ResourcePattern(T, "x", PatternType.ANY), "patternType must not be ANY"),
        (lambda: AccessControlEntry("User:a", "*", Op.ANY, ALLOW), "operation must not be ANY"),
        (lambda: AccessControlEntry("User:a", "*", Op.READ, AclPermissionType.ANY), "permissionType must not be ANY"),
        (lambda: validate_acl_binding(acl("x", Op.UNKNOWN)), "unknown elements"),
        (lambda: validate_acl_binding(acl("x", Op.READ, pattern_type=PatternType.UNKNOWN)), "unknown elements"),
        (lambda: validate_acl_binding(acl("", Op.READ)), "empty resource name"),
        (lambda: validate_acl_binding(acl("c", Op.ALTER, resource_type=ResourceType.CLUSTER)), "only valid name for the CLUSTER"),
        (lambda: validate_acl_binding(acl("a/b", Op.READ)), "invalid resource name"),
        (lambda: validate_acl_binding(acl("x", Op.READ, principal="alice")), "principalType:principalName"),
        (lambda: validate_acl_binding_filter(AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN))), "UNKNOWN"),
    ],
)  # fmt: skip
def test_validation(make: object, message: str) -> None:
    assert callable(make)
    with pytest.raises(InvalidAclError, match=message) as info:
        make()
    assert info.value.error_code is ErrorCode.INVALID_REQUEST


def test_valid_bindings_pass() -> None:
    validate_acl_binding(acl("kafka-cluster", Op.ALTER, resource_type=ResourceType.CLUSTER))
    validate_acl_binding(acl("pay", Op.READ, pattern_type=PRE))
    validate_acl_binding_filter(ANY_FILTER)


# ---- the index against a brute-force reading of Kafka's rules ----

NAMES = st.sampled_from(["a", "ab", "abc", "b", "*", "ba"])
bindings = st.builds(
    acl,
    name=NAMES.filter(lambda n: n != ""),
    op=st.sampled_from(
        [Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]
    ),
    perm=st.sampled_from([ALLOW, DENY]),
    principal=st.sampled_from(["User:alice", "User:bob", "User:*"]),
    host=st.sampled_from(["*", "h1", "h2"]),
    pattern_type=st.sampled_from([LIT, PRE]),
    resource_type=st.sampled_from([T, ResourceType.GROUP]),
)


def brute_force(
    acls: list[AclBinding], principal: KafkaPrincipal, host: str, op: AclOperation,
    rt: ResourceType, name: str, allow_everyone: bool,
) -> bool:  # fmt: skip
    def applies(p: ResourcePattern) -> bool:
        if p.resource_type != rt:
            return False
        if p.pattern_type is LIT:
            return p.name == name or p.name == "*"
        return name.startswith(p.name)

    def who(e: AccessControlEntry) -> bool:
        return e.principal in (str(principal), "User:*") and e.host in (host, "*")

    relevant = [b.entry for b in acls if applies(b.pattern)]
    if not relevant:
        return allow_everyone
    if any(who(e) and e.permission_type is DENY and e.operation in (op, Op.ALL) for e in relevant):
        return False
    implied = {
        Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
        Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
    }.get(op, {op})
    return any(
        who(e) and e.permission_type is ALLOW and (e.operation in implied or e.operation is Op.ALL)
        for e in relevant
    )


@settings(max_examples=300, deadline=None)
@given(
    acls=st.lists(bindings, max_size=12),
    removed=st.lists(st.integers(0, 11), max_size=4),
    principal=st.sampled_from([ALICE, BOB]),
    host=st.sampled_from(["h1", "h2"]),
    op=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]),
    rt=st.sampled_from([T, ResourceType.GROUP]),
    name=st.sampled_from(["a", "ab", "abc", "b", "ba", "c", "*"]),
    allow_everyone=st.booleans(),
)
def test_index_agrees_with_brute_force(
    acls: list[AclBinding], removed: list[int], principal: KafkaPrincipal, host: str,
    op: AclOperation, rt: ResourceType, name: str, allow_everyone: bool,
) -> None:  # fmt: skip
    index = AclIndex(acls)
    gone = {acls[i] for i in removed if i < len(acls)}
    for binding in gone:
        index.remove(binding)
    remaining = set(acls) - gone
    assert set(index) == remaining and len(index) == len(remaining)
    got = authorize(
        index, principal, host, op, rt, name, allow_everyone_if_no_acl_found=allow_everyone
    )
    assert got is brute_force(list(remaining), principal, host, op, rt, name, allow_everyone)


def test_from_code_keeps_the_enum_type() -> None:
    op: AclOperation = AclOperation.from_code(14)
    assert op is AclOperation.DESCRIBE_TOKENS
    assert PatternType.from_code(-1) is PatternType.UNKNOWN
