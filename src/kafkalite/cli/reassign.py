"""`kafkalite reassign generate|execute|verify|cancel`: kafka-reassign-partitions.sh over KIP-455
(Alter/ListPartitionReassignments to the controller), its JSON files, throttle configs and a progress view.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkalite.cli import reassign_plan as plan
from kafkalite.cli.admin_common import LoginCluster, add_connection_arguments, connect_cluster
from kafkalite.cli.reassign_plan import TP, Assignment, tp_text
from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkalite.protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
from kafkalite.protocol.schema import APIS

_RESOURCE_TOPIC, _RESOURCE_BROKER = 2, 4
_SET, _DELETE = 0, 1
# DescribeConfigs' config_source of a value set on the resource itself
_OWN_SOURCE = {
    _RESOURCE_TOPIC: 1,
    _RESOURCE_BROKER: 2,
}  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG
_CONTROLLER_TRIES = 20
_PROGRESS_TIMEOUT_S = 5.0
_METADATA_SETTLE_TRIES = 10


def read_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


# -- what the cluster says ------------------------------------------------------------------------------


def live_brokers(c: WireClient) -> dict[int, str | None]:
    """Live broker id -> rack (DescribeCluster, or Metadata from a broker without it)."""
    if 60 in c.versions:
        resp = c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
        if resp.error_code:
            raise CliError(f"DescribeCluster: {ErrorCode.name_of(resp.error_code)}")
        return {b.broker_id: b.rack for b in resp.brokers}
    return {b.node_id: b.rack for b in c.metadata([]).brokers}


def current_assignment(c: WireClient, topics: Sequence[str]) -> tuple[Assignment, Any]:
    """The replicas of every partition of `topics` (each must exist), and the Metadata response."""
    md = c.metadata(sorted(set(topics)))
    out: Assignment = {}
    for t in md.topics:
        if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise CliError(f"topic {t.name} does not exist")
        if t.error_code:
            raise CliError(f"topic {t.name}: {ErrorCode.name_of(t.error_code)}")
        for p in t.partitions:
            out[(t.name, p.partition_index)] = list(p.replica_nodes)
    return out, md


def _controller(cluster: LoginCluster) -> WireClient:
    """A connection to the controller (Kafka's ZooKeeper mode: only it serves reassignments)."""
    for _ in range(_CONTROLLER_TRIES):
        md = cluster.bootstrap.metadata([])
        nodes = {b.node_id: (b.host, b.port) for b in md.brokers}
        if md.controller_id in nodes:
            return cluster.connect(*nodes[md.controller_id])
        time.sleep(0.25)
    raise CliError("the cluster has no controller (is it running in cluster mode?)")


def _to_controller(cluster: LoginCluster, request: Any, api_key: int) -> Any:
    """Send to the controller, following it when it moves (NOT_CONTROLLER)."""
    resp = None
    for _ in range(_CONTROLLER_TRIES):
        c = _controller(cluster)
        if api_key not in c.versions:
            raise CliError(
                f"broker {c.host}:{c.port} does not serve {APIS[api_key].name}: partition "
                "reassignment needs a cluster (zookeeper.connect; `kafkalite cluster up`)"
            )
        resp = c.send(request)
        if resp.error_code != ErrorCode.NOT_CONTROLLER:
            break
        time.sleep(0.25)
    assert resp is not None
    if resp.error_code:
        raise CliError(
            f"{APIS[api_key].name}: {ErrorCode.name_of(resp.error_code)}"
            + (f" ({resp.error_message})" if resp.error_message else "")
        )
    return resp


def ongoing(cluster: LoginCluster) -> dict[TP, tuple[list[int], list[int], list[int]]]:
    """Reassignments in flight: partition -> (replicas, adding, removing)."""
    cls = ListPartitionReassignmentsRequest
    resp = _to_controller(cluster, cls(topics=None), 46)
    return {
        (t.name, p.partition_index): (
            list(p.replicas),
            list(p.adding_replicas),
            list(p.removing_replicas),
        )
        for t in resp.topics
        for p in t.partitions
    }


def _check_known(
    target: Mapping[TP, Sequence[int]], current: Mapping[TP, Any], live: Mapping[int, Any]
) -> None:
    unknown_parts = sorted(tp for tp in target if tp not in current)
    if unknown_parts:
        raise CliError(
            "partition(s) " + ", ".join(map(tp_text, unknown_parts)) + " do not exist "
            "(UNKNOWN_TOPIC_OR_PARTITION)"
        )
    unknown_brokers = sorted({b for r in target.values() for b in r if b not in live})
    if unknown_brokers:
        raise CliError(
            f"unknown broker id(s) {','.join(map(str, unknown_brokers))} "
            f"(live brokers: {','.join(map(str, sorted(live)))})"
        )


# -- configs --------------------------------------------------------------------------------------------


def _alter_configs(
    c: WireClient, resource_type: int, name: str, ops: list[tuple[str, int, Any]]
) -> None:
    cls = IncrementalAlterConfigsRequest
    res_cls = cls.AlterConfigsResource
    res = res_cls(
        resource_type=resource_type,
        resource_name=name,
        configs=[res_cls.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops],
    )
    r = c.send(cls(resources=[res], validate_only=False)).responses[0]
    if r.error_code:
        kind = "broker" if resource_type == _RESOURCE_BROKER else "topic"
        raise CliError(
            f"configs of {kind} {name}: {ErrorCode.name_of(r.error_code)}"
            + (f" ({r.error_message})" if r.error_message else "")
        )


def _dynamic_set(c: WireClient, resource_type: int, name: str, keys: Sequence[str]) -> list[str]:
    """Which of `keys` are set on this resource itself."""
    cls = DescribeConfigsRequest
    res = cls.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=list(keys)
    )
    resp = c.send(cls(resources=[res], include_synonyms=False, include_documentation=False))
    r = resp.results[0]
    if r.error_code:
        return []
    own = _OWN_SOURCE[resource_type]
    return [e.name for e in r.configs if e.name in keys and e.config_source == own]


