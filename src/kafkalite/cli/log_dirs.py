"""`kafkalite log-dirs describe` (a table, or --json) and kafka-log-dirs.sh's `--describe` (its exact output):
DescribeLogDirs of each broker, every directory with its error and its partitions' sizes and offset lags; with
tiered storage the remote tier is the directory "remote://..." and its sizes those of the partitions it leads.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkalite.cli.admin_common import (
    add_connection_arguments,
    add_output_argument,
    connect_cluster,
    exits_2,
    one_line_usage_errors,
    print_json,
    print_table,
    split_list,
)
from kafkalite.cli.wire import CliError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import DescribeLogDirsRequest


def broker_doc(broker_id: int, resp: Any, topics: set[str]) -> dict[str, Any]:
    """One broker's DescribeLogDirs answer in kafka-log-dirs.sh's JSON shape (only `topics`, if any)."""
    dirs = []
    for r in resp.results:
        parts = [
            {
                "partition": f"{t.name}-{p.partition_index}",
                "size": p.partition_size,
                "offsetLag": p.offset_lag,
                "isFuture": bool(p.is_future_key),
            }
            for t in sorted(r.topics, key=lambda t: t.name)
            if not topics or t.name in topics
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
        ]
        dirs.append(
            {
                "partitions": parts,
                "error": ErrorCode(r.error_code).name if r.error_code else None,
                "logDir": r.log_dir,
            }
        )
    return {"broker": broker_id, "logDirs": dirs}


def table_rows(brokers: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per partition replica (a directory without partitions still gets a row)."""
    rows: list[list[Any]] = []
    for b in brokers:
        for d in b["logDirs"]:
            if not d["partitions"]:
                rows.append([b["broker"], d["logDir"], d["error"], None, None, None, None])
            for p in d["partitions"]:
                rows.append(
                    [
                        b["broker"],
                        d["logDir"],
                        d["error"],
                        p["partition"],
                        p["size"],
                        p["offsetLag"],
                        "yes" if p["isFuture"] else "no",
                    ]
                )
    return rows


@exits_2
def _run(a: argparse.Namespace) -> int:
    if a.action is None and not a.describe:
        raise CliError("kafkalite log-dirs needs describe (or --describe)")
    kafka_form = a.action is None
    as_json = a.output == "json" or a.json
    topics = set(split_list(a.topic_list))
    try:
        broker_ids = [int(b) for b in split_list(a.broker_list)]
    except ValueError:
        raise CliError("--broker-list expects broker ids like 0,1,2") from None
    brokers = []
    cluster = connect_cluster(a)
    try:
        nodes = cluster.nodes()
        missing = [b for b in broker_ids if b not in nodes]
        if missing:
            raise CliError(
                f"no broker {', '.join(map(str, missing))} in the cluster "
                f"(brokers: {','.join(map(str, sorted(nodes)))})"
            )
        if topics:
            md = cluster.bootstrap.metadata(sorted(topics))
            absent = sorted(t.name for t in md.topics if t.error_code)
            if absent:
                raise CliError(f"topic(s) {', '.join(absent)} do not exist")
        ids = broker_ids or sorted(nodes)
        if kafka_form and not as_json:
            print("Querying brokers for log directories information")
        cls = DescribeLogDirsRequest
        for bid in ids:
            resp = cluster.node(bid).send(cls(topics=None))
            if getattr(resp, "error_code", 0):
                raise CliError(f"broker {bid}: {ErrorCode(resp.error_code).name}")
            brokers.append(broker_doc(bid, resp, topics))
    finally:
        cluster.close()
    if as_json:
        print_json({"brokers": brokers, "version": 1})
    elif kafka_form:
        print(f"Received log directory information from brokers {','.join(map(str, ids))}")
        print_json({"brokers": brokers, "version": 1})
    else:
        print_table(
            ["BROKER", "LOG-DIR", "ERROR", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE"],
            table_rows(brokers),
        )
    return 0


def add_parser(sub: Any) -> None:
    ld = sub.add_parser(
        "log-dirs",
        help="the log directories and partition sizes of brokers (kafka-log-dirs.sh)",
        description="`log-dirs describe` prints a table (--json: kafka-log-dirs.sh's JSON); "
        "`log-dirs --describe` prints what kafka-log-dirs.sh prints. With tiered storage, the "
        "remote tier is the directory remote://<bucket or path>, each partition's remote size "
        "reported by its leader (local directories hold local sizes only, as Kafka's)",
    )
    one_line_usage_errors(ld)
    ld.add_argument("action", nargs="?", choices=("describe",))
    add_connection_arguments(ld)
    ld.add_argument("--describe", action="store_true", help="kafka-log-dirs.sh's form and output")
    ld.add_argument("--topic-list", action="append", metavar="T1,T2")
    ld.add_argument("--broker-list", action="append", metavar="0,1")
    ld.add_argument("--json", action="store_true", help="one JSON document (kafka-log-dirs.sh's)")
    add_output_argument(ld)
    ld.set_defaults(func=_run)
