"""`kafkalite groups list|describe|delete|reset-offsets|delete-offsets`, in the spirit of kafka-consumer-groups.sh
and kafka-share-groups.sh: printing and argparse; the Kafka calls live in cli.group_ops and cli.share_group_ops.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from typing import Any

from kafkalite.cli.group_ops import (
    EARLIEST,
    GROUP_STATES,
    LATEST,
    TP,
    Cluster,
    GroupDescription,
    ListedGroup,
    Member,
    PartitionOffsets,
    committed_offsets,
    delete_groups,
    describe_group,
    describe_state,
    list_groups,
    list_offsets,
    topic_partitions,
)
from kafkalite.cli.offset_resets import (
    OffsetReset,
    ResetSpec,
    execute_reset,
    parse_datetime,
    parse_topic_specs,
    plan_reset,
)
from kafkalite.cli.share_group_ops import (
    ShareGroupDescription,
    delete_share_offsets,
    describe_share_group,
    execute_share_reset,
    is_share_group,
    plan_share_reset,
)
from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.errors import ErrorCode

__all__ = [
    "EARLIEST",
    "GROUP_STATES",
    "LATEST",
    "TP",
    "Cluster",
    "GroupDescription",
    "ListedGroup",
    "Member",
    "OffsetReset",
    "PartitionOffsets",
    "ResetSpec",
    "ShareGroupDescription",
    "add_parser",
    "committed_offsets",
    "delete_groups",
    "describe_group",
    "describe_share_group",
    "describe_state",
    "execute_reset",
    "list_groups",
    "list_offsets",
    "parse_datetime",
    "parse_topic_specs",
    "plan_reset",
    "topic_partitions",
]


# ---------------------------------------------------------------------------
# printing and the argparse commands


# --output json: the tables of the running command, gathered instead of printed
_json_tables: list[dict[str, Any]] | None = None


def _table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table on a terminal, tab-separated lines (after the title) when piped, or gathered for
    --output json."""
    if _json_tables is not None:
        _json_tables.append({"title": title, "rows": [dict(zip(columns, r)) for r in rows]})
        return
    cells = [["-" if c is None else str(c) for c in r] for r in rows]
    rich_ok = sys.stdout.isatty()
    if rich_ok:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            rich_ok = False
    if not rich_ok:
        if title:
            print(title)
        print("\t".join(columns))
        for r in cells:
            print("\t".join(r))
        return
    console = Console()
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, no_wrap=True, overflow="fold")
    for r in cells:
        table.add_row(*r)
    console.print(table)


