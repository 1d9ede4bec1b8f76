"""`kafkalite get-offsets` and `kafkalite delete-records`, with the flags and output of
kafka-get-offsets.sh and kafka-delete-records.sh (`log-dirs` is in cli.log_dirs).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from kafkalite.cli.admin_common import (
    add_connection_arguments,
    add_output_argument,
    connect_cluster,
    exits_2,
    one_line_usage_errors,
    print_json,
    split_list,
)
from kafkalite.cli.group_ops import Cluster, list_offsets, topic_partitions
from kafkalite.cli.wire import CliError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import DeleteRecordsRequest

TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4}


def parse_time(text: str) -> int:
    """earliest|latest|max-timestamp|earliest-local, -1/-2/-3/-4, or a timestamp in epoch ms."""
    if text.lower() in TIMES:
        return TIMES[text.lower()]
    try:
        value = int(text)
    except ValueError:
        raise CliError(
            f"--time {text!r}: one of {', '.join(TIMES)}, -1, -2, -3, -4 or epoch milliseconds"
        ) from None
    if value < -4:
        raise CliError(f"--time {value}: negative values are -1 (latest) to -4 (earliest-local)")
    return value


def parse_partitions(text: str | None) -> set[int] | None:
    """0,2,5-7 -> {0, 2, 5, 6, 7}."""
    if not text:
        return None
    out: set[int] = set()
    for item in split_list([text]):
        lo, sep, hi = item.partition("-")
        try:
            out.update(range(int(lo), int(hi) + 1) if sep else [int(lo)])
        except ValueError:
            raise CliError(
                f"--partitions expects numbers or ranges like 0,2,5-7, got {item!r}"
            ) from None
    return out


def _matching_topics(cluster: Cluster, pattern: str | None, internal: bool) -> list[str]:
    md = cluster.bootstrap.metadata(None)
    names = sorted(t.name for t in md.topics if t.name and (internal or not t.is_internal))
    if pattern is None:
        return names
    if pattern in names:
        return [pattern]
    try:
        rx = re.compile(pattern)
    except re.error:
        rx = None
    found = [n for n in names if rx is not None and rx.fullmatch(n)]
    if not found:
        raise CliError(f"topic {pattern!r} does not exist")
    return found


@exits_2
def _get_offsets(a: argparse.Namespace) -> int:
    timestamp = parse_time(a.time)
    wanted = parse_partitions(a.partitions)
    specs: list[tuple[str | None, set[int] | None]] = []
    for item in split_list([a.topic_partitions] if a.topic_partitions else None):
        topic, _, part_text = item.partition(":")
        specs.append((topic, parse_partitions(part_text)))
    if not specs:
        specs = [(a.topic, wanted)]
    elif a.topic or wanted:
        raise CliError("--topic-partitions excludes --topic and --partitions")
    cluster = connect_cluster(a)
    try:
        tps = []
        for pattern, parts in specs:
            topics = _matching_topics(cluster, pattern, not a.exclude_internal_topics)
            leaders = topic_partitions(cluster, topics)
            for t in topics:
                tps += [(t, p) for p in sorted(leaders[t]) if parts is None or p in parts]
        if wanted and not tps:
            raise CliError(f"no partition {a.partitions} in the chosen topics")
        offsets = list_offsets(cluster, tps, timestamp, strict=False)
    finally:
        cluster.close()
    rows = sorted(offsets.items())
    if a.output == "json":
        print_json([{"topic": t, "partition": p, "offset": o} for (t, p), o in rows])
    else:
        for (t, p), o in rows:
            print(f"{t}:{p}:{'' if o is None else o}")
    return 0


def _read_offset_json(path: str) -> list[tuple[str, int, int]]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path} is not JSON: {exc}") from None
    try:
        version = doc.get("version", 1)
        if version != 1:
            raise CliError(f"{path}: unknown version {version} (expected 1)")
        out = [(str(p["topic"]), int(p["partition"]), int(p["offset"])) for p in doc["partitions"]]
    except (AttributeError, KeyError, TypeError, ValueError):
        raise CliError(
            f'{path} should look like {{"partitions": [{{"topic": "t", "partition": 0, '
            f'"offset": 5}}], "version": 1}}'
        ) from None
    if len({(t, p) for t, p, _ in out}) != len(out):
        raise CliError(f"{path} names a partition twice")
    return out


@exits_2
def _delete_records(a: argparse.Namespace) -> int:
    wanted = _read_offset_json(a.offset_json_file)
    if a.output != "json":
        print("Executing records delete operation")
    results: dict[tuple[str, int], tuple[int, int]] = {}
    cluster = connect_cluster(a)
    try:
        leaders = topic_partitions(cluster, sorted({t for t, _, _ in wanted}))
        by_leader: dict[int, list[tuple[str, int, int]]] = {}
        for t, p, off in wanted:
            leader = leaders.get(t, {}).get(p, -1)
            if p not in leaders.get(t, {}):
                results[(t, p)] = (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif leader < 0:
                results[(t, p)] = (-1, ErrorCode.LEADER_NOT_AVAILABLE)
            else:
                by_leader.setdefault(leader, []).append((t, p, off))
        cls = DeleteRecordsRequest
        for leader, parts in by_leader.items():
            by_topic: dict[str, list[Any]] = {}
            for t, p, off in parts:
                by_topic.setdefault(t, []).append(
                    cls.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=off)
                )
            req = cls(
                topics=[
                    cls.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()
                ],
                timeout_ms=30000,
            )
            for rt in cluster.node(leader).send(req).topics:
                for rp in rt.partitions:
                    results[(rt.name, rp.partition_index)] = (rp.low_watermark, rp.error_code)
    finally:
        cluster.close()
    rows = sorted(results.items())
    if a.output == "json":
        print_json(
            [
                {
                    "topic": t,
                    "partition": p,
                    "lowWatermark": lw if not err else None,
                    "error": ErrorCode(err).name if err else None,
                }
                for (t, p), (lw, err) in rows
            ]
        )
    else:
        print("Records delete operation completed:")
        for (t, p), (lw, err) in rows:
            if err:
                print(f"partition: {t}-{p}\terror: {ErrorCode(err).name}")
            else:
                print(f"partition: {t}-{p}\tlow_watermark: {lw}")
    failed = [f"{t}-{p}: {ErrorCode(err).name}" for (t, p), (_, err) in rows if err]
    if failed:
        raise CliError("records not deleted from " + ", ".join(failed))
    return 0


def add_parsers(sub: Any) -> None:
    g = sub.add_parser(
        "get-offsets", help="offsets of partitions at a time (kafka-get-offsets.sh flags)"
    )
    one_line_usage_errors(g)
    add_connection_arguments(g)
    g.add_argument("--topic", metavar="TOPIC", help="a name or a regular expression; all if absent")
    g.add_argument("--partitions", metavar="0,1,5-7")
    g.add_argument("--topic-partitions", metavar="T:0-2,U", help="instead of --topic/--partitions")
    g.add_argument(
        "--time",
        default="latest",
        metavar="TIME",
        help="earliest (-2), latest (-1, default), max-timestamp (-3), earliest-local (-4) or epoch ms",
    )
    g.add_argument("--exclude-internal-topics", action="store_true")
    add_output_argument(g)
    g.set_defaults(func=_get_offsets)

    d = sub.add_parser(
        "delete-records",
        help="delete records before offsets from a JSON file (kafka-delete-records.sh flags)",
    )
    one_line_usage_errors(d)
    add_connection_arguments(d)
    d.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help='{"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}',
    )
    add_output_argument(d)
    d.set_defaults(func=_delete_records)
