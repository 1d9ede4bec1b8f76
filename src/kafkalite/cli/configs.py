"""`kafkalite configs`, kafka-configs.sh's flags: --entity-type/--entity-name (or --entity-default) with
--describe or --alter --add-config/--delete-config; configs, client quotas and SCRAM credentials.
"""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from kafkalite.cli.admin_common import (
    add_connection_arguments,
    add_output_argument,
    connect,
    exits_2,
    one_line_usage_errors,
    print_json,
    read_properties,
    split_list,
)
from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafkalite.protocol.messages.quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)
from kafkalite.protocol.messages.scram import (
    SCRAM_MECHANISM_IDS,
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from kafkalite.security.quota import ENTITY_CLIENT_ID, ENTITY_USER
from kafkalite.security.scram import SCRAM_MECHANISMS, salted_password

# entity type -> (DescribeConfigs resource type, singular for messages, sources shown without --all)
_RESOURCES: dict[str, tuple[int, str, set[int]]] = {
    "topics": (2, "topic", {1}),
    "brokers": (4, "broker", {2, 3}),
    "broker-loggers": (8, "broker-logger", {6}),
    "groups": (32, "group", {8}),
}
_QUOTA_TYPES = {"users": ENTITY_USER, "clients": ENTITY_CLIENT_ID}
ENTITY_TYPES = (*_RESOURCES, *_QUOTA_TYPES)
SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}
_SCRAM_NAMES = {v: k for k, v in SCRAM_MECHANISM_IDS.items()}
_DEFAULT_ITERATIONS = 4096


def parse_config_list(text: str, flag: str = "--add-config") -> dict[str, str]:
    """Kafka's k1=v1,k2=[a,b],k3=v3: commas inside square brackets belong to the value."""
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise CliError(f"{flag}: unbalanced ']' in {text!r}")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise CliError(f"{flag}: unbalanced '[' in {text!r}")
    items.append(cur)
    out: dict[str, str] = {}
    for item in items:
        if not item.strip():
            continue
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise CliError(f"{flag} expects k1=v1,k2=[v1,v2],... got {item!r}")
        v = v.strip()
        if v.startswith("[") and v.endswith("]"):
            v = v[1:-1]
        out[k.strip()] = v
    return out


class _EntityName(argparse.Action):
    """--entity-name X and --entity-default append, in order, to one list (None: the default)."""

    def __call__(self, parser: Any, ns: Any, values: Any, option_string: Any = None) -> None:
        names = list(getattr(ns, "entity_names", None) or [])
        names.append(values if self.const is None else None)
        ns.entity_names = names


class _Shorthand(argparse.Action):
    """--topic X, --user X, ...: --entity-type T --entity-name X in one flag."""

    def __call__(self, parser: Any, ns: Any, values: Any, option_string: Any = None) -> None:
        ns.entity_types = [*(ns.entity_types or []), self.const]
        ns.entity_names = [*(getattr(ns, "entity_names", None) or []), values]


def _entities(a: argparse.Namespace) -> list[tuple[str, str | None]]:
    types = [_normalise_type(t) for t in a.entity_types or []]
    names = list(a.entity_names or [])
    if not types:
        raise CliError(f"--entity-type is required ({', '.join(ENTITY_TYPES)})")
    if len(names) > len(types):
        raise CliError("more --entity-name/--entity-default than --entity-type")
    if len(types) > 1 and not set(types) <= set(_QUOTA_TYPES):
        raise CliError("only users and clients combine in one entity")
    if len(names) < len(types):
        if a.alter:
            raise CliError("--alter needs --entity-name X or --entity-default")
        names += ["*"] * (len(types) - len(names))  # describe: every entity of the type
    return list(zip(types, names))


def _normalise_type(t: str) -> str:
    t = t.strip()
    aliases = {"topic": "topics", "broker": "brokers", "user": "users", "client": "clients"}
    t = aliases.get(t, t)
    if t not in ENTITY_TYPES:
        raise CliError(f"unknown --entity-type {t!r}: one of {', '.join(ENTITY_TYPES)}")
    return t


# ---------------------------------------------------------------------------
# topics, brokers, broker loggers, groups: DescribeConfigs / IncrementalAlterConfigs


