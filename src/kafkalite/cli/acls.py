"""`kafkalite acls add|list|remove`, in the spirit of kafka-acls.sh: ACL bindings through CreateAcls,
DescribeAcls and DeleteAcls on any broker with an authorizer (cli.wire).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.acls import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from kafkalite.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise CliError(f"{what}: {ErrorCode(code).name}" + (f" ({message})" if message else ""))


def _resources(a: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out: list[tuple[ResourceType, str]] = []
    out += [(ResourceType.TOPIC, t) for t in a.topic or []]
    out += [(ResourceType.GROUP, g) for g in a.group or []]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in a.transactional_id or []]
    if a.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _enum(cls: Any, text: str, what: str) -> Any:
    """`Read`, `READ`, `IdempotentWrite`, `idempotent-write` -> the member."""
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text.strip()).upper().replace("-", "_")
    try:
        return cls[key]
    except KeyError:
        names = ", ".join(m.name for m in cls if m.name not in ("UNKNOWN",))
        raise CliError(f"unknown {what} {text!r}: one of {names}") from None


def _entries(a: argparse.Namespace) -> list[tuple[str, AclPermissionType]]:
    return [(p, AclPermissionType.ALLOW) for p in a.allow_principal or []] + [
        (p, AclPermissionType.DENY) for p in a.deny_principal or []
    ]


def _add(c: WireClient, a: argparse.Namespace) -> None:
    resources = _resources(a)
    entries = _entries(a)
    if not resources or not entries or not a.operation:
        raise CliError(
            "--add needs a resource (--topic/--group/--cluster/--transactional-id), "
            "--allow-principal or --deny-principal, and --operation"
        )
    pattern = _enum(PatternType, a.resource_pattern_type or "literal", "pattern type")
    creations = [
        CreateAclsRequest.AclCreation(
            resource_type=rt,
            resource_name=name,
            resource_pattern_type=pattern,
            principal=principal,
            host=host,
            operation=_enum(AclOperation, op, "operation"),
            permission_type=perm,
        )
        for rt, name in resources
        for principal, perm in entries
        for host in (a.allow_host if perm is AclPermissionType.ALLOW else a.deny_host) or ["*"]
        for op in a.operation
    ]
    resp = c.send(CreateAclsRequest(creations=creations))
    for creation, result in zip(creations, resp.results, strict=False):
        _check(result.error_code, f"adding {_describe(creation)}", result.error_message)
    for creation in creations:
        print(f"Added {_describe(creation)}")


def _describe(x: Any) -> str:
    return (
        f"{AclPermissionType(x.permission_type).name} {x.principal} "
        f"{AclOperation(x.operation).name} from host {x.host} on "
        f"{ResourceType(x.resource_type).name}:{x.resource_name} "
        f"({PatternType(getattr(x, 'resource_pattern_type', getattr(x, 'pattern_type', 3))).name})"
    )


def _filters(a: argparse.Namespace) -> list[dict[str, Any]]:
    resources: list[tuple[ResourceType, str | None]] = list(_resources(a)) or [
        (ResourceType.ANY, None)
    ]
    pattern = _enum(PatternType, a.resource_pattern_type or "any", "pattern type")
    principals: list[str | None] = [p for p, _ in _entries(a)] or [None]
    ops = [_enum(AclOperation, op, "operation") for op in a.operation or []] or [AclOperation.ANY]
    return [
        {
            "resource_type_filter": rt,
            "resource_name_filter": name,
            "pattern_type_filter": pattern,
            "principal_filter": principal,
            "host_filter": None,
            "operation": op,
            "permission_type": AclPermissionType.ANY,
        }
        for rt, name in resources
        for principal in principals
        for op in ops
    ]


def _list(c: WireClient, a: argparse.Namespace) -> None:
    as_json = getattr(a, "output", "text") == "json"
    found: list[dict[str, Any]] = []
    for f in _filters(a):
        resp = c.send(DescribeAclsRequest(**f))
        _check(resp.error_code, "listing ACLs", resp.error_message)
        for res in resp.resources:
            if as_json:
                found += [
                    {
                        "resource_type": ResourceType(res.resource_type).name,
                        "resource_name": res.resource_name,
                        "pattern_type": PatternType(res.pattern_type).name,
                        "principal": acl.principal,
                        "host": acl.host,
                        "operation": AclOperation(acl.operation).name,
                        "permission_type": AclPermissionType(acl.permission_type).name,
                    }
                    for acl in res.acls
                ]
                continue
            print(
                f"Current ACLs for resource `ResourcePattern(resourceType="
                f"{ResourceType(res.resource_type).name}, name={res.resource_name}, "
                f"patternType={PatternType(res.pattern_type).name})`:"
            )
            for acl in res.acls:
                print(
                    f"        (principal={acl.principal}, host={acl.host}, "
                    f"operation={AclOperation(acl.operation).name}, "
                    f"permissionType={AclPermissionType(acl.permission_type).name})"
                )
            print()
    if as_json:
        print(json.dumps(found))


def _remove(c: WireClient, a: argparse.Namespace) -> None:
    if not _resources(a):
        raise CliError("--remove needs a resource (--topic/--group/--cluster/--transactional-id)")
    filters = [DeleteAclsRequest.DeleteAclsFilter(**f) for f in _filters(a)]
    resp = c.send(DeleteAclsRequest(filters=filters))
    for result in resp.filter_results:
        _check(result.error_code, "removing ACLs", result.error_message)
        for m in result.matching_acls:
            print(f"Removed {_describe(m)}")


def _run(a: argparse.Namespace) -> int:
    with WireClient(a.bootstrap_server) as c:
        {"add": _add, "list": _list, "remove": _remove}[a.acls_command](c, a)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("acls", help="add, list and remove ACLs (like kafka-acls.sh)")
    acl_sub = p.add_subparsers(dest="acls_command", required=True)
    for name, text in (
        ("add", "add ACLs"),
        ("list", "list ACLs (all, or those of the given resources)"),
        ("remove", "remove the ACLs of the given resources"),
    ):
        s = acl_sub.add_parser(name, help=text)
        s.add_argument("--bootstrap-server", default="127.0.0.1:9092")
        s.add_argument("--allow-principal", action="append", metavar="User:NAME")
        s.add_argument("--deny-principal", action="append", metavar="User:NAME")
        s.add_argument("--allow-host", action="append", metavar="HOST")
        s.add_argument("--deny-host", action="append", metavar="HOST")
        s.add_argument(
            "--operation", action="append", metavar="OP", help="Read, Write, Describe, All, ..."
        )
        s.add_argument("--topic", action="append")
        s.add_argument("--group", action="append")
        s.add_argument("--transactional-id", action="append")
        s.add_argument("--cluster", action="store_true")
        if name == "list":
            s.add_argument("--output", choices=("text", "json"), default="text")
        s.add_argument(
            "--resource-pattern-type",
            metavar="TYPE",
            help="literal (default for add) or prefixed; list/remove also any or match",
        )
        s.set_defaults(func=_run)
