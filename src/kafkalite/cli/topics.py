"""`kafkalite topics create|list|describe|delete|alter`, in the spirit of kafka-topics.sh (tables via rich).

Talks to any broker over the Kafka protocol through cli.wire.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS


def _print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print("\t".join(columns))
        for r in rows:
            print("\t".join(str(c) for c in r))
        return
    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*(str(c) for c in r))
    Console().print(table)


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise CliError(f"{what}: {ErrorCode(code).name}" + (f" ({message})" if message else ""))


def _configs(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise CliError(f"--config expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _create(c: WireClient, a: argparse.Namespace) -> None:
    cls: Any = APIS[19].request
    topic = cls.CreatableTopic(
        name=a.topic,
        num_partitions=a.partitions,
        replication_factor=a.replication_factor,
        assignments=[],
        configs=[
            cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
            for k, v in _configs(a.config).items()
        ],
    )
    resp = c.send(cls(topics=[topic], timeout_ms=30000, validate_only=False))
    r = resp.topics[0]
    if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and a.if_not_exists:
        return
    _check(r.error_code, f"create {a.topic}", r.error_message)
    print(f"Created topic {a.topic}.")


def _list(c: WireClient, a: argparse.Namespace) -> None:
    md = c.metadata(None)
    for t in sorted(md.topics, key=lambda t: t.name or ""):
        if t.is_internal and not a.include_internal:
            continue
        print(t.name)


def _describe(c: WireClient, a: argparse.Namespace) -> None:
    md = c.metadata([a.topic] if a.topic else None)
    rows = []
    for t in sorted(md.topics, key=lambda t: t.name or ""):
        _check(t.error_code, f"describe {t.name}")
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            rows.append(
                [
                    t.name,
                    str(t.topic_id),
                    p.partition_index,
                    p.leader_id,
                    p.replica_nodes,
                    p.isr_nodes,
                ]
            )
    _print_table("Topics", ["Topic", "TopicId", "Partition", "Leader", "Replicas", "Isr"], rows)
    if a.topic:
        cls: Any = APIS[32].request
        res = cls.DescribeConfigsResource(
            resource_type=2, resource_name=a.topic, configuration_keys=None
        )
        resp = c.send(cls(resources=[res], include_synonyms=False, include_documentation=False))
        r = resp.results[0]
        _check(r.error_code, f"configs of {a.topic}", r.error_message)
        rows = [
            [
                e.name,
                e.value,
                {1: "topic", 4: "broker", 5: "default"}.get(e.config_source, e.config_source),
            ]
            for e in r.configs
        ]
        _print_table(f"Configs of {a.topic}", ["Name", "Value", "Source"], rows)


def _delete(c: WireClient, a: argparse.Namespace) -> None:
    cls: Any = APIS[20].request
    v = c.version_for(20)
    if v >= 6:
        req = cls(topics=[cls.DeleteTopicState(name=a.topic)], timeout_ms=30000)
    else:
        req = cls(topic_names=[a.topic], timeout_ms=30000)
    resp = c.send(req, version=v)
    r = resp.responses[0]
    if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and a.if_exists:
        return
    _check(r.error_code, f"delete {a.topic}", r.error_message)
    print(f"Deleted topic {a.topic}.")


def _alter(c: WireClient, a: argparse.Namespace) -> None:
    if a.partitions:
        cls: Any = APIS[37].request
        t = cls.CreatePartitionsTopic(name=a.topic, count=a.partitions, assignments=None)
        r = c.send(cls(topics=[t], timeout_ms=30000, validate_only=False)).results[0]
        _check(r.error_code, f"partitions of {a.topic}", r.error_message)
        print(f"Topic {a.topic} now has {a.partitions} partitions.")
    sets, deletes = _configs(a.config), list(a.delete_config or [])
    if sets or deletes:
        cls = APIS[44].request
        res_cls = cls.AlterConfigsResource
        ops = [
            res_cls.AlterableConfig(name=k, config_operation=0, value=v) for k, v in sets.items()
        ]
        ops += [res_cls.AlterableConfig(name=k, config_operation=1, value=None) for k in deletes]
        res = res_cls(resource_type=2, resource_name=a.topic, configs=ops)
        r = c.send(cls(resources=[res], validate_only=False)).responses[0]
        _check(r.error_code, f"configs of {a.topic}", r.error_message)
        print(f"Updated configs of {a.topic}.")


def _run(a: argparse.Namespace) -> int:
    with WireClient(a.bootstrap_server) as c:
        {
            "create": _create,
            "list": _list,
            "describe": _describe,
            "delete": _delete,
            "alter": _alter,
        }[a.action](c, a)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("topics", help="create, list, describe, delete or alter topics")
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    acts = p.add_subparsers(dest="action", required=True)
    c = acts.add_parser("create")
    c.add_argument("topic")
    c.add_argument("--partitions", type=int, default=-1)
    c.add_argument("--replication-factor", type=int, default=-1)
    c.add_argument("--config", action="append", metavar="KEY=VALUE")
    c.add_argument("--if-not-exists", action="store_true")
    lst = acts.add_parser("list")
    lst.add_argument("--include-internal", action="store_true")
    d = acts.add_parser("describe")
    d.add_argument("topic", nargs="?")
    x = acts.add_parser("delete")
    x.add_argument("topic")
    x.add_argument("--if-exists", action="store_true")
    al = acts.add_parser("alter")
    al.add_argument("topic")
    al.add_argument("--partitions", type=int)
    al.add_argument("--config", action="append", metavar="KEY=VALUE")
    al.add_argument("--delete-config", action="append", metavar="KEY")
    for q in (c, lst, d, x, al):
        q.add_argument("--bootstrap-server", default=argparse.SUPPRESS)
    p.set_defaults(func=_run)