def _resource_names(c: WireClient, etype: str, name: str | None) -> list[str]:
    if name is None:
        if etype not in ("brokers",):
            raise CliError(f"--entity-default applies to brokers, users and clients, not {etype}")
        return [""]
    if name != "*":
        return [name]
    if etype == "topics":
        return sorted(t.name for t in c.metadata(None).topics if t.name and not t.is_internal)
    if etype in ("brokers", "broker-loggers"):
        return [str(b.node_id) for b in c.metadata([]).brokers]
    raise CliError(f"--describe of {etype} needs --entity-name X")


def _describe_resources(c: WireClient, a: argparse.Namespace, etype: str, name: str | None) -> Any:
    rtype, singular, dynamic = _RESOURCES[etype]
    cls = DescribeConfigsRequest
    names = _resource_names(c, etype, name)
    if not names:
        return []
    resources = [
        cls.DescribeConfigsResource(resource_type=rtype, resource_name=n, configuration_keys=None)
        for n in names
    ]
    resp = c.send(cls(resources=resources, include_synonyms=True, include_documentation=False))
    docs: list[dict[str, Any]] = []
    for r in resp.results:
        if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise CliError(f"topic {r.resource_name!r} does not exist")
        if r.error_code:
            raise CliError(
                f"{singular} {r.resource_name}: {ErrorCode(r.error_code).name}"
                + (f" ({r.error_message})" if r.error_message else "")
            )
        shown = [e for e in r.configs if a.all or e.config_source in dynamic]
        if not a.all and etype == "brokers" and r.resource_name:
            shown = [e for e in shown if e.config_source == 2]
        docs.append(
            {
                "entityType": etype,
                "entityName": r.resource_name,
                "configs": [
                    {
                        "name": e.name,
                        "value": None if e.is_sensitive else e.value,
                        "sensitive": bool(e.is_sensitive),
                        "readOnly": bool(e.read_only),
                        "source": SOURCES.get(e.config_source, str(e.config_source)),
                        "synonyms": [
                            {
                                "name": s.name,
                                "value": None if e.is_sensitive else s.value,
                                "source": SOURCES.get(s.source, str(s.source)),
                            }
                            for s in e.synonyms or []
                        ],
                    }
                    for e in sorted(shown, key=lambda e: e.name)
                ],
            }
        )
    if a.output == "json":
        return docs
    for d in docs:
        kind = "All" if a.all else "Dynamic"
        if etype == "brokers" and not d["entityName"]:
            print(f"{'All' if a.all else 'Default'} configs for brokers in the cluster are:")
        else:
            print(f"{kind} configs for {singular} {d['entityName']} are:")
        for e in d["configs"]:
            syn = ", ".join(f"{s['source']}:{s['name']}={s['value']}" for s in e["synonyms"])
            print(
                f"  {e['name']}={e['value']} sensitive={str(e['sensitive']).lower()} synonyms={{{syn}}}"
            )
    return docs


def _alter_resource(
    c: WireClient, etype: str, name: str | None, sets: dict[str, str], deletes: list[str]
) -> None:
    rtype, singular, _ = _RESOURCES[etype]
    if name is None and etype != "brokers":
        raise CliError(f"--entity-default applies to brokers, users and clients, not {etype}")
    cls = IncrementalAlterConfigsRequest
    res_cls = cls.AlterConfigsResource
    ops = [res_cls.AlterableConfig(name=k, config_operation=0, value=v) for k, v in sets.items()]
    ops += [res_cls.AlterableConfig(name=k, config_operation=1, value=None) for k in deletes]
    res = res_cls(resource_type=rtype, resource_name=name or "", configs=ops)
    r = c.send(cls(resources=[res], validate_only=False)).responses[0]
    if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise CliError(f"topic {name!r} does not exist")
    if r.error_code:
        raise CliError(
            f"{singular} {name or '<default>'}: {ErrorCode(r.error_code).name}"
            + (f" ({r.error_message})" if r.error_message else "")
        )
    if name is None:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {singular} {name}.")


# ---------------------------------------------------------------------------
# users and clients: client quotas and SCRAM credentials


def _quota_entity_text(entity: list[tuple[str, str | None]]) -> str:
    words = {ENTITY_USER: "user-principal", ENTITY_CLIENT_ID: "client-id"}
    return ", ".join(
        f"the default {words.get(t, t)}" if n is None else f"{words.get(t, t)} '{n}'"
        for t, n in entity
    )


