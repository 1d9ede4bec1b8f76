"""`kafkalite topics`, kafka-topics.sh's flags (--create|--list|--describe|--alter|--delete --topic T ...)
and the short forms (`topics create T`, `topics describe T`); talks to any broker through cli.wire.
"""

from __future__ import annotations

import argparse
import base64
import re
import uuid
from typing import Any, Literal, overload

from kafkalite.cli.admin_common import (
    add_connection_arguments,
    add_output_argument,
    connect,
    exits_2,
    one_line_usage_errors,
    print_json,
    split_list,
)
from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

ACTIONS = ("create", "list", "describe", "alter", "delete")
_DYNAMIC_TOPIC_CONFIG = 1
_REGEX_CHARS = re.compile(r"[*?+\[\](){}|^$\\]")  # topic names hold only [a-zA-Z0-9._-]


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise CliError(f"{what}: {ErrorCode(code).name}" + (f" ({message})" if message else ""))


def parse_configs(items: list[str] | None, flag: str = "--config") -> dict[str, str]:
    """key=value pairs from repeated flags (a value may hold '=' but not be absent)."""
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise CliError(f"{flag} expects key=value, got {item!r}")
        out[k.strip()] = v.strip()
    return out


def topic_id_text(value: Any) -> str:
    """Kafka's rendering of a Uuid: URL-safe base64 of its 16 bytes without padding."""
    raw = value.bytes if isinstance(value, uuid.UUID) else bytes(16)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@overload
def _topic(a: argparse.Namespace, required: Literal[True] = True) -> str: ...
@overload
def _topic(a: argparse.Namespace, required: bool) -> str | None: ...
def _topic(a: argparse.Namespace, required: bool = True) -> str | None:
    name: str | None = a.topic or a.name
    if a.topic and a.name and a.topic != a.name:
        raise CliError(f"two topic names: {a.name!r} and --topic {a.topic!r}")
    if required and not name:
        raise CliError(f"--{a.action} needs --topic T")
    return name


def _create(c: WireClient, a: argparse.Namespace) -> None:
    name = _topic(a)
    configs = parse_configs(a.config)
    cls = CreateTopicsRequest
    topic = cls.CreatableTopic(
        name=name,
        num_partitions=a.partitions if a.partitions is not None else -1,
        replication_factor=a.replication_factor if a.replication_factor is not None else -1,
        assignments=[],
        configs=[
            cls.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()
        ],
    )
    r = c.send(cls(topics=[topic], timeout_ms=30000, validate_only=False)).topics[0]
    if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
        if a.if_not_exists:
            return
        raise CliError(f"topic {name!r} already exists")
    _check(r.error_code, f"create {name}", r.error_message)
    print(f"Created topic {name}.")


def _show_internal(a: argparse.Namespace) -> bool:
    return bool(a.include_internal and not a.exclude_internal)


def _list(c: WireClient, a: argparse.Namespace) -> None:
    md = c.metadata(None)
    names = sorted(t.name for t in md.topics if t.name and (not t.is_internal or _show_internal(a)))
    if a.topic:
        names = [n for n in names if n == a.topic]
    if a.output == "json":
        print_json(names)
        return
    for n in names:
        print(n)


def _topic_configs(c: WireClient, names: list[str]) -> dict[str, list[tuple[str, str | None, int]]]:
    """(name, value, source) of each topic's configs."""
    if not names:
        return {}
    cls = DescribeConfigsRequest
    resources = [
        cls.DescribeConfigsResource(resource_type=2, resource_name=n, configuration_keys=None)
        for n in names
    ]
    resp = c.send(cls(resources=resources, include_synonyms=False, include_documentation=False))
    out: dict[str, list[tuple[str, str | None, int]]] = {}
    for r in resp.results:
        if r.error_code:
            continue
        out[r.resource_name] = [(e.name, e.value, e.config_source) for e in r.configs]
    return out


def _describe(c: WireClient, a: argparse.Namespace) -> None:
    name = _topic(a, required=False)
    pattern = name if name and _REGEX_CHARS.search(name) else None
    md = c.metadata([name] if name and not pattern else None)
    topics = sorted((t for t in md.topics if t.name), key=lambda t: t.name)
    if pattern:  # kafka-topics.sh reads --topic as a regular expression
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise CliError(f"--topic {pattern!r} is not a regular expression: {exc}") from None
        topics = [t for t in topics if rx.fullmatch(t.name)]
        if not topics and not a.if_exists:
            raise CliError(f"no topic matches {pattern!r}")
        name = None
    for t in topics:
        if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            if a.if_exists:
                return
            raise CliError(f"topic {t.name!r} does not exist")
        _check(t.error_code, f"describe {t.name}")
    if not name and not pattern:
        topics = [t for t in topics if not t.is_internal or _show_internal(a)]
    live = {b.node_id for b in md.brokers}
    configs = _topic_configs(c, [t.name for t in topics])
    partition_filter = (
        a.under_replicated_partitions
        or a.unavailable_partitions
        or a.at_min_isr_partitions
        or a.under_min_isr_partitions
    )
    docs = []
    for t in topics:
        cfg = configs.get(t.name, [])
        dynamic = [(k, v) for k, v, src in cfg if src == _DYNAMIC_TOPIC_CONFIG]
        if a.topics_with_overrides and not dynamic:
            continue
        min_isr = int(next((v for k, v, _ in cfg if k == "min.insync.replicas" and v), "1"))
        parts = []
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            isr, replicas = list(p.isr_nodes), list(p.replica_nodes)
            keep = not partition_filter or (
                (a.under_replicated_partitions and len(isr) < len(replicas))
                or (a.unavailable_partitions and (p.leader_id < 0 or p.leader_id not in live))
                or (a.at_min_isr_partitions and len(isr) == min_isr)
                or (a.under_min_isr_partitions and len(isr) < min_isr)
            )
            if keep:
                parts.append(
                    {
                        "partition": p.partition_index,
                        "leader": p.leader_id,
                        "replicas": replicas,
                        "isr": isr,
                    }
                )
        if partition_filter and not parts:
            continue
        docs.append(
            {
                "topic": t.name,
                "topicId": topic_id_text(t.topic_id),
                "partitionCount": len(t.partitions),
                "replicationFactor": len(t.partitions[0].replica_nodes) if t.partitions else 0,
                "configs": dict(dynamic),
                "partitions": parts,
            }
        )
    if a.output == "json":
        print_json(docs)
        return
    for d in docs:
        if not partition_filter:
            cfg_text = ",".join(f"{k}={v}" for k, v in d["configs"].items())
            print(
                f"Topic: {d['topic']}\tTopicId: {d['topicId']}\tPartitionCount: "
                f"{d['partitionCount']}\tReplicationFactor: {d['replicationFactor']}\t"
                f"Configs: {cfg_text}"
            )
        for p in d["partitions"]:
            print(
                f"\tTopic: {d['topic']}\tPartition: {p['partition']}\tLeader: "
                f"{p['leader'] if p['leader'] >= 0 else 'none'}\t"
                f"Replicas: {','.join(map(str, p['replicas']))}\t"
                f"Isr: {','.join(map(str, p['isr']))}"
            )


