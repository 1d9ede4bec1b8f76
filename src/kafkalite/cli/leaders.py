"""`kafkalite leaders elect`: preferred or unclean leader election through the controller (ElectLeaders),
as Kafka's kafka-leader-election.sh, with its JSON file format ({"partitions": [{"topic", "partition"}]}).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from kafkalite.cli.admin_common import (
    add_connection_arguments,
    add_output_argument,
    connect_cluster,
    exits_2,
    one_line_usage_errors,
    print_json,
)
from kafkalite.cli.group_ops import Cluster
from kafkalite.cli.wire import EXIT_ERROR, CliError, WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.leaders import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    ElectLeadersRequest,
)

_TYPES = {"preferred": ELECTION_PREFERRED, "unclean": ELECTION_UNCLEAN}
_NOT_CONTROLLER_RETRIES = 5

TopicPartition = tuple[str, int]


def read_election_json(path: str) -> list[TopicPartition]:
    """kafka-leader-election's --path-to-json-file: {"partitions": [{"topic": t, "partition": p}]}."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path} is not JSON: {exc}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CliError(f'{path}: expected {{"partitions": [{{"topic": ..., "partition": ...}}]}}')
    out: list[TopicPartition] = []
    for e in entries:
        topic = e.get("topic") if isinstance(e, dict) else None
        part = e.get("partition") if isinstance(e, dict) else None
        if not isinstance(topic, str) or not isinstance(part, int) or isinstance(part, bool):
            raise CliError(f"{path}: each partition needs a string topic and an int partition: {e}")
        out.append((topic, part))
    dups = sorted({f"{t}-{p}" for t, p in out if out.count((t, p)) > 1})
    if dups:
        raise CliError(f"{path}: duplicate partitions: {', '.join(dups)}")
    return out


def _partitions(a: argparse.Namespace, client: WireClient) -> list[TopicPartition] | None:
    """What to elect: None for every partition of the cluster."""
    if a.all_topic_partitions:
        return None
    if a.path_to_json_file:
        return read_election_json(a.path_to_json_file)
    if a.partition is not None:
        return [(a.topic, a.partition)]
    return [(a.topic, p) for p in range(client.partitions_of(a.topic))]


def _request(election_type: int, tps: list[TopicPartition] | None, timeout_ms: int) -> Any:
    topics: list[Any] | None = None
    if tps is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        topics = [
            ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps)
            for t, ps in by_topic.items()
        ]
    return ElectLeadersRequest(
        election_type=election_type, topic_partitions=topics, timeout_ms=timeout_ms
    )


def elect(
    cluster: Cluster, election_type: int, tps: list[TopicPartition] | None, timeout_ms: int = 60000
) -> dict[TopicPartition, tuple[int, str | None]]:
    """Send ElectLeaders to the controller (found through Metadata; asked again when it moved)."""
    boot = cluster.bootstrap
    results: dict[TopicPartition, tuple[int, str | None]] = {}
    for attempt in range(_NOT_CONTROLLER_RETRIES):
        md = boot.metadata([])
        brokers = {b.node_id: (b.host, b.port) for b in md.brokers}
        if md.controller_id not in brokers:
            raise CliError("the cluster has no controller right now; try again")
        controller = cluster.connect(*brokers[md.controller_id])
        resp = controller.send(_request(election_type, tps, timeout_ms))
        if getattr(resp, "error_code", 0):
            raise CliError(f"ElectLeaders failed: {ErrorCode.name_of(resp.error_code)}")
        results = {
            (r.topic, p.partition_id): (p.error_code, p.error_message)
            for r in resp.replica_election_results
            for p in r.partition_result
        }
        if not any(c == ErrorCode.NOT_CONTROLLER for c, _ in results.values()):
            return results
        time.sleep(0.2 * (attempt + 1))  # the controller moved: ask who it is now
    return results


def _text(election: str, results: dict[TopicPartition, tuple[int, str | None]]) -> None:
    done = [tp for tp, (c, _) in sorted(results.items()) if c == ErrorCode.NO_ERROR]
    needless = [tp for tp, (c, _) in sorted(results.items()) if c == ErrorCode.ELECTION_NOT_NEEDED]
    names = ", ".join
    if done:
        print(
            f"Successfully completed leader election ({election.upper()}) for partitions "
            f"{names(f'{t}-{p}' for t, p in done)}"
        )
    if needless:
        print(
            f"Valid replica already elected for partitions {names(f'{t}-{p}' for t, p in needless)}"
        )
    for (t, p), (code, message) in sorted(results.items()):
        if code not in (ErrorCode.NO_ERROR, ErrorCode.ELECTION_NOT_NEEDED):
            print(
                f"Error completing leader election ({election.upper()}) for partition: {t}-{p}: "
                f"{ErrorCode.name_of(code)}{': ' + message if message else ''}"
            )
    if not results:
        print("No partition needed a leader election")


@exits_2
def _elect(a: argparse.Namespace) -> int:
    if a.partition is not None and a.topic is None:
        raise CliError("--partition needs --topic")
    chosen = [x for x in (a.topic, a.all_topic_partitions or None, a.path_to_json_file) if x]
    if len(chosen) != 1:
        raise CliError(
            "exactly one of --topic, --all-topic-partitions or --path-to-json-file is required"
        )
    cluster = connect_cluster(a)
    try:
        tps = _partitions(a, cluster.bootstrap)
        results = elect(cluster, _TYPES[a.election_type.lower()], tps, a.timeout_ms)
    finally:
        cluster.close()
    if a.output == "json":
        print_json(
            [
                {
                    "topic": t,
                    "partition": p,
                    "error": ErrorCode.name_of(c) if c else None,
                    "message": m,
                }
                for (t, p), (c, m) in sorted(results.items())
            ]
        )
    else:
        _text(a.election_type, results)
    failed = [c for c, _ in results.values() if c not in (0, ErrorCode.ELECTION_NOT_NEEDED)]
    return EXIT_ERROR if failed else 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("leaders", help="leader election (Kafka's kafka-leader-election)")
    lsub = p.add_subparsers(dest="leaders_command", required=True)
    _elect_arguments(
        lsub.add_parser(
            "elect", help="elect preferred (or, with no live in-sync replica, unclean) leaders"
        )
    )
    # kafka-leader-election.sh as Kafka users type it (`kafkalite leader-election ...`)
    _elect_arguments(sub.add_parser("leader-election", help="Kafka's spelling of leaders elect"))


def _elect_arguments(e: argparse.ArgumentParser) -> None:
    one_line_usage_errors(e)
    add_connection_arguments(e)
    e.add_argument("--admin.config", dest="command_config", metavar="FILE", help=argparse.SUPPRESS)
    e.add_argument(
        "--election-type",
        required=True,
        type=str.lower,
        choices=sorted(_TYPES),
        help="preferred: the first replica leads if it is in sync; unclean: a live replica "
        "leads a partition that has no leader, even out of sync",
    )
    e.add_argument("--topic", help="a topic (every partition, unless --partition)")
    e.add_argument("--partition", type=int, help="one partition of --topic")
    e.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of the cluster"
    )
    e.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='{"partitions": [{"topic": "t", "partition": 0}, ...]}',
    )
    e.add_argument("--timeout-ms", type=int, default=60000, help="default 60000")
    add_output_argument(e)
    e.set_defaults(func=_elect)