def _describe_quotas(
    c: WireClient, a: argparse.Namespace, entity: list[tuple[str, str | None]]
) -> list[dict[str, Any]]:
    req_cls: Any = DescribeClientQuotasRequest
    components = []
    for etype, name in entity:
        kind = _QUOTA_TYPES[etype]
        if name is None:
            components.append(
                req_cls.ComponentData(entity_type=kind, match_type=MATCH_DEFAULT, match=None)
            )
        elif name == "*":
            components.append(req_cls.ComponentData(entity_type=kind, match_type=2, match=None))
        else:
            components.append(
                req_cls.ComponentData(entity_type=kind, match_type=MATCH_EXACT, match=name)
            )
    resp = c.send(req_cls(components=components, strict=True))
    if resp.error_code:
        raise CliError(f"quotas: {ErrorCode(resp.error_code).name} ({resp.error_message or ''})")
    docs: list[dict[str, Any]] = []
    for entry in resp.entries or ():
        ent = [(e.entity_type, e.entity_name) for e in entry.entity]
        docs.append(
            {
                "entity": {t: n for t, n in ent},
                "quotas": {v.key: v.value for v in sorted(entry.values, key=lambda v: v.key)},
                "_text": _quota_entity_text(ent),
            }
        )
    users = [n for t, n in entity if t == "users" and n is not None]
    if len(entity) == 1 and users:
        creds = _scram_describe(c, None if users[0] == "*" else users[0])
        for user, mechs in creds.items():
            docs.append(
                {
                    "entity": {ENTITY_USER: user},
                    "scram": mechs,
                    "_text": _quota_entity_text([(ENTITY_USER, user)]),
                }
            )
    if a.output != "json":
        for d in docs:
            if "quotas" in d:
                values = ", ".join(f"{k}={v!r}" for k, v in d["quotas"].items())
                print(f"Quota configs for {d['_text']} are {values}")
            else:
                values = ", ".join(f"{m}=iterations={n}" for m, n in sorted(d["scram"].items()))
                print(f"SCRAM credential configs for {d['_text']} are {values}")
    for d in docs:
        del d["_text"]
    return docs


def _scram_describe(c: WireClient, user: str | None) -> dict[str, dict[str, int]]:
    req_cls: Any = DescribeUserScramCredentialsRequest
    resp = c.send(req_cls(users=None if user is None else [req_cls.UserName(name=user)]))
    out: dict[str, dict[str, int]] = {}
    for r in resp.results or ():
        if r.error_code:  # RESOURCE_NOT_FOUND: no credentials
            continue
        out[r.user] = {_SCRAM_NAMES.get(i.mechanism, "?"): i.iterations for i in r.credential_infos}
    return out


def _scram_settings(mech: str, text: str) -> tuple[int, str]:
    fields = parse_config_list(text, f"--add-config {mech}")
    if "password" not in fields:
        raise CliError(f"{mech} needs [password=...] (and optionally iterations=N)")
    try:
        iterations = int(fields.get("iterations", _DEFAULT_ITERATIONS))
    except ValueError:
        raise CliError(f"{mech}: iterations must be a number") from None
    return iterations, fields["password"]


def _alter_users_clients(
    c: WireClient, entity: list[tuple[str, str | None]], sets: dict[str, str], deletes: list[str]
) -> None:
    scram_sets = {k: v for k, v in sets.items() if k.upper() in SCRAM_MECHANISMS}
    scram_deletes = [k for k in deletes if k.upper() in SCRAM_MECHANISMS]
    quota_sets = {k: v for k, v in sets.items() if k not in scram_sets}
    quota_deletes = [k for k in deletes if k not in scram_deletes]
    if scram_sets or scram_deletes:
        users = [n for t, n in entity if t == "users"]
        if len(entity) != 1 or not users or users[0] is None:
            raise CliError("SCRAM credentials belong to one named user (--entity-type users)")
        _alter_scram(c, users[0], scram_sets, scram_deletes)
    if quota_sets or quota_deletes:
        req_cls: Any = AlterClientQuotasRequest
        op_cls: Any = req_cls.EntryData.OpData
        ops = []
        for k, v in quota_sets.items():
            try:
                ops.append(op_cls(key=k, value=float(v), remove=False))
            except ValueError:
                raise CliError(f"quota {k} must be a number, got {v!r}") from None
        ops += [op_cls(key=k, value=0.0, remove=True) for k in quota_deletes]
        entry = req_cls.EntryData(
            entity=[
                req_cls.EntryData.EntityData(entity_type=_QUOTA_TYPES[t], entity_name=n)
                for t, n in entity
            ],
            ops=ops,
        )
        (r,) = c.send(req_cls(entries=[entry], validate_only=False)).entries
        if r.error_code:
            raise CliError(
                f"quotas of {_quota_entity_text([(_QUOTA_TYPES[t], n) for t, n in entity])}: "
                f"{ErrorCode(r.error_code).name} ({r.error_message or ''})"
            )
    for t, n in entity:
        word = {"users": "user", "clients": "client"}[t]
        print(f"Completed updating config for {word} {n if n is not None else '<default>'}.")


