"""`kafkalite quotas set|remove|list`: client quotas (producer_byte_rate, consumer_byte_rate,
request_percentage) of users and client ids, and connection_creation_rate of ips (KIP-612), through
AlterClientQuotas and DescribeClientQuotas.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kafkalite.cli.wire import CliError, WireClient, add_login_arguments, login_from_arguments
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)
from kafkalite.security.quota import (
    ENTITY_CLIENT_ID,
    ENTITY_IP,
    ENTITY_USER,
    QUOTA_KEYS,
    canonical_ip,
)

IP_COMBINATION = (
    "an ip entity (--ip / --ip-default) stands alone: it cannot be combined with a user or a "
    "client id (Kafka refuses that combination too)"
)


def _ip(a: argparse.Namespace) -> tuple[str, str | None] | None:
    """The ip entity named on the command line (None: no ip), refusing what the broker refuses."""
    if a.ip is None and not a.ip_default:
        return None
    if a.user is not None or a.user_default or a.client_id is not None or a.client_default:
        raise CliError(IP_COMBINATION)
    if a.ip_default:
        return (ENTITY_IP, None)
    if a.ip == "*" and a.quotas_command == "list":
        return (ENTITY_IP, "*")
    try:
        return (ENTITY_IP, canonical_ip(a.ip))
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _entity(a: argparse.Namespace) -> list[tuple[str, str | None]]:
    ip = _ip(a)
    if ip is not None:
        return [ip]
    out: list[tuple[str, str | None]] = []
    if a.user is not None or a.user_default:
        out.append((ENTITY_USER, None if a.user_default else a.user))
    if a.client_id is not None or a.client_default:
        out.append((ENTITY_CLIENT_ID, None if a.client_default else a.client_id))
    if not out:
        raise CliError(
            "name a user (--user / --user-default), a client id, or both; or an ip "
            "(--ip / --ip-default)"
        )
    return out


def _show_entity(entity: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def _alter(c: WireClient, a: argparse.Namespace, ops: list[Any]) -> None:
    req_cls: Any = AlterClientQuotasRequest
    entity = _entity(a)
    entry = req_cls.EntryData(
        entity=[req_cls.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=ops,
    )
    (result,) = c.send(req_cls(entries=[entry], validate_only=False)).entries
    if result.error_code:
        raise CliError(
            f"{_show_entity(entity)}: {ErrorCode(result.error_code).name} "
            f"({result.error_message or ''})"
        )
    print(f"quotas of {_show_entity(entity)}: done")


def _set(c: WireClient, a: argparse.Namespace) -> None:
    op_cls: Any = AlterClientQuotasRequest.EntryData.OpData
    ops = []
    for item in a.quota:
        key, sep, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not sep or value != value:
            raise CliError(f"{item!r}: expected KEY=NUMBER, KEY one of {', '.join(QUOTA_KEYS)}")
        ops.append(op_cls(key=key, value=value, remove=False))
    _alter(c, a, ops)


def _remove(c: WireClient, a: argparse.Namespace) -> None:
    op_cls: Any = AlterClientQuotasRequest.EntryData.OpData
    _alter(c, a, [op_cls(key=k, value=0.0, remove=True) for k in a.key])


def _list(c: WireClient, a: argparse.Namespace) -> None:
    req_cls: Any = DescribeClientQuotasRequest
    components = []
    ip = _ip(a)  # refuses an ip beside a user or client id, as the broker's filter check does
    for kind, name, default in (
        (ENTITY_USER, a.user, a.user_default),
        (ENTITY_CLIENT_ID, a.client_id, a.client_default),
        (ENTITY_IP, ip[1] if ip is not None else None, a.ip_default),
    ):
        if default:
            components.append(
                req_cls.ComponentData(entity_type=kind, match_type=MATCH_DEFAULT, match=None)
            )
        elif name == "*":
            components.append(
                req_cls.ComponentData(entity_type=kind, match_type=MATCH_SPECIFIED, match=None)
            )
        elif name is not None:
            components.append(
                req_cls.ComponentData(entity_type=kind, match_type=MATCH_EXACT, match=name)
            )
    resp = c.send(req_cls(components=components, strict=a.strict))
    if resp.error_code:
        raise CliError(f"listing quotas: {ErrorCode(resp.error_code).name} ({resp.error_message})")
    if getattr(a, "output", "text") == "json":
        doc = [
            {
                "entity": [{"type": e.entity_type, "name": e.entity_name} for e in entry.entity],
                "quotas": {v.key: v.value for v in entry.values},
            }
            for entry in resp.entries or ()
        ]
        print(json.dumps(doc))
        return
    rows = sorted(
        (
            _show_entity([(e.entity_type, e.entity_name) for e in entry.entity]),
            ", ".join(f"{v.key}={v.value:g}" for v in sorted(entry.values, key=lambda v: v.key)),
        )
        for entry in resp.entries or ()
    )
    if not rows:
        print("no client quotas")
    for entity, values in rows:
        print(f"{entity}: {values}")


def _run(a: argparse.Namespace) -> int:
    with WireClient(a.bootstrap_server, sasl_login=login_from_arguments(a)) as c:
        {"set": _set, "remove": _remove, "list": _list}[a.quotas_command](c, a)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "quotas",
        help="set, remove and list client quotas (like kafka-configs.sh --entity-type "
        "users/clients/ips)",
    )
    quotas_sub = p.add_subparsers(dest="quotas_command", required=True)
    for name, text in (
        (
            "set",
            "set quotas: producer_byte_rate=B, consumer_byte_rate=B, request_percentage=P of users "
            "and client ids; connection_creation_rate=N (new connections per second) of an ip",
        ),
        ("remove", "remove quota keys of an entity"),
        ("list", "list quotas (filter by user / client id, or by ip; '*' means any named one)"),
    ):
        s = quotas_sub.add_parser(name, help=text)
        add_login_arguments(s)
        user = s.add_mutually_exclusive_group()
        user.add_argument("--user")
        user.add_argument("--user-default", action="store_true", help="the default user entity")
        client = s.add_mutually_exclusive_group()
        client.add_argument("--client-id")
        client.add_argument(
            "--client-default", action="store_true", help="the default client-id entity"
        )
        ip = s.add_mutually_exclusive_group()
        ip.add_argument(
            "--ip",
            metavar="ADDR",
            help="an IP address (KIP-612 entity; not with --user/--client-id)",
        )
        ip.add_argument(
            "--ip-default",
            "--ip-defaults",
            dest="ip_default",
            action="store_true",
            help="the default ip entity (every address without its own quota)",
        )
        if name == "list":
            s.add_argument("--output", choices=("text", "json"), default="text")
        if name == "set":
            s.add_argument("quota", nargs="+", metavar="KEY=VALUE")
        elif name == "remove":
            s.add_argument("key", nargs="+", choices=QUOTA_KEYS)
        else:
            s.add_argument(
                "--strict", action="store_true", help="only entities of exactly these types"
            )
        s.set_defaults(func=_run)