def set_throttles(
    cluster: LoginCluster, current: Assignment, target: Assignment, rate: int
) -> None:
    """Kafka's --throttle: the rate on every broker of a moving partition, and the replicas to throttle
    on each moving topic (the current replicas as leaders, the adding ones as followers)."""
    leaders = plan.leader_throttles(current, target)
    followers = plan.follower_throttles(current, target)
    for topic in sorted(set(leaders) | set(followers)):
        ops = [(plan.LEADER_REPLICAS, _SET, leaders.get(topic, ""))]
        ops.append((plan.FOLLOWER_REPLICAS, _SET, followers.get(topic, "")))
        _alter_configs(cluster.bootstrap, _RESOURCE_TOPIC, topic, ops)
    brokers = plan.reassigning_brokers(current, target)
    for b in brokers:
        ops = [(plan.LEADER_RATE, _SET, str(rate)), (plan.FOLLOWER_RATE, _SET, str(rate))]
        _alter_configs(cluster.node(b), _RESOURCE_BROKER, str(b), ops)
    print(
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure "
        "the throttle is removed."
    )
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def clear_throttles(cluster: LoginCluster, topics: Sequence[str]) -> None:
    """Remove the throttle configs Kafka's tool sets, wherever they are set (Kafka's --verify)."""
    cleared = []
    for b in sorted(cluster.nodes()):
        c = cluster.node(b)
        names = _dynamic_set(c, _RESOURCE_BROKER, str(b), plan.BROKER_THROTTLES)
        if names:
            _alter_configs(c, _RESOURCE_BROKER, str(b), [(n, _DELETE, None) for n in names])
            cleared.append(b)
    if cleared:
        print(f"Clearing broker-level throttles on brokers {','.join(map(str, cleared))}")
    for t in sorted(set(topics)):
        names = _dynamic_set(cluster.bootstrap, _RESOURCE_TOPIC, t, plan.TOPIC_THROTTLES)
        if names:
            _alter_configs(
                cluster.bootstrap, _RESOURCE_TOPIC, t, [(n, _DELETE, None) for n in names]
            )
            print(f"Clearing topic-level throttles on topic {t}")


# -- commands -------------------------------------------------------------------------------------------