def _assignment_text(tps: list[TP]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def _cmd_list(cluster: Cluster, a: argparse.Namespace) -> None:
    states = [s for item in a.state or [] for s in item.split(",") if s.strip()]
    groups = list_groups(cluster, states)
    if a.verbose or states:
        _table(
            None,
            ["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"],
            [[g.group_id, g.state, g.group_type or None, g.protocol_type or None] for g in groups],
        )
    else:
        for g in groups:
            print(g.group_id)


def _print_description(d: GroupDescription, a: argparse.Namespace) -> None:
    show_all = not (a.members or a.offsets or a.state)
    if d.group_type == "consumer":
        print(
            f"Group {d.group_id}: consumer group (KIP-848), state {d.state}, group epoch "
            f"{d.group_epoch}, assignment epoch {d.assignment_epoch}, assignor {d.assignor}, "
            f"{len(d.members)} member(s)"
        )
    else:
        print(
            f"Group {d.group_id}: state {d.state}, protocol type {d.protocol_type or '-'}, "
            f"protocol {d.protocol or '-'}, {len(d.members)} member(s)"
        )
    if (show_all or a.members) and d.members:
        _table(
            "Members",
            ["CONSUMER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST", "#PARTITIONS", "ASSIGNMENT"],
            [
                [
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.host,
                    len(m.assignment),
                    _assignment_text(m.assignment),
                ]
                for m in d.members
            ],
        )
    elif (show_all or a.members) and not d.members:
        print(f"Consumer group {d.group_id!r} has no active members.")
    if show_all or a.offsets:
        if not d.offsets:
            print(
                f"Consumer group {d.group_id!r} has no committed offsets and no assigned partitions."
            )
            return
        _table(
            "Offsets",
            [
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ],
            [
                [
                    o.topic,
                    o.partition,
                    o.committed,
                    o.log_end,
                    o.lag,
                    o.member.member_id if o.member else None,
                    o.member.host if o.member else None,
                    o.member.client_id if o.member else None,
                ]
                for o in d.offsets
            ],
        )
        total = sum(o.lag or 0 for o in d.offsets)
        print(f"Total lag: {total}")


def _print_share_description(d: ShareGroupDescription, a: argparse.Namespace) -> None:
    show_all = not (a.members or a.offsets or a.state)
    print(
        f"Group {d.group_id}: share group (KIP-932), state {d.state}, group epoch {d.group_epoch}, "
        f"assignment epoch {d.assignment_epoch}, assignor {d.assignor}, {len(d.members)} member(s)"
    )
    if show_all or a.members:
        if d.members:
            _table(
                "Members",
                ["MEMBER-ID", "CLIENT-ID", "HOST", "#PARTITIONS", "ASSIGNMENT"],
                [
                    [
                        m.member_id,
                        m.client_id,
                        m.host,
                        len(m.assignment),
                        _assignment_text(m.assignment),
                    ]
                    for m in d.members
                ],
            )
        else:
            print(f"Share group {d.group_id!r} has no active members.")
    if show_all or a.offsets:
        if not d.offsets:
            print(f"Share group {d.group_id!r} has no share-partition state yet.")
            return
        _table(
            "Start offsets",
            ["TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "IN-FLIGHT", "LAG"],
            [
                [
                    o.topic,
                    o.partition,
                    o.start_offset if o.start_offset >= 0 else None,
                    o.log_end,
                    o.in_flight,
                    o.lag,
                ]
                for o in d.offsets
            ],
        )
        print(f"Total lag: {sum(o.lag or 0 for o in d.offsets)}")


def _cmd_describe(cluster: Cluster, a: argparse.Namespace) -> None:
    if a.all_groups:
        names = [g.group_id for g in list_groups(cluster)]
    elif a.group:
        names = list(dict.fromkeys(a.group))
    else:
        raise CliError("name a group with --group G (repeatable) or use --all-groups")
    missing = []
    for i, name in enumerate(names):
        share = describe_share_group(cluster, name)
        if share is not None:
            if i:
                print()
            _print_share_description(share, a)
            continue
        d = describe_group(cluster, name)
        if not d.exists:
            missing.append(name)
            continue
        if i:
            print()
        _print_description(d, a)
    if missing:
        raise CliError(", ".join(f"consumer group {g!r} does not exist" for g in missing))


def _cmd_delete(cluster: Cluster, a: argparse.Namespace) -> None:
    results = delete_groups(cluster, a.group)
    failed = []
    for g, code in results.items():
        if code == ErrorCode.NO_ERROR:
            print(f"Deleted consumer group {g!r}.")
        elif code == ErrorCode.GROUP_ID_NOT_FOUND:
            failed.append(f"consumer group {g!r} does not exist (GROUP_ID_NOT_FOUND)")
        elif code == ErrorCode.NON_EMPTY_GROUP:
            failed.append(
                f"cannot delete consumer group {g!r}: it has active members (NON_EMPTY_GROUP)"
            )
        else:
            failed.append(f"cannot delete consumer group {g!r}: {code.name}")
    if failed:
        raise CliError("; ".join(failed))


def _reset_spec(a: argparse.Namespace) -> ResetSpec:
    if a.to_earliest:
        return ResetSpec("earliest")
    if a.to_latest:
        return ResetSpec("latest")
    if a.to_offset is not None:
        if a.to_offset < 0:
            raise CliError("--to-offset must be >= 0")
        return ResetSpec("offset", a.to_offset)
    if a.to_datetime is not None:
        return ResetSpec("datetime", parse_datetime(a.to_datetime))
    if a.shift_by is not None:
        return ResetSpec("shift", a.shift_by)
    raise CliError(
        "choose a reset: --to-earliest, --to-latest, --to-offset N, --to-datetime ISO or --shift-by N"
    )


def _cmd_reset(cluster: Cluster, a: argparse.Namespace) -> None:
    if a.execute and a.dry_run:
        raise CliError("--dry-run and --execute exclude each other")
    if bool(a.topic) == bool(a.all_topics):
        raise CliError("choose the partitions with --topic T[:p,...] (repeatable) or --all-topics")
    spec = _reset_spec(a)
    topics = None if a.all_topics else parse_topic_specs(a.topic)
    if is_share_group(cluster, a.group):
        _reset_share(cluster, a, topics, spec)
        return
    state, plan = plan_reset(cluster, a.group, topics, spec)
    _table(
        f"Offsets of group {a.group}",
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        [[a.group, r.topic, r.partition, r.current, r.new] for r in plan],
    )
    if state == "Dead":
        print(f"(group {a.group!r} does not exist yet: --execute creates it with these offsets)")
    if not a.execute:
        print("Dry run: nothing changed. Add --execute to commit these offsets.")
        return
    execute_reset(cluster, a.group, plan)
    print(f"Committed {len(plan)} offset(s) for group {a.group!r}.")


def _reset_share(
    cluster: Cluster,
    a: argparse.Namespace,
    topics: list[tuple[str, list[int] | None]] | None,
    spec: ResetSpec,
) -> None:
    _, plan = plan_share_reset(cluster, a.group, topics, spec)
    _table(
        f"Start offsets of share group {a.group}",
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"],
        [[a.group, r.topic, r.partition, r.current, r.new] for r in plan],
    )
    if not a.execute:
        print("Dry run: nothing changed. Add --execute to set these start offsets.")
        return
    execute_share_reset(cluster, a.group, plan)
    print(f"Set {len(plan)} start offset(s) of share group {a.group!r}.")


def _cmd_delete_offsets(cluster: Cluster, a: argparse.Namespace) -> None:
    if not is_share_group(cluster, a.group):
        raise CliError(
            f"{a.group!r} is not a share group: delete-offsets drops share-partition state "
            "(use reset-offsets for a consumer group)"
        )
    results = delete_share_offsets(cluster, a.group, list(dict.fromkeys(a.topic)))
    failed = []
    for topic, code in results.items():
        if code == ErrorCode.NO_ERROR:
            print(f"Deleted the start offsets of topic {topic!r} in share group {a.group!r}.")
        else:
            failed.append(f"topic {topic!r}: {code.name}")
    if failed:
        raise CliError(f"delete start offsets of share group {a.group!r}: " + "; ".join(failed))


def _run(a: argparse.Namespace) -> int:
    global _json_tables
    as_json = getattr(a, "output", "text") == "json"
    notes = io.StringIO()
    with WireClient(a.bootstrap_server) as c:
        cluster = Cluster(c)
        try:
            if as_json:
                _json_tables = []
            with contextlib.redirect_stdout(notes) if as_json else contextlib.nullcontext():
                {
                    "list": _cmd_list,
                    "describe": _cmd_describe,
                    "delete": _cmd_delete,
                    "reset-offsets": _cmd_reset,
                    "delete-offsets": _cmd_delete_offsets,
                }[a.action](cluster, a)
            if as_json:
                lines = [ln for ln in notes.getvalue().splitlines() if ln.strip()]
                print(json.dumps({"tables": _json_tables, "messages": lines}, default=str))
        finally:
            _json_tables = None
            cluster.close()
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "groups",
        help="list, describe, delete consumer and share groups or reset (share groups: delete) offsets",
    )
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    acts = p.add_subparsers(dest="action", required=True)

    lst = acts.add_parser("list", help="the groups of the cluster")
    lst.add_argument(
        "--state",
        action="append",
        metavar="STATE[,STATE]",
        help=f"only groups in these states ({', '.join(GROUP_STATES)}); shows the state column",
    )
    lst.add_argument("-v", "--verbose", action="store_true", help="show state and protocol type")

    d = acts.add_parser("describe", help="state, members and per-partition offsets and lag")
    d.add_argument("--group", action="append", metavar="GROUP", help="repeatable")
    d.add_argument("--all-groups", action="store_true")
    d.add_argument("--members", action="store_true", help="only the members")
    d.add_argument("--offsets", action="store_true", help="only the offsets and lag")
    d.add_argument("--state", action="store_true", help="only the state line")

    x = acts.add_parser("delete", help="delete Empty groups and their committed offsets")
    x.add_argument("--group", action="append", required=True, metavar="GROUP", help="repeatable")

    r = acts.add_parser(
        "reset-offsets", help="reset a group's committed offsets (dry run unless --execute)"
    )
    r.add_argument("--group", required=True)
    r.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,...]",
        help="T (every partition) or T:0,2; repeatable",
    )
    r.add_argument(
        "--all-topics", action="store_true", help="every topic the group has offsets for"
    )
    how = r.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int, metavar="N")
    how.add_argument(
        "--to-datetime", metavar="ISO", help="e.g. 2024-05-01T12:00:00 (local) or ...+00:00"
    )
    how.add_argument("--shift-by", type=int, metavar="N", help="negative moves back")
    r.add_argument(
        "--execute", action="store_true", help="commit the new offsets (default: dry run)"
    )
    r.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")

    o = acts.add_parser(
        "delete-offsets",
        help="drop a share group's share-partition state of whole topics (it must be Empty)",
    )
    o.add_argument("--group", required=True)
    o.add_argument("--topic", action="append", required=True, metavar="TOPIC", help="repeatable")

    for q in (lst, d, x, r, o):
        q.add_argument("--bootstrap-server", default=argparse.SUPPRESS)
        q.add_argument(
            "--output",
            choices=("text", "json"),
            default="text",
            help="json: one document with every table (rows as objects) and the messages",
        )
    p.set_defaults(func=_run)