def _alter_scram(c: WireClient, user: str, sets: dict[str, str], deletes: list[str]) -> None:
    req_cls: Any = AlterUserScramCredentialsRequest
    upserts = []
    for mech_name, text in sets.items():
        mech = SCRAM_MECHANISMS[mech_name.upper()]
        iterations, password = _scram_settings(mech_name, text)
        salt = secrets.token_bytes(32)
        upserts.append(
            req_cls.ScramCredentialUpsertion(
                name=user,
                mechanism=SCRAM_MECHANISM_IDS[mech.mechanism_name],
                iterations=iterations,
                salt=salt,
                salted_password=salted_password(mech, password, salt, iterations),
            )
        )
    deletions = [
        req_cls.ScramCredentialDeletion(name=user, mechanism=SCRAM_MECHANISM_IDS[m.upper()])
        for m in deletes
    ]
    resp = c.send(req_cls(deletions=deletions, upsertions=upserts))
    for r in resp.results:
        if r.error_code:
            raise CliError(
                f"SCRAM credentials of {r.user}: {ErrorCode(r.error_code).name} "
                f"({r.error_message or ''})"
            )


# ---------------------------------------------------------------------------


@exits_2
def _run(a: argparse.Namespace) -> int:
    if a.describe == a.alter:
        raise CliError("choose one of --describe and --alter")
    entity = _entities(a)
    sets: dict[str, str] = {}
    for text in a.add_config or []:
        sets.update(parse_config_list(text))
    if a.add_config_file:
        sets.update(read_properties(a.add_config_file))
    deletes = split_list(a.delete_config)
    if a.alter and not sets and not deletes:
        raise CliError("--alter needs --add-config k=v or --delete-config k")
    with connect(a) as c:
        etype, name = entity[0]
        if etype in _RESOURCES:
            if a.alter:
                _alter_resource(c, etype, name, sets, deletes)
            else:
                docs = _describe_resources(c, a, etype, name)
                if a.output == "json":
                    print_json(docs)
        elif a.alter:
            _alter_users_clients(c, entity, sets, deletes)
        else:
            docs = _describe_quotas(c, a, entity)
            if a.output == "json":
                print_json(docs)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "configs",
        help="describe or alter configs, quotas and SCRAM credentials (kafka-configs.sh flags)",
    )
    one_line_usage_errors(p)
    add_connection_arguments(p)
    p.add_argument(
        "--entity-type",
        dest="entity_types",
        action="append",
        metavar="|".join(ENTITY_TYPES),
        help="users and clients may be given together",
    )
    p.add_argument("--entity-name", dest="entity_names", action=_EntityName, metavar="NAME")
    p.add_argument("--entity-default", dest="entity_names", action=_EntityName, nargs=0, const=True)
    for flag, etype in (
        ("--topic", "topics"),
        ("--broker", "brokers"),
        ("--broker-logger", "broker-loggers"),
        ("--group", "groups"),
        ("--user", "users"),
        ("--client", "clients"),
    ):
        p.add_argument(
            flag,
            dest="entity_types",
            action=_Shorthand,
            const=etype,
            metavar="NAME",
            help=f"--entity-type {etype} --entity-name NAME",
        )
    p.add_argument("--describe", action="store_true")
    p.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="describe: every config, not only dynamic")
    p.add_argument(
        "--add-config", action="append", metavar="K=V,K2=[A,B]", help="with --alter (repeatable)"
    )
    p.add_argument("--add-config-file", metavar="FILE", help="properties to set, with --alter")
    p.add_argument(
        "--delete-config", action="append", metavar="K,K2", help="with --alter (repeatable)"
    )
    add_output_argument(p)
    p.set_defaults(func=_run)