def _generate(cluster: LoginCluster, a: argparse.Namespace) -> int:
    topics = plan.parse_topics_to_move(read_file(a.topics_to_move_json_file))
    wanted = plan.parse_broker_list(a.broker_list)
    live = live_brokers(cluster.bootstrap)
    unknown = [b for b in wanted if b not in live]
    if unknown:
        raise CliError(
            f"unknown broker id(s) {','.join(map(str, unknown))} "
            f"(live brokers: {','.join(map(str, sorted(live)))})"
        )
    racks = {b: (None if a.disable_rack_aware else live[b]) for b in wanted}
    current, _ = current_assignment(cluster.bootstrap, topics)
    proposed = plan.propose(current, racks, random.Random(a.seed) if a.seed is not None else None)
    print("Current partition replica assignment")
    print(plan.assignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(plan.assignment_json(proposed))
    return 0


def _execute(cluster: LoginCluster, a: argparse.Namespace) -> int:
    target = plan.parse_reassignment(read_file(a.reassignment_json_file))
    current, _ = current_assignment(cluster.bootstrap, [t for t, _ in target])
    _check_known(target, current, live_brokers(cluster.bootstrap))
    in_flight = ongoing(cluster)
    if in_flight and not a.additional:
        raise CliError(
            "Cannot execute because there is an existing partition assignment. Use --additional "
            "to override this and create a new partition assignment in addition to the existing one."
        )
    print("Current partition replica assignment")
    print()
    print(plan.assignment_json({tp: current[tp] for tp in target}))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if a.throttle is not None and a.throttle >= 0:
        set_throttles(cluster, current, target, a.throttle)
    cls = AlterPartitionReassignmentsRequest
    by_topic: dict[str, list[Any]] = {}
    for (t, p), replicas in sorted(target.items()):
        by_topic.setdefault(t, []).append(
            cls.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=replicas)
        )
    topics = [cls.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    resp = _to_controller(cluster, cls(topics=topics, timeout_ms=a.timeout_ms), 45)
    started, failed = _partition_results(resp)
    if started:
        print(f"Successfully started partition reassignments for {','.join(map(tp_text, started))}")
    if failed:
        raise CliError("Error reassigning partition(s): " + "; ".join(failed))
    if a.wait:
        watch(cluster, target, a.interval, a.wait_timeout)
        return _verify_report(cluster, target, a.preserve_throttles)
    return 0


def _partition_results(resp: Any) -> tuple[list[TP], list[str]]:
    ok: list[TP] = []
    failed: list[str] = []
    for t in resp.responses:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if p.error_code:
                why = ErrorCode.name_of(p.error_code)
                failed.append(
                    f"{tp_text(tp)}: {why}" + (f" ({p.error_message})" if p.error_message else "")
                )
            else:
                ok.append(tp)
    return sorted(ok), failed


def _verify_report(cluster: LoginCluster, target: Assignment, preserve: bool) -> int:
    in_flight = set(ongoing(cluster))
    for _ in range(_METADATA_SETTLE_TRIES):
        # a move the controller just finished reaches the brokers' metadata a moment later
        current, _ = current_assignment(cluster.bootstrap, [t for t, _ in target])
        if all(tp in in_flight or current.get(tp) == target[tp] for tp in target):
            break
        time.sleep(0.2)
    lines, done = plan.status_lines(target, current, in_flight)
    print("\n".join(lines))
    if done and not preserve:
        clear_throttles(cluster, [t for t, _ in target])
    return 0


def _verify(cluster: LoginCluster, a: argparse.Namespace) -> int:
    target = plan.parse_reassignment(read_file(a.reassignment_json_file))
    current, _ = current_assignment(cluster.bootstrap, [t for t, _ in target])
    unknown = sorted(tp for tp in target if tp not in current)
    if unknown:
        raise CliError(
            "partition(s) " + ", ".join(map(tp_text, unknown)) + " do not exist "
            "(UNKNOWN_TOPIC_OR_PARTITION)"
        )
    if a.watch:
        watch(cluster, target, a.interval, a.wait_timeout)
    return _verify_report(cluster, target, a.preserve_throttles)


def _cancel(cluster: LoginCluster, a: argparse.Namespace) -> int:
    target = plan.parse_reassignment(read_file(a.reassignment_json_file))
    active = sorted(tp for tp in ongoing(cluster) if tp in target)
    if not active:
        print("None of the specified partition reassignments are active.")
    else:
        cls = AlterPartitionReassignmentsRequest
        by_topic: dict[str, list[Any]] = {}
        for t, p in active:
            by_topic.setdefault(t, []).append(
                cls.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=None)
            )
        topics = [cls.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        resp = _to_controller(cluster, cls(topics=topics, timeout_ms=a.timeout_ms), 45)
        cancelled, failed = _partition_results(resp)
        if cancelled:
            print(
                "Successfully cancelled partition reassignment(s) for: "
                + ",".join(map(tp_text, cancelled))
            )
        if failed:
            raise CliError("Error cancelling partition reassignment(s): " + "; ".join(failed))
    if not a.preserve_throttles:
        clear_throttles(cluster, [t for t, _ in target])
    return 0


# -- progress -------------------------------------------------------------------------------------------


def _sizes(
    cluster: LoginCluster, nodes: Mapping[int, tuple[str, int]], brokers: set[int], tps: set[TP]
) -> dict[tuple[int, TP], int]:
    """(broker, partition) -> bytes of its (current, not future) replica, by DescribeLogDirs."""
    cls = DescribeLogDirsRequest
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    req = cls(
        topics=[cls.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
    )
    out: dict[tuple[int, TP], int] = {}
    for b in sorted(brokers):
        if b not in nodes:
            continue  # not alive: unknown this round
        host, port = nodes[b]
        try:  # a fresh short-lived connection: a broker that stalls or restarts costs one round
            with WireClient(
                f"{host}:{port}", timeout=_PROGRESS_TIMEOUT_S, sasl_login=cluster.login
            ) as c:
                resp = c.send(req)
        except (CliError, OSError):
            continue  # a broker that does not answer shows as unknown this round
        for d in resp.results:
            if d.error_code or d.log_dir.startswith("remote://"):
                continue  # (the remote tier, KIP-405: not copied by a reassignment)
            for lt in d.topics:
                for lp in lt.partitions:
                    if not lp.is_future_key:
                        key = (b, (lt.name, lp.partition_index))
                        out[key] = out.get(key, 0) + lp.partition_size
    return out


def snapshot(cluster: LoginCluster, only: set[TP] | None) -> list[plan.ReplicaProgress] | None:
    """The adding replicas of every partition moving now (of `only`, when given) and their progress;
    None when none of those partitions is moving (a move that only removes replicas has no row)."""
    moves = ongoing(cluster)
    adding = {tp: m[1] for tp, m in moves.items() if only is None or tp in only}
    if not adding:
        return None
    md = cluster.bootstrap.metadata(sorted({t for t, _ in adding}))
    leaders: dict[TP, int] = {}
    isr: dict[TP, list[int]] = {}
    for t in md.topics:
        for p in t.partitions:
            leaders[(t.name, p.partition_index)] = p.leader_id
            isr[(t.name, p.partition_index)] = list(p.isr_nodes)
    brokers = {b for tp in adding for b in adding[tp]} | {
        leaders[tp] for tp in adding if leaders.get(tp, -1) >= 0
    }
    nodes = {b.node_id: (b.host, b.port) for b in md.brokers}
    sizes = _sizes(cluster, nodes, brokers, set(adding))
    return plan.progress_rows(adding, leaders, isr, sizes)


def _row_text(r: plan.ReplicaProgress) -> str:
    return (
        f"{tp_text(r.tp)} replica {r.replica} (leader {r.leader}): copied "
        f"{plan.human_bytes(r.copied)} of {plan.human_bytes(r.size)} ({r.fraction:.0%}), "
        f"lag {plan.human_bytes(r.lag_bytes)}, in ISR: {'yes' if r.in_isr else 'no'}"
    )


def _rich_view(rows: list[plan.ReplicaProgress], elapsed: float) -> Any:
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    table = Table(title=f"Partition reassignment in progress ({elapsed:.0f} s)")
    for col in (
        "partition",
        "adding replica",
        "leader",
        "copied",
        "size",
        "progress",
        "lag",
        "in ISR",
    ):
        table.add_column(col, no_wrap=True)
    for r in rows:
        table.add_row(
            tp_text(r.tp),
            str(r.replica),
            str(r.leader) if r.leader >= 0 else "none",
            plan.human_bytes(r.copied),
            plan.human_bytes(r.size),
            ProgressBar(total=1.0, completed=r.fraction, width=24),
            plan.human_bytes(r.lag_bytes),
            "yes" if r.in_isr else "no",
        )
    return table


def watch(
    cluster: LoginCluster, target: Mapping[TP, Any], interval: float, timeout: float | None
) -> None:
    """Show the progress of the moves of `target` until ListPartitionReassignments has none of them
    (a rich live table on a terminal, else a line per adding replica per round)."""
    only = set(target)
    started = time.monotonic()
    tty = sys.stdout.isatty()
    live: Any = None
    if tty:
        try:
            from rich.live import Live
        except ImportError:
            tty = False
        else:
            live = Live(refresh_per_second=4, transient=False)
            live.start()
    try:
        while True:
            rows = snapshot(cluster, only)
            elapsed = time.monotonic() - started
            if rows is None:
                break
            if live is not None:
                live.update(_rich_view(rows, elapsed))
            else:
                print(f"after {elapsed:.1f} s:", flush=True)
                if not rows:
                    print("  (moves in flight remove replicas only)", flush=True)
                for r in rows:
                    print("  " + _row_text(r), flush=True)
            if timeout is not None and elapsed > timeout:
                raise CliError(f"the reassignment is still in progress after {timeout:g} s")
            time.sleep(interval)
    finally:
        if live is not None:
            live.stop()
    print(
        f"No reassignment of these partitions in progress after {time.monotonic() - started:.1f} s."
    )


# -- parser ---------------------------------------------------------------------------------------------


def _run(a: argparse.Namespace) -> int:
    fn = {"generate": _generate, "execute": _execute, "verify": _verify, "cancel": _cancel}[
        a.action
    ]
    if a.action == "generate":
        plan.parse_topics_to_move(read_file(a.topics_to_move_json_file))  # before connecting
        plan.parse_broker_list(a.broker_list)
    else:
        plan.parse_reassignment(read_file(a.reassignment_json_file))
    cluster = connect_cluster(a)
    try:
        return fn(cluster, a)
    except OSError as exc:  # a broker that stops answering mid-command (timeout, reset)
        raise CliError(f"a broker stopped answering: {exc.strerror or exc}") from None
    finally:
        cluster.close()


ACTIONS = ("generate", "execute", "verify", "cancel")


def kafka_style(argv: list[str]) -> list[str]:
    """kafka-reassign-partitions.sh's flag form (`reassign --bootstrap-server B --execute ...`) as
    kafkalite's subcommand form (`reassign execute --bootstrap-server B ...`)."""
    if not argv or argv[0] != "reassign" or any(a in ACTIONS for a in argv[1:2]):
        return argv
    flags = [a for a in argv[1:] if a.startswith("--") and a[2:] in ACTIONS]
    if len(flags) != 1:
        return argv
    return ["reassign", flags[0][2:], *(a for a in argv[1:] if a != flags[0])]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "reassign",
        help="move partitions between brokers (kafka-reassign-partitions.sh)",
        description="Generate, start, check or cancel partition reassignments with Kafka's JSON "
        'files: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}',
    )
    rsub = p.add_subparsers(dest="action", required=True)

    g = rsub.add_parser("generate", help="propose moving topics onto a list of brokers")
    add_connection_arguments(g)
    g.add_argument(
        "--topics-to-move-json-file",
        required=True,
        metavar="FILE",
        help='{"topics": [{"topic": "foo"}], "version": 1}',
    )
    g.add_argument("--broker-list", required=True, metavar="1,2,3", help="the brokers to move onto")
    g.add_argument("--disable-rack-aware", action="store_true", help="ignore the brokers' racks")
    g.add_argument("--seed", type=int, help="fix the random start of the placement")

    def common(q: argparse.ArgumentParser) -> None:
        add_connection_arguments(q)
        q.add_argument("--reassignment-json-file", required=True, metavar="FILE")
        q.add_argument(
            "--preserve-throttles", action="store_true", help="leave the throttle configs in place"
        )
        q.add_argument("--timeout-ms", type=int, default=60000, help=argparse.SUPPRESS)

    def watching(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--interval", type=float, default=1.0, help="seconds between progress rounds"
        )
        q.add_argument(
            "--wait-timeout", type=float, metavar="SECONDS", help="give up watching after this long"
        )

    e = rsub.add_parser("execute", help="start the reassignment of a JSON file")
    common(e)
    e.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES/S",
        help="limit replication of the moving replicas (leader/follower.replication.throttled.rate)",
    )
    e.add_argument(
        "--additional", action="store_true", help="start it even while other moves are in flight"
    )
    e.add_argument("--wait", action="store_true", help="show progress until the moves are done")
    watching(e)

    v = rsub.add_parser(
        "verify", help="whether each partition's move is complete; clears throttles"
    )
    common(v)
    v.add_argument("--watch", action="store_true", help="show progress until the moves are done")
    watching(v)

    c = rsub.add_parser("cancel", help="cancel the moves of a JSON file still in flight")
    common(c)
    p.set_defaults(func=_run)