def _delete(c: WireClient, a: argparse.Namespace) -> None:
    name = _topic(a)
    cls = DeleteTopicsRequest
    v = c.version_for(20)
    if v >= 6:
        req = cls(topics=[cls.DeleteTopicState(name=name)], timeout_ms=30000)
    else:
        req = cls(topic_names=[name], timeout_ms=30000)
    r = c.send(req, version=v).responses[0]
    if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        if a.if_exists:
            return
        raise CliError(f"topic {name!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
    _check(r.error_code, f"delete {name}", r.error_message)
    print(f"Deleted topic {name}.")


def _alter(c: WireClient, a: argparse.Namespace) -> None:
    name = _topic(a)
    sets, deletes = parse_configs(a.config), split_list(a.delete_config)
    if a.partitions is None and not sets and not deletes:
        raise CliError("--alter needs --partitions N (or --config k=v / --delete-config k)")
    if a.partitions is not None:
        cls = CreatePartitionsRequest
        t = cls.CreatePartitionsTopic(name=name, count=a.partitions, assignments=None)
        r = c.send(cls(topics=[t], timeout_ms=30000, validate_only=False)).results[0]
        if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            if a.if_exists:
                return
            raise CliError(f"topic {name!r} does not exist")
        _check(r.error_code, f"partitions of {name}", r.error_message)
        print(f"Topic {name} now has {a.partitions} partitions.")
    if sets or deletes:
        res_cls = IncrementalAlterConfigsRequest.AlterConfigsResource
        ops = [
            res_cls.AlterableConfig(name=k, config_operation=0, value=v) for k, v in sets.items()
        ]
        ops += [res_cls.AlterableConfig(name=k, config_operation=1, value=None) for k in deletes]
        res = res_cls(resource_type=2, resource_name=name, configs=ops)
        req = IncrementalAlterConfigsRequest(resources=[res], validate_only=False)
        ar = c.send(req).responses[0]
        if ar.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not a.if_exists:
            raise CliError(f"topic {name!r} does not exist")
        _check(ar.error_code, f"configs of {name}", ar.error_message)
        print(f"Updated configs of {name}.")


@exits_2
def _run(a: argparse.Namespace) -> int:
    flagged = [x for x in ACTIONS if getattr(a, f"do_{x}")]
    if len(flagged) > 1 or (flagged and a.action and a.action != flagged[0]):
        raise CliError("choose one of --create, --list, --describe, --alter, --delete")
    a.action = a.action or (flagged[0] if flagged else None)
    if a.action is None:
        raise CliError("choose one of --create, --list, --describe, --alter, --delete")
    if a.action == "list" and a.name:
        raise CliError(f"unexpected argument {a.name!r}")
    if a.action == "create":
        parse_configs(a.config)  # a syntax error is reported before connecting
    with connect(a) as c:
        {
            "create": _create,
            "list": _list,
            "describe": _describe,
            "delete": _delete,
            "alter": _alter,
        }[a.action](c, a)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "topics",
        help="create, list, describe, alter or delete topics (kafka-topics.sh flags)",
        description="kafka-topics.sh flags (--create --topic T --partitions N ...) or the short "
        "forms: topics create T, topics list, topics describe [T], topics alter T, topics delete T",
    )
    one_line_usage_errors(p)
    p.add_argument("action", nargs="?", choices=ACTIONS, help="short form of --create etc.")
    p.add_argument("name", nargs="?", help="the topic (short form of --topic)")
    add_connection_arguments(p)
    for x in ACTIONS:
        p.add_argument(f"--{x}", dest=f"do_{x}", action="store_true")
    p.add_argument("--topic", metavar="TOPIC")
    p.add_argument("--partitions", type=int, metavar="N")
    p.add_argument("--replication-factor", type=int, metavar="R")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="repeatable")
    p.add_argument("--delete-config", action="append", metavar="KEY", help="with --alter")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--include-internal", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--at-min-isr-partitions", action="store_true")
    p.add_argument("--under-min-isr-partitions", action="store_true")
    p.add_argument(
        "--topics-with-overrides", action="store_true", help="describe: topics with overrides"
    )
    add_output_argument(p)
    p.set_defaults(func=_run)
